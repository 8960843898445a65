import hashlib
import json
import re
from collections import defaultdict
from datetime import date
from decimal import Decimal
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from countersign.specialists.reconciliation import CashLine, match_bank_lines
from countersign.synthetic import (
    Profile,
    ProfileError,
    generate_books,
    load_profile,
    parse_profile,
    read_ground_truth,
)
from tests.synthetic.books_fixture import DEFAULT_PROFILE, read_rows

BOOK_FILES = (
    "accounts.csv",
    "ap_subledger.csv",
    "ar_subledger.csv",
    "bank_lines.csv",
    "budget.csv",
    "corrected/bank_lines.csv",
    "gl_lines.csv",
    "grni.csv",
    "ground_truth.json",
    "intercompany.csv",
    "prior_period.csv",
)
MONEY = re.compile(r"-?\d+\.\d{2}")


@pytest.fixture(scope="module")
def profile() -> Profile:
    return load_profile(DEFAULT_PROFILE)


@pytest.fixture(scope="module")
def books(profile: Profile, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("books")
    generate_books(profile, 42, out)
    return out


def cash_lines(rows: list[dict[str, str]], id_column: str) -> list[CashLine]:
    return [
        CashLine(
            id=r[id_column],
            date=date.fromisoformat(r["date"]),
            amount=Decimal(r["amount"]),
            reference=r["reference"],
        )
        for r in rows
    ]


def gl_balances(books: Path) -> dict[str, Decimal]:
    balances: dict[str, Decimal] = defaultdict(Decimal)
    for row in read_rows(books / "gl_lines.csv"):
        balances[row["account"]] += Decimal(row["amount"])
    return balances


def test_same_profile_and_seed_give_byte_identical_files(profile: Profile, books: Path, tmp_path: Path) -> None:
    generate_books(profile, 42, tmp_path)
    for name in (*BOOK_FILES, "entity.json"):
        assert (tmp_path / name).read_bytes() == (books / name).read_bytes(), name


def test_different_seed_gives_different_books(profile: Profile, books: Path, tmp_path: Path) -> None:
    generate_books(profile, 43, tmp_path)
    assert (tmp_path / "gl_lines.csv").read_bytes() != (books / "gl_lines.csv").read_bytes()
    assert (tmp_path / "bank_lines.csv").read_bytes() != (books / "bank_lines.csv").read_bytes()


def test_entity_json_describes_the_books_and_hashes_every_file(books: Path) -> None:
    raw = (books / "entity.json").read_text(encoding="utf-8")
    entity = json.loads(raw)
    assert raw == json.dumps(entity, sort_keys=True, indent=2) + "\n"
    assert {k: entity[k] for k in ("entity", "period", "currency", "profile", "seed", "gl_line_count")} == {
        "entity": "ACME-UK",
        "period": "2026-10",
        "currency": "GBP",
        "profile": "default",
        "seed": 42,
        "gl_line_count": 2000,
    }
    assert sorted(entity["files"]) == sorted(BOOK_FILES)
    for name, digest in entity["files"].items():
        assert hashlib.sha256((books / name).read_bytes()).hexdigest() == digest


def test_csvs_use_the_contract_headers_and_unix_line_endings(books: Path) -> None:
    headers = {
        "accounts.csv": "account,name,type,subtype",
        "gl_lines.csv": "line_id,journal_id,date,account,amount,reference,description",
        "bank_lines.csv": "bank_line_id,account,date,amount,reference,description",
        "corrected/bank_lines.csv": "bank_line_id,account,date,amount,reference,description",
        "ap_subledger.csv": "invoice_id,vendor,invoice_date,due_date,amount",
        "ar_subledger.csv": "invoice_id,customer,invoice_date,due_date,amount",
        "grni.csv": "receipt_id,vendor,po_number,received_date,amount,expense_account,description",
        "intercompany.csv": "counterparty,account,our_balance,their_balance",
        "prior_period.csv": "account,amount",
        "budget.csv": "account,amount",
    }
    for name, header in headers.items():
        data = (books / name).read_bytes()
        assert b"\r" not in data, name
        assert data.decode("utf-8").split("\n", 1)[0] == header, name


def test_accounts_include_the_required_chart(books: Path) -> None:
    accounts = {r["account"]: r for r in read_rows(books / "accounts.csv")}
    assert accounts["1000"]["name"] == "Cash - Operating"
    assert accounts["1100"]["subtype"] == "receivable_control"
    assert accounts["2000"]["subtype"] == "payable_control"
    assert accounts["6600"]["type"] == "expense"
    assert len(accounts) == 18


def test_every_journal_balances_and_lines_are_well_formed(books: Path) -> None:
    rows = read_rows(books / "gl_lines.csv")
    assert len(rows) == 2000
    assert len({r["line_id"] for r in rows}) == 2000
    sums: dict[str, Decimal] = defaultdict(Decimal)
    for row in rows:
        assert MONEY.fullmatch(row["amount"]), row
        assert row["date"].startswith("2026-10-"), row
        sums[row["journal_id"]] += Decimal(row["amount"])
    assert all(total == 0 for total in sums.values())


def test_planted_feed_has_17_lines_on_1000_that_match_no_gl_line(books: Path) -> None:
    bank = [r for r in read_rows(books / "bank_lines.csv") if r["account"] == "1000"]
    assert len(bank) == 17
    gl_rows = read_rows(books / "gl_lines.csv")
    every_gl_line = cash_lines(gl_rows, "line_id")
    result = match_bank_lines(cash_lines(bank, "bank_line_id"), every_gl_line, window_days=31)
    assert result.matches == []
    truth = read_ground_truth(books)
    assert truth["anomalies"][0]["kind"] == "bank_feed_mismatch"
    assert truth["anomalies"][0]["matching_gl_lines"] == 0
    gl_on_1000 = sum(1 for r in gl_rows if r["account"] == "1000")
    assert truth["expected"]["bank_reconciliation"]["1000"] == {
        "bank_lines": 17,
        "matched": 0,
        "gl_lines": gl_on_1000,
        "unmatched_gl": gl_on_1000,
    }


@pytest.mark.parametrize("account", ["1000", "1010"])
def test_corrected_feed_reconciles_every_bank_line(books: Path, account: str) -> None:
    bank = [r for r in read_rows(books / "corrected/bank_lines.csv") if r["account"] == account]
    gl = [r for r in read_rows(books / "gl_lines.csv") if r["account"] == account]
    result = match_bank_lines(cash_lines(bank, "bank_line_id"), cash_lines(gl, "line_id"), window_days=3)
    assert len(bank) > 50
    assert result.unmatched_bank == []
    expected = read_ground_truth(books)["expected"]["bank_reconciliation_corrected"][account]
    assert expected["matched"] == len(result.matches) == len(bank)
    assert sorted(result.unmatched_gl) == expected["unmatched_gl_ids"]


def test_bank_lines_trail_their_gl_line_by_zero_to_three_days(books: Path) -> None:
    gl = {(r["account"], r["reference"].casefold(), r["amount"]): r["date"] for r in read_rows(books / "gl_lines.csv")}
    for row in read_rows(books / "corrected/bank_lines.csv"):
        gl_date = gl[(row["account"], row["reference"].casefold(), row["amount"])]
        lag_days = (date.fromisoformat(row["date"]) - date.fromisoformat(gl_date)).days
        assert 0 <= lag_days <= 3, row


def test_payroll_feed_is_identical_in_both_files(books: Path) -> None:
    loaded = [r for r in read_rows(books / "bank_lines.csv") if r["account"] == "1010"]
    corrected = [r for r in read_rows(books / "corrected/bank_lines.csv") if r["account"] == "1010"]
    assert loaded == corrected
    assert loaded


def test_control_accounts_equal_their_subledgers(books: Path) -> None:
    balances = gl_balances(books)
    ap_total = sum((Decimal(r["amount"]) for r in read_rows(books / "ap_subledger.csv")), Decimal(0))
    ar_total = sum((Decimal(r["amount"]) for r in read_rows(books / "ar_subledger.csv")), Decimal(0))
    assert ap_total > 0
    assert ar_total > 0
    assert balances["2000"] == -ap_total
    assert balances["1100"] == ar_total
    expected = read_ground_truth(books)["expected"]
    assert Decimal(expected["ap_control_balance"]) == balances["2000"]
    assert Decimal(expected["ar_subledger_total"]) == ar_total


def test_intercompany_balances_agree_with_the_gl(books: Path) -> None:
    balances = gl_balances(books)
    pairs = read_rows(books / "intercompany.csv")
    assert [p["counterparty"] for p in pairs] == ["ACME-DE", "ACME-US"]
    for pair in pairs:
        assert Decimal(pair["our_balance"]) == balances[pair["account"]] != 0
        assert pair["their_balance"] == pair["our_balance"]


def test_intercompany_mismatch_anomaly_moves_their_balance(profile: Profile, tmp_path: Path) -> None:
    data = {
        **_default_profile_data(),
        "anomalies": [{"kind": "intercompany_mismatch", "counterparty": "ACME-US", "difference": "250.00"}],
    }
    generate_books(parse_profile(data, "ic.yaml"), 42, tmp_path)
    pair = {p["counterparty"]: p for p in read_rows(tmp_path / "intercompany.csv")}["ACME-US"]
    assert Decimal(pair["their_balance"]) - Decimal(pair["our_balance"]) == Decimal("250.00")
    assert read_ground_truth(tmp_path)["expected"]["intercompany"][1]["agrees"] is False


def _default_profile_data() -> dict[str, object]:
    data = yaml.safe_load(DEFAULT_PROFILE.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def test_grni_receipts_hit_cogs_or_opex(books: Path) -> None:
    receipts = read_rows(books / "grni.csv")
    assert len(receipts) == 8
    assert all(r["expense_account"] == "5000" or r["expense_account"].startswith("6") for r in receipts)
    total = sum((Decimal(r["amount"]) for r in receipts), Decimal(0))
    assert Decimal(read_ground_truth(books)["expected"]["grni_total"]) == total


def test_budget_plants_some_variances_over_both_thresholds_and_not_others(books: Path) -> None:
    balances = gl_balances(books)
    budget = {r["account"]: Decimal(r["amount"]) for r in read_rows(books / "budget.csv")}
    prior = {r["account"]: Decimal(r["amount"]) for r in read_rows(books / "prior_period.csv")}
    assert sorted(budget) == sorted(prior) == sorted(a for a in balances if a[0] in "456")
    flagged = []
    for account, planned in budget.items():
        actual = balances[account]
        assert actual != 0
        variance = actual - planned
        pct = (100 * variance / abs(planned)).quantize(Decimal("0.1"))
        if abs(variance) > 5000 and abs(pct) > 10:
            flagged.append(account)
        assert prior[account] != actual
    assert 0 < len(flagged) < len(budget)
    assert flagged == read_ground_truth(books)["expected"]["flagged_accounts"]


def test_scale_and_naming_overrides(profile: Profile, tmp_path: Path) -> None:
    manifest = generate_books(profile, 7, tmp_path, entity="ACME-FR", period="2027-02", gl_lines=777)
    assert (manifest.entity, manifest.period, manifest.gl_line_count) == ("ACME-FR", "2027-02", 777)
    rows = read_rows(tmp_path / "gl_lines.csv")
    assert len(rows) == 777
    assert {r["date"][:7] for r in rows} == {"2027-02"}
    assert max(r["date"] for r in rows) <= "2027-02-28"


@pytest.mark.parametrize(
    ("overrides", "field"),
    [({"gl_lines": 10}, "gl_lines"), ({"period": "2027-00"}, "period"), ({"entity": " "}, "entity")],
)
def test_bad_overrides_fail_naming_the_field(
    profile: Profile, tmp_path: Path, overrides: dict[str, object], field: str
) -> None:
    with pytest.raises(ProfileError) as caught:
        generate_books(profile, 1, tmp_path, **overrides)  # type: ignore[arg-type]
    assert caught.value.field == field


def test_progress_reports_the_final_line_count(profile: Profile, tmp_path: Path) -> None:
    calls: list[tuple[int, int]] = []
    generate_books(profile, 1, tmp_path, progress=lambda done, total: calls.append((done, total)))
    assert calls[-1] == (2000, 2000)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(gl_lines=st.integers(min_value=50, max_value=600), seed=st.integers(min_value=0, max_value=2**64))
def test_any_scale_writes_exactly_that_many_balanced_lines(
    profile: Profile, tmp_path_factory: pytest.TempPathFactory, gl_lines: int, seed: int
) -> None:
    out = tmp_path_factory.mktemp("scaled")
    generate_books(profile, seed, out, gl_lines=gl_lines)
    rows = read_rows(out / "gl_lines.csv")
    assert len(rows) == gl_lines
    sums: dict[str, Decimal] = defaultdict(Decimal)
    for row in rows:
        sums[row["journal_id"]] += Decimal(row["amount"])
    assert set(sums.values()) == {Decimal(0)}
    balances = gl_balances(out)
    ap_total = sum((Decimal(r["amount"]) for r in read_rows(out / "ap_subledger.csv")), Decimal(0))
    assert balances["2000"] == -ap_total
