"""The duplicate detector: exact features, explicit thresholds, a hold that names the other line and the overlap."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from countersign.certificates import detect, parse_certificate, sweep
from countersign.certificates.duplicates import (
    AMOUNT_TOLERANCE,
    DATE_WINDOW_DAYS,
    SIMILARITY_THRESHOLD,
    Thresholds,
    features,
    normalise_vendor,
    submission_of,
)
from tests.certificates.generated import Dataset, generate
from tests.certificates.history import history


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    return generate(tmp_path_factory.mktemp("construction"), 11, contracts=60, months=20)


@pytest.mark.parametrize(
    "spelling",
    ["Harbour Building plc", "HARBOUR BUILDING PLC", "Harbour  Building p.l.c.", "harbour building plc"],
)
def test_vendor_spellings_normalise_to_one_identity(spelling: str) -> None:
    assert normalise_vendor(spelling) == "harbour building plc"


def test_legal_forms_and_plurals_are_canonical_but_names_are_not_merged() -> None:
    assert normalise_vendor("Kestrel Contractors Limited") == normalise_vendor("Kestrel Contractor Ltd.")
    assert normalise_vendor("Kestrel Contractors L.L.P.") == "kestrel contractor llp"
    assert normalise_vendor("Kestrel Contractors Ltd") != normalise_vendor("Kestrel Contractors plc")
    assert normalise_vendor("Solent Groundworks Ltd") != normalise_vendor("Kestrel Groundworks Ltd")


def test_the_thresholds_are_named_constants() -> None:
    assert Thresholds() == Thresholds(AMOUNT_TOLERANCE, None, SIMILARITY_THRESHOLD)  # window: the contract's terms
    assert DATE_WINDOW_DAYS == 45  # the fixed window before, kept as the sweep's baseline


def test_a_resubmission_is_held_naming_the_other_line_and_the_overlap() -> None:
    original = parse_certificate(history()[1])
    copy = dataclasses.replace(
        original,
        id="C2-again",
        invoice_number="KC/2025/0099",
        vendor="KESTREL CONSTRUCTION LIMITED",
        description="Interim application 2: Test works",
        date=original.date + timedelta(days=9),
    )
    (hold,) = detect([original, copy])
    assert hold.certificate == "C2-again"
    assert hold.other_certificate == "C2"
    assert hold.other_line in {"P1/L01", "P2/L02"}
    assert hold.overlap == Decimal("500.00")  # 30 m3 of L01 (300.00) and 10 t of L02 (200.00) claimed twice
    assert "C2" in hold.explanation("GBP") and "(overlap GBP 500.00)" in hold.explanation("GBP")
    assert "(overlap CHF 500.00)" in hold.explanation("CHF")


def test_consecutive_genuine_certificates_are_not_held() -> None:
    certificates = [parse_certificate(c) for c in history()]
    assert detect(certificates) == ()
    found = features(submission_of(certificates[2]), submission_of(certificates[1]))
    assert found.overlap_minor == 0  # 60 -> 90 m3 does not overlap 30 -> 60 m3


def test_the_same_invoice_number_is_held_whatever_else_differs() -> None:
    first, second = (parse_certificate(c) for c in history()[1:3])
    second = dataclasses.replace(second, invoice_number=" kc-2025-0002 ")
    (hold,) = detect([first, second])
    assert hold.features.same_invoice


def test_a_nudged_amount_outside_the_tolerance_is_not_held() -> None:
    original = parse_certificate(history()[1])
    totals = dataclasses.replace(original.totals, amount_due_minor=original.totals.amount_due_minor * 2)
    further = dataclasses.replace(original.lines[1], quantity_to_date_centi=4000, value_to_date_minor=80000)
    lines = (original.lines[0], further)  # L02 10 -> 40 t: part of its scope is new (a full overlap is always held)
    copy = dataclasses.replace(original, id="C2-again", invoice_number="X/1", totals=totals, lines=lines)
    assert detect([original, copy]) == ()


def test_the_detector_finds_the_seeded_resubmissions(data: Dataset) -> None:
    holds = detect(data.certificates)
    held = {hold.certificate: hold for hold in holds}
    assert data.truth.duplicates, "the profile seeds duplicates"
    for duplicate, original in data.truth.duplicates.items():
        assert duplicate in held
        assert held[duplicate].other_certificate == original
        assert held[duplicate].overlap_minor > 0 or not held[duplicate].features.claims_line_work


def test_the_sweep_covers_the_grid_and_contains_the_operating_point(data: Dataset) -> None:
    rows = sweep(data.certificates, data.truth.duplicates)
    assert len(rows) == 28
    chosen = next(r for r in rows if (r.similarity, r.amount_tolerance) == (SIMILARITY_THRESHOLD, AMOUNT_TOLERANCE))
    assert chosen.recall >= Decimal("0.95")
    loosest = next(r for r in rows if (r.similarity, r.amount_tolerance) == (Decimal("0.3"), Decimal("0.05")))
    assert loosest.false_positives > chosen.false_positives  # the sweep has a trade-off to show


def test_holds_are_deterministic(data: Dataset, tmp_path: Path) -> None:
    again = generate(tmp_path, 11, contracts=60, months=20)
    assert detect(again.certificates) == detect(data.certificates)
