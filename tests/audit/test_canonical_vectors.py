"""canonical_bytes against published RFC 8785 cases (a2a-tck); floats are refused by design."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from countersign.audit.canonical import NonCanonicalValue, canonical_bytes

DATA = Path(__file__).resolve().parents[1] / "data" / "jcs"
CARD_CASES = json.loads((DATA / "a2a-tck" / "card_signing_canonicalization_cases.json").read_text("utf-8"))[
    "canonicalization_cases"
]
CORPUS = json.loads((DATA / "a2a-jcs-v01" / "vectors-transcribed.json").read_text("utf-8"))["vectors"]
SIGNATURES_RULE = "a2a-spec-8.4.1-rule-3"

# RFC 8785 §3.2.3 sorts members by UTF-16 code units; code-point order differs when names mix characters above
# U+FFFF with ones in U+E000..U+FFFF. These vectors pin that canonical_bytes uses the RFC's order.
UTF16_ORDER_CASES = {"A3-006", "A3-007", "cardsign-jcs-keyorder"}


def _has_float(value: Any) -> bool:
    if isinstance(value, float):
        return True
    if isinstance(value, dict):
        return any(_has_float(item) for item in value.values())
    if isinstance(value, list):
        return any(_has_float(item) for item in value)
    return False


def _without_signatures(card: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in card.items() if key != "signatures"}


def _params(cases: list[dict[str, Any]], accepted: bool) -> list[Any]:
    return [pytest.param(case, id=case["id"], marks=[]) for case in cases if ("input_raw" not in case) == accepted]


def test_vector_files_hold_every_case() -> None:
    assert len(CARD_CASES) == 6
    assert len(CORPUS) == 55
    assert sum(1 for case in CORPUS if "input_raw" in case) == 8


@pytest.mark.parametrize("case", _params(CARD_CASES, accepted=True))
def test_card_signing_payloads(case: dict[str, Any]) -> None:
    card = _without_signatures(case["agent_card"])
    if _has_float(card):
        with pytest.raises(NonCanonicalValue):
            canonical_bytes(card)
    else:
        assert canonical_bytes(card) == case["expected_jcs_payload"].encode("utf-8")


@pytest.mark.parametrize("case", _params(CORPUS, accepted=True))
def test_a2a_jcs_accept_vectors(case: dict[str, Any]) -> None:
    value = json.loads(case["input_json"])
    if case["clause"] == SIGNATURES_RULE:
        value = _without_signatures(value)
    if _has_float(value):
        with pytest.raises(NonCanonicalValue):
            canonical_bytes(value)
    else:
        assert canonical_bytes(value) == case["expected"].encode("utf-8")


@pytest.mark.parametrize("case", _params(CORPUS, accepted=False))
def test_a2a_jcs_reject_vectors(case: dict[str, Any]) -> None:
    """Lone surrogates have no UTF-8 form (orjson raises its TypeError); NaN and Infinity are floats."""
    value = json.loads(case["input_raw"])
    with pytest.raises(TypeError):
        canonical_bytes(value)
    if _has_float(value):
        with pytest.raises(NonCanonicalValue):
            canonical_bytes(value)


def test_float_free_vectors_are_the_majority_so_the_comparison_means_something() -> None:
    compared = [case for case in CORPUS if "expected" in case and not _has_float(json.loads(case["input_json"]))]
    assert len(compared) >= 35
