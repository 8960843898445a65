"""Policy for real entities: always-human accounts and events, per-entity materiality and functional currency, and
amounts compared with the global thresholds after conversion at a recorded rate (risk.yaml `always_human`,
`entities`; countersign/policy/fx.py)."""

import copy
from datetime import date, datetime
from decimal import ROUND_HALF_EVEN, Decimal, localcontext
from fractions import Fraction
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from countersign.policy import (
    AlwaysHumanEvent,
    AlwaysHumanReason,
    EntityPolicy,
    FxRate,
    GateInputError,
    Policy,
    PolicyError,
    WorkflowTask,
    always_human_reasons,
    convert,
    derive_gate,
    effective_tier,
    load_policy,
    parse_policy,
    raising_threshold,
)
from tests.policy.conftest import RISK_PATH

SOURCE = "config/risk.yaml"
BANK_CHANGE = AlwaysHumanEvent.SUPPLIER_BANK_DETAILS_CHANGED
USD_GBP = FxRate("USD", "GBP", Decimal("0.79"), date(2026, 11, 30), "ECB euro reference rates")
SHIPPED = load_policy(RISK_PATH)
ACME_US = {
    "currency": "USD",
    "amount_thresholds": [{"min_amount": "100000.00", "tier": "high"}, {"min_amount": "750000.00", "tier": "critical"}],
    "always_human_accounts": ["1050"],
}


def shipped_data() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(RISK_PATH.read_text())
    return data


def without_new_sections() -> dict[str, Any]:
    """risk.yaml as it was before `always_human` and `entities`."""
    data = shipped_data()
    data.pop("always_human", None)
    data.pop("entities", None)
    return data


def with_sections(**sections: Any) -> dict[str, Any]:
    data = without_new_sections()
    data["always_human"] = {"tier": "high", "accounts": ["1000", "1010", "1300", "2300"], "events": [BANK_CHANGE.value]}
    data["entities"] = {
        "ACME-US": copy.deepcopy(ACME_US),
        "ACME-NL": {"currency": "EUR"},
        "ACME-GB": {"currency": "GBP"},
    }
    data.update(sections)
    return data


def policy_of(data: dict[str, Any]) -> Policy:
    return parse_policy(data, SOURCE)


def refuse(data: dict[str, Any]) -> PolicyError:
    with pytest.raises(PolicyError) as caught:
        parse_policy(data, SOURCE)
    assert str(caught.value).startswith(f"{SOURCE}: {caught.value.field}: ")
    return caught.value


def make_task(risk_tier: str, task_id: str = "t") -> WorkflowTask:
    return WorkflowTask(
        id=task_id,
        title="Task",
        handler="test.task",
        specialist=None,
        depends_on=(),
        risk_tier=risk_tier,
        requires_gate=False,
    )


# --- the loader ------------------------------------------------------------------------------------------------


def test_the_shipped_policy_lists_always_human_cash_and_intercompany_and_no_entity() -> None:
    assert SHIPPED.always_human is not None
    assert SHIPPED.always_human.accounts == ("1000", "1010", "1300", "2300")
    assert SHIPPED.always_human.events == (BANK_CHANGE,)
    assert SHIPPED.tier(SHIPPED.always_human.tier).gate
    assert SHIPPED.entities == ()


def test_both_sections_load_into_frozen_values() -> None:
    policy = policy_of(with_sections())
    assert policy.always_human is not None and policy.always_human.tier == "high"
    us = policy.entity("ACME-US")
    assert (us.currency, us.always_human_accounts) == ("USD", ("1050",))
    assert us.amount_thresholds is not None
    assert [(t.min_amount, t.tier) for t in us.amount_thresholds] == [
        (Decimal("100000.00"), "high"),
        (Decimal("750000.00"), "critical"),
    ]
    assert policy.entity("ACME-NL") == EntityPolicy("ACME-NL", "EUR", None, ())
    assert policy.always_human_accounts("ACME-US") == {"1000", "1010", "1300", "2300", "1050"}
    assert policy.always_human_accounts("ACME-NL") == {"1000", "1010", "1300", "2300"}


