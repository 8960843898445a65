from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from countersign.policy import PolicyError, load_policy, parse_policy
from tests.policy.conftest import RISK_PATH

SOURCE = "config/risk.yaml"


def refuse(data: object) -> PolicyError:
    with pytest.raises(PolicyError) as caught:
        parse_policy(data, SOURCE)
    assert str(caught.value).startswith(f"{SOURCE}: {caught.value.field}: ")
    return caught.value


def test_malformed_yaml_names_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "risk.yaml"
    path.write_text("version: 1\ntiers: [unclosed\n")
    with pytest.raises(PolicyError) as caught:
        load_policy(path)
    assert caught.value.source == str(path)
    assert caught.value.field == "<document>"
    assert "malformed YAML" in caught.value.reason and "line" in caught.value.reason


def test_duplicate_yaml_key_is_refused_not_silently_overridden(tmp_path: Path) -> None:
    path = tmp_path / "risk.yaml"
    path.write_text("version: 1\nversion: 2\n")
    with pytest.raises(PolicyError, match="duplicate key 'version'"):
        load_policy(path)


def test_missing_file_is_a_policy_error(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="cannot read file"):
        load_policy(tmp_path / "absent.yaml")


def test_empty_document_is_refused() -> None:
    assert refuse(None).field == "<document>"


def test_missing_top_level_field_is_named(policy_data: dict[str, Any]) -> None:
    del policy_data["variance"]
    error = refuse(policy_data)
    assert (error.field, error.reason) == ("variance", "missing required key")


def test_missing_nested_field_is_named(policy_data: dict[str, Any]) -> None:
    del policy_data["reconciliation"]["date_window_days"]
    assert refuse(policy_data).field == "reconciliation.date_window_days"


def test_unknown_key_is_named(policy_data: dict[str, Any]) -> None:
    policy_data["accruals"]["accural_account"] = "2100"
    assert refuse(policy_data).field == "accruals.accural_account"


@pytest.mark.parametrize("bad", ["12,50", "abc", "", "NaN", "Infinity", "-1.00", 0.55, True, None])
def test_bad_decimal_is_refused_naming_the_field(policy_data: dict[str, Any], bad: object) -> None:
    policy_data["reconciliation"]["unmatched_tolerance"] = bad
    assert refuse(policy_data).field == "reconciliation.unmatched_tolerance"


def test_float_money_error_tells_the_author_to_quote_it(policy_data: dict[str, Any]) -> None:
    policy_data["variance"]["threshold_amount"] = 5000.0
    assert "quoted strings" in refuse(policy_data).reason


def test_unquoted_account_code_is_refused(policy_data: dict[str, Any]) -> None:
    policy_data["accruals"]["accrual_account"] = 2100
    assert refuse(policy_data).field == "accruals.accrual_account"


@pytest.mark.parametrize("bad", ["3", 3.0, True, -1])
def test_bad_integer_is_refused(policy_data: dict[str, Any], bad: object) -> None:
    policy_data["reconciliation"]["date_window_days"] = bad
    assert refuse(policy_data).field == "reconciliation.date_window_days"


def test_unknown_tier_in_threshold_is_named(policy_data: dict[str, Any]) -> None:
    policy_data["amount_thresholds"][1]["tier"] = "severe"
    error = refuse(policy_data)
    assert error.field == "amount_thresholds[1].tier"
    assert "severe" in error.reason


def test_unknown_escalation_tier_is_named(policy_data: dict[str, Any]) -> None:
    policy_data["escalation"]["tier"] = "urgent"
    assert refuse(policy_data).field == "escalation.tier"


def test_escalation_to_an_ungated_tier_is_refused(policy_data: dict[str, Any]) -> None:
    policy_data["escalation"]["tier"] = "low"
    assert "gate: false" in refuse(policy_data).reason


def test_gated_tier_with_zero_quorum_is_refused(policy_data: dict[str, Any]) -> None:
    policy_data["tiers"][3]["quorum"] = 0
    error = refuse(policy_data)
    assert error.field == "tiers[critical].quorum"
    assert ">= 1" in error.reason


