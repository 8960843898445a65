"""The second construction generator: reproducible, parsed by the domain, and its ground truth says what it planted."""

from __future__ import annotations

import json
import random
from collections import Counter
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from countersign.certificates import parse_certificate, parse_contract
from countersign.certificates.model import ApplicationNumbering, MaterialsConsumption, ValuationRounding
from countersign.synthetic.construction_profile import ConstructionProfile, load_construction_profile
from countersign.synthetic.construction_second_style import (
    CERTIFICATES_FILE,
    CONTRACTS_FILE,
    DUPLICATE_COMBINED,
    DUPLICATE_INFLATED,
    DUPLICATE_KINDS,
    DUPLICATE_LATE,
    DUPLICATE_LEGAL_FORM,
    DUPLICATE_SAME_DAY,
    FAULT_CLASSES,
    SISTER_CONTRACT_RELEASE,
    STYLE,
    TRICKY_KINDS,
    SecondStyleManifest,
    generate_second_style,
    legal_form_variant,
)
from countersign.synthetic.ground_truth import GROUND_TRUTH_FILE

PROFILES = Path(__file__).resolve().parents[2] / "config" / "profiles"
FILES = (CERTIFICATES_FILE, CONTRACTS_FILE, GROUND_TRUTH_FILE)
SEED = 4


@pytest.fixture(scope="module")
def profile() -> ConstructionProfile:
    return load_construction_profile(PROFILES / "construction-second-style-small.yaml")


@pytest.fixture(scope="module")
def generated(profile: ConstructionProfile, tmp_path_factory: pytest.TempPathFactory) -> SecondStyleManifest:
    return generate_second_style(profile, SEED, tmp_path_factory.mktemp("second"))


def read(manifest: SecondStyleManifest) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any]]:
    contracts = json.loads((manifest.out_dir / CONTRACTS_FILE).read_text(encoding="utf-8"))
    lines = (manifest.out_dir / CERTIFICATES_FILE).read_text(encoding="utf-8").splitlines()
    truth = json.loads((manifest.out_dir / GROUND_TRUTH_FILE).read_text(encoding="utf-8"))
    return contracts, [json.loads(line) for line in lines], truth


def test_both_shipped_profiles_load() -> None:
    full = load_construction_profile(PROFILES / "construction-second-style.yaml")
    small = load_construction_profile(PROFILES / "construction-second-style-small.yaml")
    assert (full.contracts, full.months) == (250, 20)
    assert (small.contracts, small.months) == (50, 18)


def test_same_seed_gives_byte_identical_files_and_another_seed_does_not(
    profile: ConstructionProfile, generated: SecondStyleManifest, tmp_path: Path
) -> None:
    again = generate_second_style(profile, SEED, tmp_path / "again")
    for name in FILES:
        assert (tmp_path / "again" / name).read_bytes() == (generated.out_dir / name).read_bytes()
    assert again.files == generated.files
    other = generate_second_style(profile, SEED + 1, tmp_path / "other")
    assert other.files[CERTIFICATES_FILE] != generated.files[CERTIFICATES_FILE]


def test_every_contract_and_certificate_parses_in_the_domain(generated: SecondStyleManifest) -> None:
    contracts, certificates, _ = read(generated)
    parsed = [parse_contract(contract) for contract in contracts["contracts"]]
    assert {certificate["contract"] for certificate in certificates} <= {contract.id for contract in parsed}
    assert len({parse_certificate(certificate).id for certificate in certificates}) == len(certificates)


def test_conventions_vary_between_contracts(generated: SecondStyleManifest) -> None:
    contracts, _, _ = read(generated)
    parsed = [parse_contract(contract) for contract in contracts["contracts"]]
    declared = {ValuationRounding.PER_PERIOD, ValuationRounding.CUMULATIVE}  # whole units: the third style's
    assert {c.conventions.valuation_rounding for c in parsed} == declared
    assert {c.conventions.materials_consumption for c in parsed} == set(MaterialsConsumption)
    assert {c.conventions.application_numbering for c in parsed} == set(ApplicationNumbering)
    assert len({c.retention.rate for c in parsed}) >= 3
    assert len({c.retention.release_at_practical_completion for c in parsed}) == 2