def test_an_entity_risk_yaml_does_not_name_keeps_the_policys_currency_and_the_global_thresholds() -> None:
    policy = policy_of(with_sections())
    assert policy.entity("ACME-UK") == EntityPolicy("ACME-UK", "GBP", None, ())
    assert policy_of(without_new_sections()).always_human_accounts("ACME-UK") == frozenset()


def test_a_policy_without_the_new_sections_has_none_and_keeps_its_digest_semantics() -> None:
    data = without_new_sections()
    policy = policy_of(data)
    assert (policy.always_human, policy.entities) == (None, ())
    assert policy.digest == policy_of(copy.deepcopy(data)).digest
    assert policy.digest != policy_of(with_sections()).digest  # the sections are part of what the digest covers


@pytest.mark.parametrize(
    ("change", "field", "says"),
    [
        (lambda d: d["entities"]["ACME-US"]["amount_thresholds"][1].update(tier="medium"),
         "entities.ACME-US.amount_thresholds[1].tier", "must rank above"),
        (lambda d: d["entities"]["ACME-US"]["amount_thresholds"][1].update(min_amount="1.00"),
         "entities.ACME-US.amount_thresholds[1].min_amount", "greater than the previous"),
        (lambda d: d["entities"]["ACME-US"]["amount_thresholds"][0].update(min_amount="100000.005"),
         "entities.ACME-US.amount_thresholds[0].min_amount", "at most 2 decimal places"),
        (lambda d: d["entities"]["ACME-US"]["amount_thresholds"][0].update(min_amount=100000.0),
         "entities.ACME-US.amount_thresholds[0].min_amount", "quoted strings"),
        (lambda d: d["entities"]["ACME-US"]["amount_thresholds"][0].update(tier="severe"),
         "entities.ACME-US.amount_thresholds[0].tier", "unknown tier 'severe'"),
        (lambda d: d["entities"]["ACME-US"].update(amount_thresholds=[]),
         "entities.ACME-US.amount_thresholds", "lists no threshold"),
        (lambda d: d["entities"]["ACME-US"].update(currency="dollars"), "entities.ACME-US.currency", "ISO 4217"),
        (lambda d: d["entities"]["ACME-US"].pop("currency"), "entities.ACME-US.currency", "missing required key"),
        (lambda d: d["entities"]["ACME-US"].update(materiality="1"), "entities.ACME-US.materiality", "unknown key"),
        (lambda d: d["entities"].update({"ACME US": {"currency": "USD"}}), "entities.ACME US", "an entity code"),
        (lambda d: d["entities"].update({"-ACME": {"currency": "USD"}}), "entities.-ACME", "starting with a letter"),
        (lambda d: d.update(entities=["ACME-US"]), "entities", "expected a mapping of entity codes"),
        (lambda d: d["entities"]["ACME-US"].update(always_human_accounts=["1000"]),
         "entities.ACME-US.always_human_accounts[0]", "already in always_human.accounts"),
        (lambda d: d["entities"]["ACME-US"].update(always_human_accounts=[1050]),
         "entities.ACME-US.always_human_accounts[0]", "expected a quoted account code, got int 1050"),
        (lambda d: d.pop("always_human"), "entities.ACME-US.always_human_accounts", "needs the always_human section"),
        (lambda d: d["always_human"].update(tier="low"), "always_human.tier", "gate: false"),
        (lambda d: d["always_human"].update(tier="urgent"), "always_human.tier", "unknown tier 'urgent'"),
        (lambda d: d["always_human"].pop("tier"), "always_human.tier", "missing required key"),
        (lambda d: d["always_human"].update(accounts=["1000", 1010]), "always_human.accounts[1]",
         "expected a quoted account code, got int 1010"),
        (lambda d: d["always_human"].update(accounts=["1000", "1000"]), "always_human.accounts[1]", "listed twice"),
        (lambda d: d["always_human"].update(accounts=[" 1000"]), "always_human.accounts[0]", "no spaces"),
        (lambda d: d["always_human"].update(accounts="1000"), "always_human.accounts", "expected a list"),
        (lambda d: d["always_human"].update(events=["vendor_changed"]), "always_human.events[0]",
         "unknown event 'vendor_changed' (known: supplier_bank_details_changed)"),
        (lambda d: d["always_human"].update(events=[BANK_CHANGE.value] * 2), "always_human.events[1]", "listed twice"),
        (lambda d: d["always_human"].update(accounts=[], events=[]), "always_human", "no accounts and no events"),
        (lambda d: d["always_human"].update(owners={}), "always_human.owners", "unknown key"),
    ],
)  # fmt: skip
def test_each_refusal_names_the_key(change: Any, field: str, says: str) -> None:
    data = with_sections()
    change(data)
    error = refuse(data)
    assert error.field == field
    assert says in error.reason


