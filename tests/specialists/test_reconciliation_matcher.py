import random
from collections.abc import Callable
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from countersign.specialists.errors import SpecialistInputError
from countersign.specialists.reconciliation import CashLine, handle, match_bank_lines, normalise_reference

DAY = date(2026, 10, 15)


def line(line_id: str, days: int = 0, amount: str = "-12.50", reference: str = "PAY-1") -> CashLine:
    return CashLine(id=line_id, date=DAY + timedelta(days=days), amount=Decimal(amount), reference=reference)


def wire(cash_line: CashLine) -> dict[str, str]:
    return {
        "id": cash_line.id,
        "date": cash_line.date.isoformat(),
        "amount": str(cash_line.amount),
        "reference": cash_line.reference,
    }


def bank_payload(bank: list[CashLine], gl: list[CashLine], tolerance: str = "0.55") -> dict[str, Any]:
    return {
        "kind": "bank",
        "date_window_days": 3,
        "unmatched_tolerance": tolerance,
        "accounts": [{"account": "1000", "bank_lines": [wire(b) for b in bank], "gl_lines": [wire(g) for g in gl]}],
    }


# --- matching rules ---------------------------------------------------------------------------------------


def test_amount_must_be_equal() -> None:
    result = match_bank_lines([line("B1", amount="-12.50")], [line("G1", amount="-12.51")], 3)
    assert result.matches == []
    assert result.unmatched_bank == ["B1"]
    assert result.unmatched_gl == ["G1"]


def test_amounts_compare_as_numbers_not_strings() -> None:
    result = match_bank_lines([line("B1", amount="-12.50")], [line("G1", amount="-12.5")], 3)
    assert result.matches == [("B1", "G1")]


def test_reference_compares_after_strip_and_casefold() -> None:
    assert normalise_reference("  Pay-Straße ") == normalise_reference("PAY-STRASSE")
    result = match_bank_lines([line("B1", reference=" pay-1 ")], [line("G1", reference="PAY-1")], 3)
    assert result.matches == [("B1", "G1")]


def test_reference_inner_spaces_still_matter() -> None:
    result = match_bank_lines([line("B1", reference="PAY 1")], [line("G1", reference="PAY-1")], 3)
    assert result.matches == []


@pytest.mark.parametrize(("bank_offset_days", "matches"), [(3, True), (-3, True), (4, False), (-4, False)])
def test_date_window_applies_both_ways(bank_offset_days: int, matches: bool) -> None:
    result = match_bank_lines([line("B1", days=bank_offset_days)], [line("G1")], 3)
    assert (result.matches == [("B1", "G1")]) is matches


def test_matching_is_one_to_one() -> None:
    result = match_bank_lines([line("B1"), line("B2")], [line("G1")], 3)
    assert result.matches == [("B1", "G1")]
    assert result.unmatched_bank == ["B2"]
    assert result.unmatched_gl == []


def test_nearest_gl_date_wins_then_smallest_id() -> None:
    nearest = match_bank_lines([line("B1")], [line("G1", days=-3), line("G9", days=-1)], 3)
    assert nearest.matches == [("B1", "G9")]
    tie = match_bank_lines([line("B1")], [line("G2", days=1), line("G1", days=-1)], 3)
    assert tie.matches == [("B1", "G1")]
    assert tie.unmatched_gl == ["G2"]


def test_bank_lines_are_processed_by_date_then_id() -> None:
    later = line("A-LATE", days=1)
    earlier = line("Z-EARLY", days=0)
    assert match_bank_lines([later, earlier], [line("G1")], 3).matches == [("Z-EARLY", "G1")]
    assert match_bank_lines([line("B2"), line("B1")], [line("G1")], 3).matches == [("B1", "G1")]


def test_unmatched_gl_lines_are_listed_by_date_then_id() -> None:
    result = match_bank_lines([], [line("G2", days=1), line("G3", days=0), line("G1", days=1)], 3)
    assert result.unmatched_gl == ["G3", "G1", "G2"]


def test_negative_window_is_rejected() -> None:
    with pytest.raises(ValueError, match="window_days"):
        match_bank_lines([], [], -1)


def _padded(text: str) -> str:
    return f"  {text}\t"