def test_faults_are_about_three_percent_and_every_class_is_seeded(generated: SecondStyleManifest) -> None:
    contracts, _, truth = read(generated)
    monthly = len(contracts["contracts"]) * truth["months"]
    assert Decimal("0.02") <= Decimal(len(truth["faults"])) / monthly <= Decimal("0.03")
    assert truth["classes"] == list(FAULT_CLASSES)
    assert set(Counter(f["class"] for f in truth["faults"])) == set(FAULT_CLASSES)
    assert truth["style"] == STYLE


def test_ground_truth_names_certificates_that_exist_and_keeps_tricky_apart(generated: SecondStyleManifest) -> None:
    _, certificates, truth = read(generated)
    by_id = {c["id"]: c for c in certificates}
    faulted = {f["certificate"] for f in truth["faults"]}
    duplicated = {d["certificate"] for d in truth["duplicates"]}
    tricky = {t["certificate"] for t in truth["tricky"]}
    assert faulted | duplicated | tricky <= set(by_id)
    assert not tricky & (faulted | duplicated)
    assert {t["kind"] for t in truth["tricky"]} <= set(TRICKY_KINDS)
    assert len({t["kind"] for t in truth["tricky"]}) >= len(TRICKY_KINDS) - 2


def test_each_duplicate_kind_is_what_it_says(generated: SecondStyleManifest) -> None:
    _, certificates, truth = read(generated)
    by_id = {c["id"]: c for c in certificates}
    kinds = Counter(d["kind"] for d in truth["duplicates"])
    assert set(kinds) == set(DUPLICATE_KINDS)
    for record in truth["duplicates"]:
        copy, original = by_id[record["certificate"]], by_id[record["original"]]
        assert copy["contract"] == original["contract"] and copy["invoice_number"] != original["invoice_number"]
        days = (date.fromisoformat(copy["date"]) - date.fromisoformat(original["date"])).days
        kind = record["kind"]
        if kind == DUPLICATE_SAME_DAY:
            assert days == 0 and copy["id"] > original["id"]
        if kind in (DUPLICATE_LATE, DUPLICATE_COMBINED):
            assert 47 <= days <= 59
        if kind in (DUPLICATE_LEGAL_FORM, DUPLICATE_COMBINED):
            assert copy["vendor"] != original["vendor"]
        if kind in (DUPLICATE_INFLATED, DUPLICATE_COMBINED):
            assert copy["totals"]["amount_due"] != original["totals"]["amount_due"]
            for before, after in zip(original["lines"], copy["lines"], strict=True):
                period = Decimal(before["value_to_date"]) - Decimal(before["previous_value"])
                extra = Decimal(after["value_to_date"]) - Decimal(before["value_to_date"])
                if period > 100:
                    assert Decimal("0.059") <= extra / period <= Decimal("0.081")


def test_variations_are_reversed_by_their_own_instruction_and_corrections_name_what_they_correct(
    generated: SecondStyleManifest,
) -> None:
    _, certificates, truth = read(generated)
    faulted = {f["certificate"] for f in truth["faults"]}
    reversals = [v for c in certificates for v in c["variations"] if "reverses" in v]
    assert reversals
    for certificate in certificates:
        listed = {v["id"]: v for v in certificate["variations"]}
        for variation in listed.values():
            if "reverses" in variation and variation["reverses"] in listed:
                original = listed[variation["reverses"]]
                assert variation["instruction_ref"] != original["instruction_ref"]
                assert variation["amount"].lstrip("-") == original["amount"].lstrip("-")
    corrections = [c for c in certificates if "supersedes" in c]
    assert corrections and all(c["supersedes"] in faulted for c in corrections)
    assert any(v["amount"].startswith("-") and v["boq_line"] is None for c in certificates for v in c["variations"])