def test_a_threshold_of_zero_sends_every_amount_of_the_entity_to_its_tier() -> None:
    data = with_sections()
    data["entities"]["ACME-NL"]["amount_thresholds"] = [{"min_amount": "0", "tier": "medium"}]
    gate = derive_gate(policy_of(data), make_task("low"), Decimal("0.01"), entity="ACME-NL")
    assert gate is not None and gate.tier == "medium"


# --- per-entity materiality --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("amount", "tier"),
    [
        ("99999.99", None),
        ("100000.00", "high"),
        ("-120000.00", "high"),
        ("749999.99", "high"),
        ("750000.00", "critical"),
    ],
)
def test_an_entity_with_its_own_thresholds_is_judged_on_them(amount: str, tier: str | None) -> None:
    gate = derive_gate(policy_of(with_sections()), make_task("low"), Decimal(amount), entity="ACME-US")
    assert (gate.tier if gate else None) == tier


def test_the_entitys_materiality_is_named_in_the_rule_and_replaces_the_global_list() -> None:
    policy = policy_of(with_sections())
    gate = derive_gate(policy, make_task("low"), Decimal("120000.00"), entity="ACME-US")
    assert gate is not None
    assert gate.rule.startswith(
        "amount USD 120,000.00 >= USD 100,000.00 (materiality of ACME-US) raises tier low to high; tier high requires"
    )
    # The control: the same amount for an entity on the global thresholds (GBP 250,000.00) raises nothing.
    assert derive_gate(policy, make_task("low"), Decimal("120000.00"), entity="ACME-GB") is None
    assert derive_gate(policy, make_task("low"), Decimal("120000.00")) is None
    # And the global threshold no longer applies to ACME-US: GBP 250,000.00's tier comes from its own list.
    us = derive_gate(policy, make_task("low"), Decimal("260000.00"), entity="ACME-US")
    assert us is not None and "materiality of ACME-US" in us.rule


def test_own_thresholds_need_no_rate_and_ignore_one_given() -> None:
    policy = policy_of(with_sections())
    without = derive_gate(policy, make_task("low"), Decimal("120000.00"), entity="ACME-US")
    with_rate = derive_gate(policy, make_task("low"), Decimal("120000.00"), entity="ACME-US", fx=USD_GBP)
    assert without == with_rate


# --- amounts converted at a recorded rate -------------------------------------------------------------------------


def policy_with_us_on_global_thresholds() -> Policy:
    data = with_sections()
    data["entities"]["ACME-US"] = {"currency": "USD"}
    return policy_of(data)


def test_a_foreign_currency_amount_is_converted_and_the_rule_names_the_rate_and_its_source() -> None:
    gate = derive_gate(
        policy_with_us_on_global_thresholds(), make_task("medium"), Decimal("400000.00"), entity="ACME-US", fx=USD_GBP
    )
    assert gate is not None and gate.tier == "high"
    assert gate.rule.startswith(
        "amount USD 400,000.00 = GBP 316,000.00 at 0.79 USD/GBP (ECB euro reference rates, 2026-11-30)"
        " >= GBP 250,000.00 raises tier medium to high; tier high requires 1 approver"
    )


