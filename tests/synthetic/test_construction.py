"""Synthetic construction data: byte-reproducible, faults at the profile's rate, ground truth that matches the files."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from synthetic import ProfileError
from synthetic.clause_topics import TOPIC_KEYS
from synthetic.construction import (
    CERTIFICATES_FILE,
    CONTRACTS_FILE,
    FAULT_CLASSES,
    ConstructionManifest,
    generate_construction,
)
from synthetic.construction_profile import (
    ConstructionProfile,
    load_construction_profile,
    parse_construction_profile,
)
from synthetic.ground_truth import GROUND_TRUTH_FILE

PROFILE = Path(__file__).resolve().parents[2] / "config" / "profiles" / "construction.yaml"
FILES = (CERTIFICATES_FILE, CONTRACTS_FILE, GROUND_TRUTH_FILE)
MONEY = re.compile(r"^-?\d+\.\d{2}$")


@pytest.fixture(scope="module")
def profile() -> ConstructionProfile:
    return load_construction_profile(PROFILE)


@pytest.fixture(scope="module")
def generated(profile: ConstructionProfile, tmp_path_factory: pytest.TempPathFactory) -> ConstructionManifest:
    return generate_construction(profile, 5, tmp_path_factory.mktemp("construction"), contracts=80, months=20)


def read(manifest: ConstructionManifest) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any]]:
    contracts = json.loads((manifest.out_dir / CONTRACTS_FILE).read_text(encoding="utf-8"))
    lines = (manifest.out_dir / CERTIFICATES_FILE).read_text(encoding="utf-8").splitlines()
    truth = json.loads((manifest.out_dir / GROUND_TRUTH_FILE).read_text(encoding="utf-8"))
    return contracts, [json.loads(line) for line in lines], truth


def test_the_shipped_profile_loads(profile: ConstructionProfile) -> None:
    assert profile.name == "construction"
    assert (profile.contracts, profile.months, profile.start_period) == (250, 20, "2025-01")


def test_same_profile_and_seed_give_byte_identical_files(
    profile: ConstructionProfile, generated: ConstructionManifest, tmp_path: Path
) -> None:
    again = generate_construction(profile, 5, tmp_path / "again", contracts=80, months=20)
    for name in FILES:
        assert (tmp_path / "again" / name).read_bytes() == (generated.out_dir / name).read_bytes()
    assert again.files == generated.files
    other = generate_construction(profile, 6, tmp_path / "other", contracts=80, months=20)
    assert other.files[CERTIFICATES_FILE] != generated.files[CERTIFICATES_FILE]


def test_one_certificate_per_contract_per_month_plus_the_duplicates(generated: ConstructionManifest) -> None:
    contracts, certificates, truth = read(generated)
    assert len(contracts["contracts"]) == 80
    assert len(certificates) == 80 * 20 + len(truth["duplicates"]) == generated.certificates + generated.duplicates
    per_contract = Counter((c["contract"], c["number"]) for c in certificates)
    assert set(Counter(per_contract.values())) <= {1, 2}
    assert all(per_contract[(contract["id"], n)] >= 1 for contract in contracts["contracts"] for n in range(1, 21))


def test_faults_are_two_to_three_percent_and_cover_every_class(generated: ConstructionManifest) -> None:
    _, _, truth = read(generated)
    assert 0.02 <= len(truth["faults"]) / (80 * 20) <= 0.03
    assert set(Counter(f["class"] for f in truth["faults"])) == set(FAULT_CLASSES)
    assert truth["classes"] == list(FAULT_CLASSES)


def test_ground_truth_names_certificates_that_exist(generated: ConstructionManifest) -> None:
    _, certificates, truth = read(generated)
    by_id = {c["id"]: c for c in certificates}
    assert len(by_id) == len(certificates)
    for fault in truth["faults"]:
        certificate = by_id[fault["certificate"]]
        assert (certificate["contract"], certificate["number"]) == (fault["contract"], fault["number"])
        assert all(MONEY.match(value) for value in fault["amounts"].values())
    for duplicate in truth["duplicates"]:
        copy, original = by_id[duplicate["certificate"]], by_id[duplicate["original"]]
        assert copy["contract"] == original["contract"]
        assert copy["invoice_number"] != original["invoice_number"]
        assert copy["vendor"] != original["vendor"] or copy["description"] != original["description"]
        assert copy["date"] > original["date"]


def test_money_is_decimal_strings_and_every_clean_certificate_foots(generated: ConstructionManifest) -> None:
    _, certificates, truth = read(generated)
    faulted = {f["certificate"] for f in truth["faults"]}
    for certificate in certificates:
        totals = {k: int(v.replace(".", "")) for k, v in certificate["totals"].items()}
        assert all(MONEY.match(v) for v in certificate["totals"].values())
        if certificate["id"] in faulted:
            continue
        work = sum(int(line["value_to_date"].replace(".", "")) for line in certificate["lines"])
        assert totals["work_to_date"] == work
        assert totals["amount_due"] == totals["net_to_date"] - totals["previously_certified"]


def test_contracts_carry_the_parameters_the_invariants_need(generated: ConstructionManifest) -> None:
    contracts, _, _ = read(generated)
    for contract in contracts["contracts"]:
        assert contract["form"] in ("CSB", "CSE", "CSI", "CSD", "CSM")
        assert contract["rate_versions"][0]["rates"].keys() == {line["id"] for line in contract["boq"]}
        owned = [line_id for package in contract["packages"] for line_id in package["scope"]]
        assert sorted(owned) == sorted(line["id"] for line in contract["boq"])
        assert set(contract["retention"]) == {"rate", "cap", "release_at_practical_completion", "defects_period_months"}
        assert set(contract["advance"]) == {"amount", "start_pct", "rate", "repaid_by_pct"}


def test_without_a_corpus_clause_refs_are_topic_keys(generated: ConstructionManifest) -> None:
    contracts, _, _ = read(generated)
    assert generated.clause_refs == "topic keys"
    assert contracts["contracts"][0]["clause_refs"] == {key: key for key in TOPIC_KEYS}


def test_with_a_corpus_clause_refs_are_the_forms_clause_ids(profile: ConstructionProfile, tmp_path: Path) -> None:
    corpus = {
        "forms": [{"code": form} for form in ("CSB", "CSE", "CSI", "CSD", "CSM")],
        "clauses": [
            {"id": f"{form}-{n // 9 + 1}.{n % 9 + 1}", "form": form, "topic": topic}
            for form in ("CSB", "CSE", "CSI", "CSD", "CSM")
            for n, topic in enumerate(sorted(TOPIC_KEYS))
        ],
    }
    manifest = generate_construction(profile, 5, tmp_path, contracts=5, months=6, clause_corpus=corpus)
    contracts, _, _ = read(manifest)
    for contract in contracts["contracts"]:
        refs = contract["clause_refs"]
        assert set(refs) == set(TOPIC_KEYS)
        assert all(re.match(rf"^{contract['form']}-\d{{1,2}}\.\d{{1,2}}$", ref) for ref in refs.values())


def shipped() -> dict[str, Any]:
    data = yaml.safe_load(PROFILE.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


@pytest.mark.parametrize(
    ("key", "value", "field"),
    [
        ("kind", "books", "kind"),
        ("fault_rate", "0.05", "fault_rate"),
        ("fault_rate", 0.025, "fault_rate"),
        ("months", 3, "months"),
        ("contracts", 0, "contracts"),
        ("start_period", "2025-13", "start_period"),
        ("currency", "gbp", "currency"),
        ("boq_lines", {"min": 2, "max": 4}, "boq_lines.min"),
        ("surprise", 1, "surprise"),
    ],
)
def test_an_illegal_profile_names_the_field(key: str, value: object, field: str) -> None:
    data = shipped()
    data[key] = value
    with pytest.raises(ProfileError) as caught:
        parse_construction_profile(data, "profiles/construction.yaml")
    assert caught.value.field == field


def test_overrides_are_validated(profile: ConstructionProfile, tmp_path: Path) -> None:
    with pytest.raises(ProfileError) as caught:
        generate_construction(profile, 5, tmp_path, months=2)
    assert caught.value.field == "months"