@settings(max_examples=60, deadline=None)
@given(
    data=st.lists(
        st.tuples(
            st.integers(min_value=-(10**9), max_value=10**9),
            st.integers(min_value=0, max_value=27),
            st.integers(min_value=-3, max_value=3),
            st.sampled_from(["upper", "lower", "padded"]),
        ),
        max_size=60,
    ),
    order=st.randoms(use_true_random=False),
)
def test_shuffled_gl_copy_within_the_window_matches_completely(
    data: list[tuple[int, int, int, str]], order: random.Random
) -> None:
    bank = [
        CashLine(
            id=f"B{i:03d}",
            date=date(2026, 10, 1) + timedelta(days=day),
            amount=Decimal(minor) / 100,
            reference=f"Ref-{i}",
        )
        for i, (minor, day, _, _) in enumerate(data)
    ]
    styles: dict[str, Callable[[str], str]] = {"upper": str.upper, "lower": str.lower, "padded": _padded}
    gl = [
        CashLine(
            id=f"G{i:03d}",
            date=b.date + timedelta(days=shift),
            amount=b.amount,
            reference=styles[style](b.reference),
        )
        for i, (b, (_, _, shift, style)) in enumerate(zip(bank, data, strict=True))
    ]
    order.shuffle(gl)
    result = match_bank_lines(bank, gl, 3)
    assert result.unmatched_bank == []
    assert result.unmatched_gl == []
    assert sorted(result.matches) == [(f"B{i:03d}", f"G{i:03d}") for i in range(len(data))]


# --- bank payload -----------------------------------------------------------------------------------------


def test_bank_payload_reports_matches_and_unmatched_lines() -> None:
    out = handle(bank_payload([line("B1"), line("B2", amount="100.00", reference="X")], [line("G1"), line("G2")]))
    assert out["kind"] == "bank"
    assert out["matches"] == [["B1", "G1"]]
    assert out["accounts"] == [
        {
            "account": "1000",
            "bank_lines": 2,
            "gl_lines": 2,
            "matched": 1,
            "unmatched_bank": ["B2"],
            "unmatched_gl": ["G2"],
            "unmatched_share": "0.5000",
            "unmatched_bank_amount": "100.00",
            "halt": False,
        }
    ]
    assert out["halted"] is False
    assert out["halt_reason"] is None


def test_halt_needs_unmatched_share_strictly_greater_than_tolerance() -> None:
    gl = [line(f"G{i:02d}", reference=f"R{i}") for i in range(9)]
    bank = [line(f"B{i:02d}", reference=f"R{i}") for i in range(20)]  # 9 match, 11 of 20 unmatched = 0.55
    at_tolerance = handle(bank_payload(bank, gl, tolerance="0.55"))
    assert at_tolerance["accounts"][0]["unmatched_share"] == "0.5500"
    assert at_tolerance["halted"] is False
    over = handle(bank_payload(bank, gl[:8], tolerance="0.55"))  # 12 of 20 unmatched = 0.60
    assert over["halted"] is True
    assert over["accounts"][0]["halt"] is True
    assert over["halt_reason"] == "account 1000: 12 of 20 bank lines unmatched (tolerance 55%)"


def test_every_halted_account_contributes_to_the_reason() -> None:
    payload = bank_payload([line("B1")], [])
    payload["accounts"].append({"account": "1010", "bank_lines": [wire(line("B2"))], "gl_lines": []})
    out = handle(payload)
    assert out["halt_reason"] == (
        "account 1000: 1 of 1 bank lines unmatched (tolerance 55%); "
        "account 1010: 1 of 1 bank lines unmatched (tolerance 55%)"
    )


def test_account_without_bank_lines_has_zero_share_and_no_halt() -> None:
    out = handle(bank_payload([], [line("G1")], tolerance="0"))
    assert out["accounts"][0]["unmatched_share"] == "0.0000"
    assert out["halted"] is False


def test_planted_wrong_feed_halts_with_the_expected_reason() -> None:
    bank = [line(f"B{i:02d}", reference=f"EXT-{i}", amount=f"-{i + 1}.00") for i in range(17)]
    out = handle(bank_payload(bank, [line("G1")]))
    assert out["accounts"][0]["unmatched_share"] == "1.0000"
    assert out["halt_reason"] == "account 1000: 17 of 17 bank lines unmatched (tolerance 55%)"


# --- subledger and intercompany ---------------------------------------------------------------------------


def subledger(ledger: str, control: str, total: str, tolerance: str = "1.00") -> dict[str, Any]:
    return {
        "kind": "subledger",
        "ledger": ledger,
        "control_account": "2000" if ledger == "ap" else "1100",
        "control_balance": control,
        "subledger_total": total,
        "items": 12,
        "tolerance_amount": tolerance,
    }


def test_ap_control_credit_agrees_with_positive_subledger() -> None:
    out = handle(subledger("ap", "-1000.00", "1000.00"))
    assert out == {
        "kind": "subledger",
        "ledger": "ap",
        "control_account": "2000",
        "control_balance": "-1000.00",
        "subledger_total": "1000.00",
        "difference": "0.00",
        "within_tolerance": True,
        "halted": False,
        "halt_reason": None,
    }


def test_ap_difference_beyond_tolerance_halts_with_reason() -> None:
    out = handle(subledger("ap", "-1012.00", "1000.00"))
    assert out["difference"] == "-12.00"
    assert out["halted"] is True
    assert out["halt_reason"] == "AP control 2000 differs from subledger by 12.00 (tolerance 1.00)"