@pytest.mark.parametrize(
    ("amount", "tier"),
    [
        ("300000.00", "medium"),  # USD 300,000 = GBP 237,000: below GBP 250,000, though 300,000 >= 250,000
        ("316455.68", "medium"),  # = GBP 249,999.9872 -> 249,999.99
        ("316455.69", "high"),  # = GBP 249,999.9951 -> 250,000.00: the cent the comparison is made at
        ("-400000.00", "high"),
        ("1265822.77", "high"),  # = GBP 999,999.9883 -> 999,999.99
        ("1265822.78", "critical"),  # = GBP 999,999.9962 -> 1,000,000.00
    ],
)
def test_the_global_thresholds_compare_the_converted_amount(amount: str, tier: str) -> None:
    policy = policy_with_us_on_global_thresholds()
    got = effective_tier(policy, make_task("medium"), Decimal(amount), entity="ACME-US", fx=USD_GBP)
    assert got.name == tier
    gate = derive_gate(policy, make_task("medium"), Decimal(amount), entity="ACME-US", fx=USD_GBP)
    assert gate is not None and gate.tier == tier


def test_a_negative_amount_is_shown_with_its_absolute_value_and_converted_as_such() -> None:
    gate = derive_gate(
        policy_with_us_on_global_thresholds(), make_task("low"), Decimal("-400000.00"), entity="ACME-US", fx=USD_GBP
    )
    assert gate is not None
    assert gate.rule.startswith("amount USD -400,000.00 (absolute USD 400,000.00) = GBP 316,000.00 at 0.79 USD/GBP")


def test_a_foreign_currency_amount_without_a_rate_is_refused_naming_fx() -> None:
    policy = policy_with_us_on_global_thresholds()
    with pytest.raises(GateInputError) as caught:
        derive_gate(policy, make_task("medium"), Decimal("400000.00"), entity="ACME-US")
    assert caught.value.field == "fx"
    assert str(caught.value) == "fx: amount in USD needs a USD->GBP rate the close records"
    with pytest.raises(GateInputError, match="needs a USD->GBP rate, got EUR->GBP") as wrong:
        derive_gate(
            policy,
            make_task("medium"),
            Decimal("400000.00"),
            entity="ACME-US",
            fx=FxRate("EUR", "GBP", Decimal("0.86"), date(2026, 11, 30), "ECB"),
        )
    assert wrong.value.field == "fx"
    # No amount, nothing to convert: no rate is needed.
    gate = derive_gate(policy, make_task("medium"), entity="ACME-US")
    assert gate is not None and gate.tier == "medium"


def test_a_rate_without_an_entity_is_refused() -> None:
    with pytest.raises(GateInputError) as caught:
        raising_threshold(SHIPPED, Decimal("1.00"), fx=USD_GBP)
    assert caught.value.field == "fx"


def test_an_entity_in_the_policys_currency_needs_no_rate() -> None:
    policy = policy_of(with_sections())
    gate = derive_gate(policy, make_task("low"), Decimal("250000.00"), entity="ACME-GB")
    assert gate is not None and gate.rule.startswith("amount GBP 250,000.00 >= GBP 250,000.00 raises tier low to high")