def test_sister_contracts_share_contractor_and_bill_but_no_scope(generated: SecondStyleManifest) -> None:
    contracts, certificates, truth = read(generated)
    by_id = {c["id"]: c for c in contracts["contracts"]}
    sisters = [t for t in truth["tricky"] if t["kind"] == SISTER_CONTRACT_RELEASE]
    assert sisters
    titles = {c["title"]: c for c in contracts["contracts"]}
    for record in sisters:
        sister = by_id[record["contract"]]
        original = titles[sister["title"].removesuffix(", phase 2")]
        assert sister["contractor"]["vendor_id"] == original["contractor"]["vendor_id"]
        assert [line["rate"] for line in sister["boq"]] == [line["rate"] for line in original["boq"]]
        sister_hashes = {h for p in sister["packages"] for h in p["scope"].values()}
        assert not sister_hashes & {h for p in original["packages"] for h in p["scope"].values()}
        release = next(c for c in certificates if c["id"] == record["certificate"])
        assert release["retention_releases"] and Decimal(release["totals"]["amount_due"]) > 0


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("Hartley Construction Ltd", {"Hartley Construction Limited", "Hartley Construction Ltd."}),
        ("Jessop Civils & Co Limited", {"Jessop Civils and Co Limited", "Jessop Civils & Co Ltd"}),
        ("Pryce Engineering Company Limited", {"Pryce Engineering Co Limited", "Pryce Engineering Company Ltd"}),
    ],
)
def test_a_legal_form_variant_is_another_spelling_of_the_same_firm(name: str, expected: set[str]) -> None:
    variants = {legal_form_variant(name, random.Random(n)) for n in range(200)}
    assert name not in variants
    assert expected <= variants
    assert all(v.split()[0].lower() == name.split()[0].lower() for v in variants)


def _minor(text: str) -> int:
    return int(Decimal(text) * 100)


def test_clean_certificates_carry_forward_what_was_certified_and_stay_within_each_lines_allowance(
    generated: SecondStyleManifest,
) -> None:
    """Written from the domain, not from the checks: each clean certificate starts where the last clean one of its
    contract ended, lists every variation that one listed, and never claims work plus materials beyond a line's bill
    quantity plus the re-measurements instructed against it."""
    contracts, certificates, truth = read(generated)
    bills = {c["id"]: {line["id"]: _minor(line["quantity"]) for line in c["boq"]} for c in contracts["contracts"]}
    skipped = {f["certificate"] for f in truth["faults"]} | {d["certificate"] for d in truth["duplicates"]}
    last: dict[str, dict[str, Any]] = {}
    checked = 0
    for certificate in sorted(certificates, key=lambda c: (c["contract"], c["number"], c["date"])):
        if certificate["id"] in skipped:
            continue
        before = last.get(certificate["contract"])
        if before is not None:
            assert certificate["totals"]["previously_certified"] == before["totals"]["net_to_date"]
            assert {v["id"] for v in before["variations"]} <= {v["id"] for v in certificate["variations"]}
            previous = {line["boq_line"]: line for line in before["lines"]}
            for line in certificate["lines"]:
                assert line["previous_quantity"] == previous[line["boq_line"]]["quantity_to_date"]
                assert line["previous_value"] == previous[line["boq_line"]]["value_to_date"]
        for line_id, bill in bills[certificate["contract"]].items():
            instructed = sum(
                _minor(v["quantity_change"]) for v in certificate["variations"] if v["boq_line"] == line_id
            )
            work = sum(_minor(line["quantity_to_date"]) for line in certificate["lines"] if line["boq_line"] == line_id)
            materials = sum(_minor(m["quantity"]) for m in certificate["materials_on_site"] if m["boq_line"] == line_id)
            assert work + materials <= bill + instructed, (certificate["id"], line_id)
        last[certificate["contract"]] = certificate
        checked += 1
    assert checked > 0.9 * len(certificates)