def test_ar_compares_control_minus_subledger_and_tolerance_is_inclusive() -> None:
    within = handle(subledger("ar", "501.00", "500.00"))
    assert (within["difference"], within["halted"]) == ("1.00", False)
    over = handle(subledger("ar", "501.01", "500.00"))
    assert over["halt_reason"] == "AR control 1100 differs from subledger by 1.01 (tolerance 1.00)"


def test_intercompany_pairs_report_difference_and_halt() -> None:
    out = handle(
        {
            "kind": "intercompany",
            "tolerance_amount": "1.00",
            "pairs": [
                {
                    "counterparty": "ACME-DE",
                    "account": "1300",
                    "our_balance": "500.00",
                    "their_balance": "500.00",
                },
                {
                    "counterparty": "ACME-US",
                    "account": "2300",
                    "our_balance": "-80.00",
                    "their_balance": "-330.00",
                },
            ],
        }
    )
    assert [p["difference"] for p in out["pairs"]] == ["0.00", "250.00"]
    assert [p["within_tolerance"] for p in out["pairs"]] == [True, False]
    assert out["halted"] is True
    assert out["halt_reason"] == "intercompany ACME-US on 2300 differs by 250.00 (tolerance 1.00)"


def test_intercompany_without_pairs_does_not_halt() -> None:
    out = handle({"kind": "intercompany", "tolerance_amount": "1.00", "pairs": []})
    assert out == {"kind": "intercompany", "pairs": [], "halted": False, "halt_reason": None}


# --- malformed payloads -----------------------------------------------------------------------------------


def _bank_with(**changes: Any) -> dict[str, Any]:
    payload = bank_payload([line("B1")], [line("G1")])
    payload.update(changes)
    return payload


def _bank_line_with(**changes: Any) -> dict[str, Any]:
    payload = bank_payload([line("B1")], [line("G1")])
    payload["accounts"][0]["bank_lines"][0].update(changes)
    return payload


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"kind": "bank-ish"}, "kind"),
        ({}, "kind"),
        (_bank_with(date_window_days=-1), "date_window_days"),
        (_bank_with(date_window_days=3.0), "date_window_days"),
        (_bank_with(date_window_days=True), "date_window_days"),
        (_bank_with(unmatched_tolerance=0.55), "unmatched_tolerance"),
        (_bank_with(unmatched_tolerance="1.5"), "unmatched_tolerance"),
        (_bank_with(accounts="1000"), "accounts"),
        (_bank_with(accounts=[{"bank_lines": [], "gl_lines": []}]), "accounts[0].account"),
        (_bank_with(accounts=[{"account": "1000", "gl_lines": []}]), "accounts[0].bank_lines"),
        (_bank_line_with(amount=-12.5), "accounts[0].bank_lines[0].amount"),
        (_bank_line_with(amount="12.505"), "accounts[0].bank_lines[0].amount"),
        (_bank_line_with(date="2026-02-30"), "accounts[0].bank_lines[0].date"),
        (_bank_line_with(date="15/10/2026"), "accounts[0].bank_lines[0].date"),
        (_bank_line_with(reference=None), "accounts[0].bank_lines[0].reference"),
        (_bank_line_with(id=""), "accounts[0].bank_lines[0].id"),
        (subledger("ap", "-1000.00", "1000.00") | {"ledger": "gl"}, "ledger"),
        (subledger("ap", "-1000.00", "1000.00") | {"items": -1}, "items"),
        (subledger("ap", "-1000.00", "1000.00") | {"tolerance_amount": "-1.00"}, "tolerance_amount"),
        (subledger("ap", "1,000.00", "1000.00"), "control_balance"),
        (
            {
                "kind": "intercompany",
                "tolerance_amount": "1.00",
                "pairs": [{"counterparty": "X", "account": "1300", "our_balance": "1.00"}],
            },
            "pairs[0].their_balance",
        ),
    ],
)
def test_malformed_payload_names_the_field(payload: dict[str, Any], field: str) -> None:
    with pytest.raises(SpecialistInputError) as caught:
        handle(payload)
    assert caught.value.field == field
    assert str(caught.value).startswith(f"invalid specialist input: {field}: ")


def test_duplicate_line_ids_are_rejected() -> None:
    payload = bank_payload([line("B1"), line("B1", days=1)], [])
    with pytest.raises(SpecialistInputError) as caught:
        handle(payload)
    assert caught.value.field == "accounts[0].bank_lines[1].id"


def test_non_object_payload_is_rejected() -> None:
    with pytest.raises(SpecialistInputError) as caught:
        handle(["bank"])  # type: ignore[arg-type]
    assert caught.value.field == "payload"