@pytest.mark.parametrize("entity", ["", "ACME US", "*", 42])
def test_an_entity_that_is_no_entity_code_is_refused(entity: Any) -> None:
    with pytest.raises(GateInputError) as caught:
        derive_gate(SHIPPED, make_task("low"), Decimal("1.00"), entity=entity)
    assert caught.value.field == "entity"


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (("usd", "GBP", Decimal("0.79"), date(2026, 11, 30), "ECB"), "fx.from_currency"),
        (("USD", "USD", Decimal("1"), date(2026, 11, 30), "ECB"), "fx.to_currency"),
        (("USD", "GBP", 0.79, date(2026, 11, 30), "ECB"), "fx.rate"),
        (("USD", "GBP", Decimal("0"), date(2026, 11, 30), "ECB"), "fx.rate"),
        (("USD", "GBP", Decimal("-0.79"), date(2026, 11, 30), "ECB"), "fx.rate"),
        (("USD", "GBP", Decimal("NaN"), date(2026, 11, 30), "ECB"), "fx.rate"),
        (("USD", "GBP", Decimal("0.12345678901"), date(2026, 11, 30), "ECB"), "fx.rate"),
        (("USD", "GBP", Decimal("1e10"), date(2026, 11, 30), "ECB"), "fx.rate"),
        (("USD", "GBP", Decimal("0.79"), datetime(2026, 11, 30), "ECB"), "fx.rate_date"),
        (("USD", "GBP", Decimal("0.79"), date(2026, 11, 30), " "), "fx.source"),
    ],
)
def test_a_rate_the_close_could_not_record_is_refused(args: tuple[Any, ...], field: str) -> None:
    with pytest.raises(GateInputError) as caught:
        FxRate(*args)
    assert caught.value.field == field


def test_a_rate_with_trailing_zeros_beyond_ten_places_is_the_same_rate() -> None:
    assert (
        FxRate("USD", "GBP", Decimal("0.790000000000"), date(2026, 11, 30), "ECB").shown
        == "0.79 USD/GBP (ECB, 2026-11-30)"
    )


@pytest.mark.parametrize(
    ("amount", "rate", "converted"),
    [
        ("0.01", "0.5", "0.00"),  # 0.005: a tie, the cent below (0) is even
        ("0.03", "0.5", "0.02"),  # 0.015: a tie, the cent above (2) is even
        ("-0.03", "0.5", "-0.02"),
        ("400000.00", "0.79", "316000.00"),
        ("9999999999999999.99", "1.2345678901", "12345678900999999.99"),  # exact to the cent, no early rounding
    ],
)
def test_convert_rounds_the_exact_product_to_the_cent_half_to_even(amount: str, rate: str, converted: str) -> None:
    fx = FxRate("USD", "GBP", Decimal(rate), date(2026, 11, 30), "ECB")
    assert convert(Decimal(amount), fx) == Decimal(converted)


@given(
    amount=st.decimals(min_value=-(10**15), max_value=10**15, places=2, allow_nan=False),
    rate=st.decimals(min_value=Decimal("0.0000000001"), max_value=Decimal(10**6), places=10, allow_nan=False),
)
def test_convert_is_the_product_to_the_nearest_cent(amount: Decimal, rate: Decimal) -> None:
    with localcontext() as wide:
        wide.prec = 60  # every such product, exactly
        exact = amount * rate
    assert exact == Fraction(amount) * Fraction(rate)
    converted = convert(amount, FxRate("USD", "GBP", rate, date(2026, 11, 30), "ECB"))
    assert converted == exact.quantize(Decimal("0.01"), rounding=ROUND_HALF_EVEN)
    assert abs(converted - exact) <= Decimal("0.005")


# --- always-human accounts and events ------------------------------------------------------------------------------


def test_a_low_task_touching_an_always_human_account_needs_a_person_and_the_rule_says_why() -> None:
    reasons = always_human_reasons(SHIPPED, "ACME-UK", {"1000": "Cash - Operating", "6400": "Professional Fees"}, ())
    assert reasons == (AlwaysHumanReason("account", "1000", "Cash - Operating"),)
    assert derive_gate(SHIPPED, make_task("low")) is None  # the control: without the account, no gate
    gate = derive_gate(SHIPPED, make_task("low"), always_human=reasons)
    assert gate is not None and gate.tier == "medium"
    assert gate.rule == (
        "account 1000 (Cash - Operating) always needs a person; tier medium requires 1 approver (role controller)"
        " within 48h"
    )


def test_a_supplier_bank_change_raises_the_gate_to_the_always_human_tier() -> None:
    policy = policy_of(with_sections())
    reasons = always_human_reasons(policy, "ACME-UK", {}, [(BANK_CHANGE, "ACME Supplies Ltd, 2026-11-14")])
    gate = derive_gate(policy, make_task("medium"), Decimal("10.00"), always_human=reasons)
    assert gate is not None and gate.tier == "high"
    assert gate.rule.startswith(
        "supplier bank details changed (ACME Supplies Ltd, 2026-11-14) always needs a person; tier high requires"
    )


