"""The amendment domain (approve with edits): parsing names the field that is wrong, money keeps its currency's
places, and the digest's canonical text cannot be re-split into another amendment."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from countersign.certificates.amendment import (
    Amendment,
    AmendmentInvalid,
    LineAdjustment,
    check_against,
    from_minor,
    parse_amendment,
    to_minor,
)

WIRE = {
    "currency": "gbp",
    "proposed": "45000.00",
    "certified": "41250.00",
    "lines": [{"line": "L1", "proposed": "20000.00", "certified": "16250.00", "reason": "75% complete"}],
}


def test_an_amendment_parses_into_minor_units_with_its_currency() -> None:
    amendment = parse_amendment(WIRE)
    assert (amendment.currency, amendment.proposed_minor, amendment.certified_minor) == ("GBP", 4_500_000, 4_125_000)
    assert amendment.certified == Decimal("41250.00") and amendment.adjustments[0].difference_minor == -375_000


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"currency": "pounds"}, "amendment.currency"),
        ({"certified": "41250.001"}, "amendment.certified"),
        ({"certified": 41250.5}, "amendment.certified"),
        ({"lines": []}, "amendment.lines"),
        ({"lines": [{**WIRE["lines"][0], "reason": " "}]}, "amendment.lines[0].reason"),  # type: ignore[index]
        ({"lines": [{**WIRE["lines"][0], "certified": "16000.00"}]}, "amendment.lines"),  # type: ignore[index]
        ({"lines": [WIRE["lines"][0], WIRE["lines"][0]]}, "amendment.lines"),  # type: ignore[index]
        ({"extra": 1}, "amendment.extra"),
    ],
)
def test_a_bad_amendment_names_what_is_wrong(change: dict[str, object], field: str) -> None:
    with pytest.raises(AmendmentInvalid) as refused:
        parse_amendment({**WIRE, **change})
    assert refused.value.field == field


def test_the_certified_sum_lies_between_nothing_and_the_claim() -> None:
    amendment = parse_amendment(WIRE)
    check_against(amendment, currency="GBP", proposed=Decimal(45000), claimed=Decimal(46000), reason="measured")
    with pytest.raises(AmendmentInvalid, match="between 0 and the sum applied for"):
        check_against(amendment, currency="GBP", proposed=Decimal(45000), claimed=Decimal(41249), reason="measured")
    with pytest.raises(AmendmentInvalid, match="reason"):
        check_against(amendment, currency="GBP", proposed=Decimal(45000), claimed=Decimal(46000), reason="  ")
    with pytest.raises(AmendmentInvalid, match="proposes"):
        check_against(amendment, currency="GBP", proposed=Decimal(44000), claimed=Decimal(46000), reason="measured")


def test_minor_units_follow_the_currency() -> None:
    assert to_minor(Decimal("1250"), "JPY", field="x") == 1250 and from_minor(1250, "JPY") == Decimal(1250)
    assert to_minor(Decimal("1.250"), "KWD", field="x") == 1250
    with pytest.raises(AmendmentInvalid):
        to_minor(Decimal("12.5"), "JPY", field="x")


texts = st.text(min_size=1, max_size=12)


@given(a=texts, b=texts, c=texts, d=texts)
def test_two_amendments_with_different_words_never_share_a_digest(a: str, b: str, c: str, d: str) -> None:
    first = Amendment("GBP", 100, 90, (LineAdjustment(a, 100, 90, b),))
    second = Amendment("GBP", 100, 90, (LineAdjustment(c, 100, 90, d),))
    assert (first.digest() == second.digest()) == ((a, b) == (c, d))
