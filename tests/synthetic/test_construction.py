"""Synthetic construction data: byte-reproducible, faults at the profile's rate, ground truth that matches the files."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from countersign.synthetic import ProfileError
from countersign.synthetic.clause_topics import TOPIC_KEYS
from countersign.synthetic.construction import (
    CERTIFICATES_FILE,
    CONTRACTS_FILE,
    FAULT_CLASSES,
    ConstructionManifest,
    generate_construction,
)
from countersign.synthetic.construction_profile import (
    ConstructionProfile,
    load_construction_profile,
    parse_construction_profile,
)
from countersign.synthetic.ground_truth import GROUND_TRUTH_FILE

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


# --- fault_month: a demo month with every class once --------------------------------------------------------------

DEMO_PROFILE = PROFILE.with_name("construction-demo.yaml")
PINNED_WITHOUT_FAULT_MONTH = {
    # construction.yaml, seed 11, 12 contracts x 6 months, with the committed clause corpus: the bytes the generator
    # wrote before `fault_month` existed. A profile without the key must keep writing exactly these.
    CERTIFICATES_FILE: "03b750317b5f1ba23d5e68cd24020446a550bfe3368b1aad35ff264f8b0aa570",
    CONTRACTS_FILE: "8e1e9116efcdb1276ae432012f373bf4a3815fd009079ecc4f1871136ae028c2",
    GROUND_TRUTH_FILE: "d74faa6a644ef26078873c8e7ec0d2a6d409f227392680dbfec70a394f0a84a9",
}
CORPUS = PROFILE.parents[1] / "clauses" / "corpus.json"


@pytest.fixture(scope="module")
def demo_month(tmp_path_factory: pytest.TempPathFactory) -> ConstructionManifest:
    corpus = json.loads(CORPUS.read_bytes())
    demo = load_construction_profile(DEMO_PROFILE)
    return generate_construction(demo, 42, tmp_path_factory.mktemp("demo-month"), clause_corpus=corpus)


def test_without_fault_month_the_bytes_are_unchanged(profile: ConstructionProfile, tmp_path: Path) -> None:
    assert profile.fault_month is None
    corpus = json.loads(CORPUS.read_bytes())
    manifest = generate_construction(profile, 11, tmp_path, contracts=12, months=6, clause_corpus=corpus)
    assert manifest.files == PINNED_WITHOUT_FAULT_MONTH


def test_the_demo_profile_names_its_fault_month() -> None:
    demo = load_construction_profile(DEMO_PROFILE)
    assert (demo.name, demo.contracts, demo.months, demo.fault_month) == ("construction-demo", 12, 6, 6)


def test_fault_month_seeds_every_class_once_on_different_contracts(demo_month: ConstructionManifest) -> None:
    _, certificates, truth = read(demo_month)
    assert truth["fault_month"] == 6
    assert Counter(f["class"] for f in truth["faults"]) == Counter(FAULT_CLASSES)
    assert {f["number"] for f in truth["faults"]} == {6}
    assert len({f["contract"] for f in truth["faults"]}) == len(FAULT_CLASSES)
    assert demo_month.faults == len(FAULT_CLASSES)
    by_id = {c["id"]: c for c in certificates}
    assert all(by_id[f["certificate"]]["period"] == "2025-06" for f in truth["faults"])


def test_fault_month_resubmits_one_clean_certificate_of_that_month(demo_month: ConstructionManifest) -> None:
    _, certificates, truth = read(demo_month)
    assert len(truth["duplicates"]) == demo_month.duplicates == 1
    duplicate = truth["duplicates"][0]
    faulted = {f["certificate"] for f in truth["faults"]}
    by_id = {c["id"]: c for c in certificates}
    assert duplicate["original"] not in faulted
    assert by_id[duplicate["original"]]["number"] == by_id[duplicate["certificate"]]["number"] == 6
    assert by_id[duplicate["certificate"]]["period"] == "2025-06"
    assert len(certificates) == 12 * 6 + 1


@pytest.mark.parametrize(("value", "field"), [(1, "fault_month"), (7, "fault_month"), ("6", "fault_month")])
def test_an_illegal_fault_month_names_the_field(value: object, field: str) -> None:
    data = shipped()
    data["months"] = 6
    data["fault_month"] = value
    with pytest.raises(ProfileError) as caught:
        parse_construction_profile(data, "profiles/construction-demo.yaml")
    assert caught.value.field == field


def test_a_fault_month_the_seed_cannot_fill_says_so(tmp_path: Path) -> None:
    demo = load_construction_profile(DEMO_PROFILE)
    with pytest.raises(ProfileError) as caught:
        generate_construction(demo, 5, tmp_path, contracts=4)
    assert caught.value.field == "fault_month"