def test_gated_tier_without_role_is_refused(policy_data: dict[str, Any]) -> None:
    del policy_data["tiers"][1]["approver_role"]
    assert refuse(policy_data).field == "tiers[medium].approver_role"


def test_ungated_tier_with_approver_settings_is_refused(policy_data: dict[str, Any]) -> None:
    policy_data["tiers"][0]["quorum"] = 1
    assert refuse(policy_data).field == "tiers[low].quorum"


def test_duplicate_tier_is_refused(policy_data: dict[str, Any]) -> None:
    policy_data["tiers"].append(dict(policy_data["tiers"][1]))
    error = refuse(policy_data)
    assert error.field == "tiers[4].name"
    assert "duplicate" in error.reason


def test_thresholds_must_ascend_in_amount_and_tier(policy_data: dict[str, Any]) -> None:
    policy_data["amount_thresholds"].reverse()
    assert refuse(policy_data).field == "amount_thresholds[1].min_amount"


def test_threshold_that_can_never_raise_the_tier_is_refused(policy_data: dict[str, Any]) -> None:
    policy_data["amount_thresholds"][1]["tier"] = "medium"
    assert refuse(policy_data).field == "amount_thresholds[1].tier"


def test_unsupported_version_is_refused(policy_data: dict[str, Any]) -> None:
    policy_data["version"] = 2
    assert refuse(policy_data).field == "version"


def test_bad_currency_is_refused(policy_data: dict[str, Any]) -> None:
    policy_data["currency"] = "pounds"
    assert refuse(policy_data).field == "currency"


@given(amount=st.decimals(min_value=0, max_value=Decimal("1e12"), places=2, allow_nan=False))
def test_any_non_negative_decimal_string_parses_exactly(amount: Decimal) -> None:
    data = yaml.safe_load(RISK_PATH.read_text())
    data["variance"]["threshold_amount"] = str(amount)
    parsed = parse_policy(data, SOURCE).variance.threshold_amount
    assert parsed == amount and str(parsed) == str(amount)


def test_findings_section_is_optional_and_then_findings_raise_nothing(policy_data: dict[str, Any]) -> None:
    del policy_data["findings"]
    assert parse_policy(policy_data, SOURCE).findings_tier is None


def test_findings_tier_must_be_a_known_gated_tier(policy_data: dict[str, Any]) -> None:
    policy_data["findings"] = {"tier": "low"}
    assert refuse(policy_data).field == "findings.tier"
    policy_data["findings"] = {"tier": "urgent"}
    assert refuse(policy_data).field == "findings.tier"
    policy_data["findings"] = {"tier": "high", "extra": 1}
    assert refuse(policy_data).field == "findings.extra"


@pytest.mark.parametrize("findings", ["2026-01-01", {"tier": "2026-01-01"}, {"tier": "high", "when": "2026-01-01"}])
def test_a_malformed_findings_section_is_a_policy_error_even_with_a_date_in_it(
    policy_data: dict[str, Any], findings: object
) -> None:
    data = yaml.safe_load(yaml.safe_dump({**policy_data, "findings": findings}).replace("'2026-01-01'", "2026-01-01"))
    assert refuse(data).field.startswith("findings")


def test_a_tier_lists_only_known_proofs_and_omitting_them_accepts_only_a_persons_key(
    policy_data: dict[str, Any],
) -> None:
    from countersign.policy.model import PERSON_KEY_PROOFS

    tiers = policy_data["tiers"]
    medium = next(t for t in tiers if t["name"] == "medium")
    medium["proofs"] = ["platform_identity", "a_wink"]
    with pytest.raises(PolicyError, match=r"tiers\[medium\]\.proofs.*unknown proof 'a_wink'"):
        parse_policy(policy_data, SOURCE)
    medium["proofs"] = []
    with pytest.raises(PolicyError, match="at least one"):
        parse_policy(policy_data, SOURCE)
    medium.pop("proofs")
    assert parse_policy(policy_data, SOURCE).tier("medium").accepted_proofs == PERSON_KEY_PROOFS
    low = next(t for t in tiers if not t["gate"])
    low["proofs"] = ["passkey"]
    with pytest.raises(PolicyError, match="only allowed on a tier with gate: true"):
        parse_policy(policy_data, SOURCE)
