from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from countersign.synthetic import BankFeedMismatch, IntercompanyMismatch, ProfileError, load_profile, parse_profile
from tests.synthetic.books_fixture import DEFAULT_PROFILE, LARGE_PROFILE


def default_data() -> dict[str, Any]:
    data = yaml.safe_load(DEFAULT_PROFILE.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def test_default_profile_loads_with_the_planted_bank_feed_anomaly() -> None:
    profile = load_profile(DEFAULT_PROFILE)
    assert profile.name == "default"
    assert (profile.entity, profile.period, profile.currency) == ("ACME-UK", "2026-10", "GBP")
    assert profile.gl_lines == 2000
    assert profile.bank_accounts == ("1000", "1010")
    assert profile.grni_receipts == 8
    assert profile.anomalies == (BankFeedMismatch(account="1000", bank_lines=17),)


def test_large_profile_is_the_default_at_one_million_lines() -> None:
    default, large = load_profile(DEFAULT_PROFILE), load_profile(LARGE_PROFILE)
    assert large.gl_lines == 1_000_000
    assert large.name == "large"
    assert {**vars(large), "gl_lines": 0, "name": "", "source": ""} == {
        **vars(default),
        "gl_lines": 0,
        "name": "",
        "source": "",
    }


def test_intercompany_mismatch_anomaly_parses_difference_in_minor_units() -> None:
    data = default_data()
    data["anomalies"] = [{"kind": "intercompany_mismatch", "counterparty": "ACME-DE", "difference": "-250.40"}]
    profile = parse_profile(data, "custom.yaml")
    assert profile.anomalies == (IntercompanyMismatch(counterparty="ACME-DE", difference_minor=-25040),)


def _with(path: str, value: object) -> dict[str, Any]:
    data = default_data()
    target: Any = data
    keys = path.split(".")
    for key in keys[:-1]:
        target = target[int(key)] if isinstance(target, list) else target[key]
    last = keys[-1]
    if isinstance(target, list):
        target[int(last)] = value
    else:
        target[last] = value
    return data


def _without(key: str) -> dict[str, Any]:
    data = default_data()
    del data[key]
    return data


@pytest.mark.parametrize(
    ("data", "field", "reason_part"),
    [
        (_with("colour", "blue"), "colour", "unknown key"),
        (_without("gl_lines"), "gl_lines", "missing"),
        (_with("gl_lines", "many"), "gl_lines", "expected an integer"),
        (_with("gl_lines", True), "gl_lines", "expected an integer"),
        (_with("gl_lines", 10), "gl_lines", ">= 50"),
        (_with("customers", 0), "customers", ">= 1"),
        (_with("grni_receipts", -1), "grni_receipts", ">= 0"),
        (_with("outstanding_items", 2.5), "outstanding_items", "expected an integer"),
        (_with("bank_lag_days", 30), "bank_lag_days", "<= 7"),
        (_with("period", "2026-13"), "period", "month"),
        (_with("period", "October"), "period", "YYYY-MM"),
        (_with("currency", "gbp"), "currency", "ISO"),
        (_with("entity", ""), "entity", "non-empty"),
        (_with("bank_accounts", ["1000", "1100"]), "bank_accounts[1]", "not a cash account"),
        (_with("bank_accounts", "1000"), "bank_accounts", "expected a list"),
        (_with("intercompany.0.account", "1000"), "intercompany[0].account", "is not one of"),
        (_with("anomalies.0.kind", "ledger_on_fire"), "anomalies[0].kind", "unknown anomaly kind"),
        (_with("anomalies.0.bank_lines", -17), "anomalies[0].bank_lines", ">= 1"),
        (_with("anomalies.0.account", "1300"), "anomalies[0].account", "not in bank_accounts"),
        (
            _with("anomalies.0", {"kind": "bank_feed_mismatch", "account": "1000"}),
            "anomalies[0].bank_lines",
            "missing",
        ),
        (
            _with("anomalies.0", {"kind": "intercompany_mismatch", "counterparty": "ACME-DE", "difference": 5}),
            "anomalies[0].difference",
            "decimal string",
        ),
        (
            _with("anomalies.0", {"kind": "intercompany_mismatch", "counterparty": "NOPE", "difference": "1.00"}),
            "anomalies[0].counterparty",
            "not in intercompany",
        ),
    ],
)
def test_malformed_profile_fails_naming_source_field_and_reason(
    data: dict[str, Any], field: str, reason_part: str
) -> None:
    with pytest.raises(ProfileError) as caught:
        parse_profile(data, "profiles/broken.yaml")
    assert caught.value.field == field
    assert caught.value.source == "profiles/broken.yaml"
    assert reason_part in caught.value.reason
    assert str(caught.value) == f"profiles/broken.yaml: {field}: {caught.value.reason}"


def test_profile_that_is_not_a_mapping_is_rejected() -> None:
    with pytest.raises(ProfileError) as caught:
        parse_profile(["entity"], "x.yaml")
    assert caught.value.field == "<root>"


def test_invalid_yaml_file_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("entity: [unclosed\n", encoding="utf-8")
    with pytest.raises(ProfileError) as caught:
        load_profile(path)
    assert caught.value.source == str(path)
    assert caught.value.field == "<yaml>"


def test_missing_profile_file_is_a_profile_error(tmp_path: Path) -> None:
    with pytest.raises(ProfileError) as caught:
        load_profile(tmp_path / "absent.yaml")
    assert caught.value.field == "<file>"


@given(st.integers(max_value=-1))
def test_any_negative_count_is_rejected(count: int) -> None:
    with pytest.raises(ProfileError) as caught:
        parse_profile(_with("opening_ap_invoices", count), "p.yaml")
    assert caught.value.field == "opening_ap_invoices"