def test_every_reason_is_named_and_the_tier_never_falls() -> None:
    policy = policy_of(with_sections())
    reasons = always_human_reasons(
        policy, "ACME-US", {"1300": "Intercompany Receivable", "1050": "Cash - USD"}, [(BANK_CHANGE, "")]
    )
    assert [reason.sentence for reason in reasons] == [
        "account 1050 (Cash - USD) always needs a person",
        "account 1300 (Intercompany Receivable) always needs a person",
        "supplier bank details changed always needs a person",
    ]
    critical = derive_gate(policy, make_task("critical"), always_human=reasons)
    assert critical is not None and critical.tier == "critical"
    amount = derive_gate(policy, make_task("low"), Decimal("800000.00"), entity="ACME-US", always_human=reasons)
    assert amount is not None and amount.tier == "critical"
    assert amount.rule.index("materiality of ACME-US") < amount.rule.index("account 1050")


def test_an_entitys_own_always_human_account_counts_only_for_that_entity() -> None:
    policy = policy_of(with_sections())
    accounts = {"1050": "Cash - USD"}
    assert always_human_reasons(policy, "ACME-US", accounts) == (AlwaysHumanReason("account", "1050", "Cash - USD"),)
    assert always_human_reasons(policy, "ACME-NL", accounts) == ()


def test_without_an_always_human_section_nothing_is_always_human() -> None:
    policy = policy_of(without_new_sections())
    assert always_human_reasons(policy, "ACME-UK", {"1000": "Cash"}, [(BANK_CHANGE, "x")]) == ()
    reason = AlwaysHumanReason("account", "1000", "Cash")
    assert derive_gate(policy, make_task("low"), always_human=[reason]) is None


def test_an_event_the_policy_does_not_list_raises_nothing() -> None:
    data = with_sections()
    data["always_human"]["events"] = []
    assert always_human_reasons(policy_of(data), "ACME-UK", {}, [(BANK_CHANGE, "x")]) == ()


@pytest.mark.parametrize("reason", ["account 1000", AlwaysHumanReason("ledger", "1000", "")])  # type: ignore[arg-type]
def test_something_that_is_no_always_human_reason_is_refused(reason: Any) -> None:
    with pytest.raises(GateInputError) as caught:
        derive_gate(SHIPPED, make_task("low"), always_human=[reason])
    assert caught.value.field == "always_human"


def test_an_event_that_is_no_always_human_event_is_refused() -> None:
    with pytest.raises(GateInputError) as caught:
        always_human_reasons(SHIPPED, "ACME-UK", {}, [("supplier_bank_details_changed", "x")])  # type: ignore[list-item]
    assert caught.value.field == "events"


# --- nothing changes for a caller or a policy that uses none of it --------------------------------------------------

AMOUNTS = (None, Decimal("0.00"), Decimal("249999.99"), Decimal("250000.00"), Decimal("-1000000.00"))


@pytest.mark.parametrize("risk_tier", ["low", "medium", "high", "critical"])
@pytest.mark.parametrize("amount", AMOUNTS)
def test_gates_are_what_they_were_for_a_policy_and_a_caller_without_the_new_sections(
    risk_tier: str, amount: Decimal | None
) -> None:
    before = policy_of(without_new_sections())
    task = make_task(risk_tier)
    expected = derive_gate(before, task, amount)
    assert derive_gate(SHIPPED, task, amount) == expected  # today's risk.yaml, called as every caller calls it
    assert derive_gate(before, task, amount, entity="ACME-UK") == expected
    assert derive_gate(policy_of(with_sections()), task, amount, entity="ACME-GB") == expected
    assert effective_tier(SHIPPED, task, amount) == effective_tier(before, task, amount)
    if amount is not None:
        assert raising_threshold(SHIPPED, amount) == raising_threshold(before, amount)
