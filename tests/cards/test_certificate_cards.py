"""The payment-certificate section of gate cards: strict reading, both renderers, escaping, caps, no regression."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from countersign.cards import certificates, slack, teams
from countersign.cards.certificates import ClauseRef, Hold, certificate_summary
from countersign.cards.model import CardDataError, GateCard
from countersign.certificates import INVARIANTS
from countersign.policy.wording import in_words
from tests.cards.checks import (
    assert_adaptive_card_valid,
    assert_slack_message_valid,
    slack_actions,
    utf16_units,
    walk,
)
from tests.cards.fixtures import escalation_cards, open_gate_cards

HOSTILE = "<!channel> *pay now* <https://evil.example|click> & @here\n*Amounts:* none — approve"


def full_certificate() -> dict[str, Any]:
    return {
        "contract_id": "C-0007",
        "contract_title": "Riverside depot, phase 2 groundworks",
        "certificate_no": 5,
        "period": "2026-10",
        "currency": "GBP",
        "amount_to_certify": "123456.78",
        "previously_certified": "987654.32",
        "gross_to_date": "1250000.00",
        "retention_to_date": "62500.00",
        "advance_repaid_to_date": "40000.00",
        "violations": [
            {
                "invariant": "retention_within_cap",
                "title": "Retention never above its cap",
                "explanation": "Retention to date of 60,000.00 exceeds the contract cap of 50,000.00.",
                "amounts": {"retention": "60000.00", "cap": "50000.00"},
                "lines": ["BOQ-012"],
                "clauses": [{"id": "CSB-4.7", "title": "Retention limit"}],
            },
            {
                "invariant": "quantity_within_bill",
                "title": "Quantity never beyond its bill line",
                "explanation": "Cumulative quantity 1,340 m3 exceeds the bill quantity of 1,200 m3.",
                "amounts": {"excess_value": "8820.50"},
                "lines": ["BOQ-003", "BOQ-004"],
                "clauses": [
                    {"id": "CSB-2.1", "title": "Measurement of work"},
                    {"id": "CSB-2.4", "title": "Variations must be instructed"},
                ],
            },
        ],
        "holds": [{"kind": "duplicate", "other": "C-0003/4 line BOQ-2", "overlap": "1200.00"}],
        "escalation": "suspected_injection",
        "explanation_source": "fallback",
    }


def payment_gate(certificate: dict[str, Any] | None = None, base: GateCard | None = None) -> GateCard:
    card = base or open_gate_cards()["accruals"]
    summary = {"certificate": full_certificate() if certificate is None else certificate}
    return replace(card, task="payment_gate", task_title="Payment certificate", summary=summary)


def violation(index: int, text: str = "") -> dict[str, Any]:
    return {
        "invariant": f"invariant_{index}",
        "title": f"Invariant {index} {text}",
        "explanation": f"Explanation {index}. {text}",
        "amounts": {"expected": f"{index}00.00", "found": f"{index}50.00"},
        "lines": [f"BOQ-{index:03d}"],
        "clauses": [{"id": f"CSB-{index}.1", "title": f"Clause {index} {text}"}],
    }


def violation_containers(section: dict[str, Any]) -> list[dict[str, Any]]:
    """The Teams certificate section's per-violation Containers (each opens with the title's RichTextBlock)."""
    return [e for e in section["items"] if e["type"] == "Container" and e["items"][0]["type"] == "RichTextBlock"]


def slack_text(message: dict[str, Any]) -> str:
    return "\n".join(str(o["text"]) for o in walk(message["blocks"]) if isinstance(o.get("text"), str))


def teams_text(card: dict[str, Any]) -> str:
    texts = [str(o[key]) for o in walk(card) for key in ("text", "title", "value") if isinstance(o.get(key), str)]
    return "\n".join(texts)


# --- reading ----------------------------------------------------------------------------------------------


def test_a_full_certificate_is_read_into_decimals_and_frozen_records() -> None:
    cs = certificate_summary({"certificate": full_certificate()})
    assert cs is not None
    assert (cs.contract_id, cs.certificate_no, cs.period, cs.currency) == ("C-0007", 5, "2026-10", "GBP")
    assert cs.amount_to_certify == Decimal("123456.78") and cs.previously_certified == Decimal("987654.32")
    first = cs.violations[0]
    assert first.amounts == (("retention", Decimal("60000.00")), ("cap", Decimal("50000.00")))
    assert first.clauses == (ClauseRef("CSB-4.7", "Retention limit"),)
    assert cs.holds == (Hold("duplicate", "C-0003/4 line BOQ-2", Decimal("1200.00")),)
    assert cs.escalation == "suspected_injection" and cs.explanation_is_fallback
    with pytest.raises(AttributeError):
        cs.amount_to_certify = Decimal(0)  # type: ignore[misc]


def test_a_summary_without_a_certificate_has_none() -> None:
    assert certificate_summary({}) is None
    assert certificate_summary(open_gate_cards()["accruals"].summary) is None
    assert certificate_summary({"reason": "halted", "result": {"kind": "bank"}}) is None


def test_an_escalation_summary_carries_the_certificate_in_its_result() -> None:
    cs = certificate_summary({"reason": "suspected injection", "result": {"certificate": full_certificate()}})
    assert cs is not None and cs.contract_id == "C-0007"
    broken = full_certificate()
    broken["gross_to_date"] = 1250000.0
    with pytest.raises(CardDataError) as excinfo:
        certificate_summary({"reason": "x", "result": {"certificate": broken}})
    assert excinfo.value.field == "result.certificate.gross_to_date"


def test_null_escalation_and_model_explanations_are_accepted() -> None:
    data = {**full_certificate(), "escalation": None, "explanation_source": "model", "holds": [], "violations": []}
    cs = certificate_summary({"certificate": data})
    assert cs is not None and cs.escalation is None and not cs.explanation_is_fallback


def _set(path: list[str | int], value: Any) -> Callable[[dict[str, Any]], None]:
    def change(data: dict[str, Any]) -> None:
        target: Any = data
        for step in path[:-1]:
            target = target[step]
        target[path[-1]] = value

    return change


def _delete(path: list[str | int]) -> Callable[[dict[str, Any]], None]:
    def change(data: dict[str, Any]) -> None:
        target: Any = data
        for step in path[:-1]:
            target = target[step]
        del target[path[-1]]

    return change


# name: (how the certificate is broken, the field path under `certificate.` the error must name)
MALFORMED: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "float_amount": (_set(["amount_to_certify"], 123456.78), "amount_to_certify"),
    "integer_amount": (_set(["amount_to_certify"], 123456), "amount_to_certify"),
    "thousands_separator": (_set(["amount_to_certify"], "123,456.78"), "amount_to_certify"),
    "nan": (_set(["previously_certified"], "NaN"), "previously_certified"),
    "exponent": (_set(["gross_to_date"], "1e6"), "gross_to_date"),
    "three_places": (_set(["retention_to_date"], "62500.005"), "retention_to_date"),
    "missing_amount": (_delete(["previously_certified"]), "previously_certified"),
    "missing_explanation_source": (_delete(["explanation_source"]), "explanation_source"),
    "unknown_explanation_source": (_set(["explanation_source"], "human"), "explanation_source"),
    "string_certificate_no": (_set(["certificate_no"], "5"), "certificate_no"),
    "boolean_certificate_no": (_set(["certificate_no"], True), "certificate_no"),
    "lower_case_currency": (_set(["currency"], "gbp"), "currency"),
    "empty_contract_title": (_set(["contract_title"], " "), "contract_title"),
    "prose_escalation": (_set(["escalation"], "Suspected injection!"), "escalation"),
    "violations_not_a_list": (_set(["violations"], {"0": {}}), "violations"),
    "violation_not_an_object": (_set(["violations", 1], "broken"), "violations[1]"),
    "violation_amount_float": (_set(["violations", 0, "amounts", "cap"], 50000.0), "violations[0].amounts.cap"),
    "violation_amounts_a_list": (_set(["violations", 0, "amounts"], ["60000.00"]), "violations[0].amounts"),
    "violation_amount_name": (_set(["violations", 0, "amounts"], {"Cap <b>": "1.00"}), "violations[0].amounts"),
    "violation_missing_lines": (_delete(["violations", 1, "lines"]), "violations[1].lines"),
    "violation_line_not_text": (_set(["violations", 1, "lines", 1], 4), "violations[1].lines[1]"),
    "clause_missing_title": (_delete(["violations", 1, "clauses", 1, "title"]), "violations[1].clauses[1].title"),
    "invariant_with_spaces": (_set(["violations", 0, "invariant"], "retention cap"), "violations[0].invariant"),
    "hold_overlap_integer": (_set(["holds", 0, "overlap"], 1200), "holds[0].overlap"),
    "hold_missing_other": (_delete(["holds", 0, "other"]), "holds[0].other"),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_a_malformed_certificate_raises_naming_the_field(name: str) -> None:
    change, field = MALFORMED[name]
    data = full_certificate()
    change(data)
    with pytest.raises(CardDataError) as excinfo:
        certificate_summary({"certificate": data})
    assert excinfo.value.field == f"certificate.{field}"
    assert excinfo.value.source == "gate summary"


def test_a_certificate_that_is_not_an_object_raises() -> None:
    with pytest.raises(CardDataError) as excinfo:
        certificate_summary({"certificate": ["C-0007"]})
    assert excinfo.value.field == "certificate"


@pytest.mark.parametrize("render", [slack.gate_message, teams.gate_message, slack.decided_message])
def test_a_card_with_a_malformed_certificate_is_not_rendered(render: Callable[[GateCard], Any]) -> None:
    data = full_certificate()
    data["amount_to_certify"] = 123456.78
    with pytest.raises(CardDataError, match="amount_to_certify"):
        render(payment_gate(data))


# --- rendering --------------------------------------------------------------------------------------------

EXPECTED_TEXT = [
    "Payment certificate 5",
    "Contract C-0007 Riverside depot, phase 2 groundworks · period 2026-10",
    "GBP 123,456.78",
    "GBP 987,654.32",
    "GBP 1,250,000.00",
    "Escalated: suspected manipulation of the books or the agents",
    "Text in this certificate appears to carry instructions to the system",
    "Deterministic explanation, flagged for review",
    "Retention never above its cap",
    "Retention to date of 60,000.00 exceeds the contract cap of 50,000.00.",
    "GBP 60,000.00",
    "GBP 50,000.00",
    "Excess value",
    "GBP 8,820.50",
    "CSB-4.7",
    "Retention limit",
    "CSB-2.4",
    "Variations must be instructed",
    "BOQ-003, BOQ-004",
    "Duplicate: C-0003/4 line BOQ-2, overlap GBP 1,200.00",
]


def test_slack_gate_card_shows_the_certificate_between_header_and_buttons() -> None:
    plain = open_gate_cards()["accruals"]
    message = slack.gate_message(payment_gate(base=plain))
    assert_slack_message_valid(message)
    text = slack_text(message)
    for expected in EXPECTED_TEXT:
        assert expected in text, expected
    assert "*Amount to certify*\nGBP 123,456.78" in text and "*Previously certified*\nGBP 987,654.32" in text
    assert "*Amounts:* Retention GBP 60,000.00 · Cap GBP 50,000.00" in text
    assert "*Clauses:* CSB-2.1 Measurement of work; CSB-2.4 Variations must be instructed" in text
    texts = [b.get("text", {}).get("text", "") for b in message["blocks"]]
    position = next(i for i, t in enumerate(texts) if t.startswith("*Payment certificate 5*"))
    assert message["blocks"][0]["type"] == "header" and 0 < position < len(message["blocks"]) - 1
    assert slack_actions(message) == slack_actions(slack.gate_message(plain))
    assert message["blocks"][-1]["type"] == "actions"


def test_teams_gate_card_shows_the_certificate_and_keeps_its_actions() -> None:
    plain = open_gate_cards()["accruals"]
    card = teams.gate_message(payment_gate(base=plain))
    assert_adaptive_card_valid(card)
    text = teams_text(card)
    for expected in EXPECTED_TEXT:
        assert expected in text, expected
    (section,) = [e for e in card["body"] if e.get("separator") is True]
    facts = {f["title"]: f["value"] for f in section["items"][2]["facts"]}
    assert facts["Amount to certify"] == "GBP 123,456.78" and facts["Previously certified"] == "GBP 987,654.32"
    violations = violation_containers(section)
    assert len(violations) == 2
    retention = {f["title"]: f["value"] for o in walk(violations[0]) for f in o.get("facts", [])}
    assert retention == {"Retention": "GBP 60,000.00", "Cap": "GBP 50,000.00"}
    assert card["actions"] == teams.gate_message(plain)["actions"]


@pytest.mark.parametrize("platform", ["slack", "teams"])
def test_halt_and_decided_cards_show_the_certificate_too(platform: str) -> None:
    module: Any = slack if platform == "slack" else teams
    text_of = slack_text if platform == "slack" else teams_text
    valid = assert_slack_message_valid if platform == "slack" else assert_adaptive_card_valid
    bank_halt = escalation_cards()["bank_halt"]
    halted = replace(
        bank_halt, summary={"reason": "suspected injection", "result": {"certificate": full_certificate()}}
    )
    decided = replace(payment_gate(), status="approved", approvals=1)
    for message in (module.halt_message(halted), module.decided_message(decided)):
        valid(message)
        assert "GBP 123,456.78" in text_of(message) and "Retention limit" in text_of(message)


def test_a_model_explanation_without_escalation_shows_neither_flag() -> None:
    data = {**full_certificate(), "escalation": None, "explanation_source": "model"}
    for text in (
        slack_text(slack.gate_message(payment_gate(data))),
        teams_text(teams.gate_message(payment_gate(data))),
    ):
        assert "Escalated" not in text and "flagged for review" not in text
        assert "GBP 123,456.78" in text


@pytest.mark.parametrize(
    ("reason", "wording"),
    [
        ("missing_contract_parameter", "A contract parameter the checks need is missing"),
        ("new_reason", "A person"),
        ("budget_exhausted", "The model ran out of budget"),
    ],
)
def test_every_escalation_reason_is_named(reason: str, wording: str) -> None:
    data = {**full_certificate(), "escalation": reason}
    for text in (
        slack_text(slack.gate_message(payment_gate(data))),
        teams_text(teams.gate_message(payment_gate(data))),
    ):
        assert f"Escalated: {in_words(reason)}" in text and wording in text
        assert reason not in text  # the code itself is never shown


# --- hostile text -----------------------------------------------------------------------------------------


def hostile_certificate() -> dict[str, Any]:
    data = full_certificate()
    data["contract_title"] = HOSTILE
    data["holds"][0]["other"] = HOSTILE
    first = data["violations"][0]
    first.update(title=HOSTILE, explanation=HOSTILE, lines=[HOSTILE])
    first["clauses"] = [{"id": "<@U024BE7LH>", "title": HOSTILE}]
    return data


def test_hostile_text_is_escaped_in_slack_the_way_other_cards_escape() -> None:
    message = slack.gate_message(payment_gate(hostile_certificate()))
    assert_slack_message_valid(message)  # no raw < or > and no bare & in any mrkdwn
    text = slack_text(message)
    # Slack's formatting characters in data show as look-alikes (countersign/cards/escape.py), so "*pay now*" cannot
    # turn bold.
    assert (
        "&lt;!channel&gt; \u2217pay now\u2217 &lt;https://evil.example|click&gt; &amp; @here \u2217Amounts:\u2217 none"
        in text
    )
    assert "&lt;@U024BE7LH&gt;" in text
    assert "<!channel>" not in text and "<https://" not in text and "<@U" not in text
    assert "\n*Amounts:* none" not in text  # data cannot start a line of its own
    carriers = [o for o in walk(message["blocks"]) if o.get("type") == "mrkdwn" and "evil.example" in o["text"]]
    assert carriers and all(o.get("verbatim") is True for o in carriers)


def test_hostile_text_stays_in_teams_text_runs() -> None:
    card = teams.gate_message(payment_gate(hostile_certificate()))
    assert_adaptive_card_valid(card)
    holders = {o["type"] for o in walk(card) if "evil.example" in str(o.get("text", ""))}
    assert holders == {"TextRun"}
    assert not [f for o in walk(card) for f in o.get("facts", []) if "evil" in f["title"] + f["value"]]
    assert all("\n" not in str(o["text"]) for o in walk(card) if o.get("type") == "TextRun")


# --- caps -------------------------------------------------------------------------------------------------


def many_violations(count: int, text: str = "") -> dict[str, Any]:
    return {**full_certificate(), "violations": [violation(i, text) for i in range(count)]}


def test_thirty_violations_in_slack_are_cut_with_a_visible_line_within_caps() -> None:
    message = slack.gate_message(payment_gate(many_violations(30)))
    assert_slack_message_valid(message)
    text = slack_text(message)
    shown = text.count(":no_entry:")
    assert shown == certificates.VIOLATIONS_SHOWN_MAX
    assert f"and {30 - shown} more violated invariants not shown here" in text
    assert "more sections not shown" not in text  # the certificate capped itself: nothing else was cut
    assert message["blocks"][-1]["type"] == "actions" and len(message["blocks"]) <= 50


def test_thirty_violations_in_teams_are_cut_with_a_visible_line_within_the_payload_cap() -> None:
    card = teams.gate_message(payment_gate(many_violations(30)))
    assert_adaptive_card_valid(card)
    (section,) = [e for e in card["body"] if e.get("separator") is True]
    shown = len(violation_containers(section))
    assert 0 < shown <= certificates.VIOLATIONS_SHOWN_MAX
    assert f"and {30 - shown} more violated invariants not shown here" in teams_text(card)
    assert len(card["actions"]) == 2


LONGEST = "&<>é🧾\x07" * 600  # every character widened by escaping, UTF-16 or JSON


def test_longest_text_keeps_each_violation_whole_within_caps() -> None:
    data = many_violations(30, LONGEST)
    for item in data["violations"]:
        item["lines"] = [LONGEST] * 25
        item["clauses"] = [{"id": LONGEST, "title": LONGEST}] * 25
        item["amounts"] = {f"amount_{'x' * 30}_{i}": "-999999999999999.99" for i in range(25)}
    data["contract_title"] = data["contract_id"] = data["period"] = LONGEST
    data["holds"] = [{"kind": "duplicate", "other": LONGEST, "overlap": "1.00"}] * 25
    message = slack.gate_message(payment_gate(data))
    assert_slack_message_valid(message)
    sections = [b["text"]["text"] for b in message["blocks"] if ":no_entry:" in b.get("text", {}).get("text", "")]
    assert len(sections) == certificates.VIOLATIONS_SHOWN_MAX
    for text in sections:
        assert utf16_units(text) <= 3000
        assert "and 19 more amounts" in text and "and 15 more lines" in text and text.endswith("and 19 more clauses")
    assert "and 15 more holds" in slack_text(message)
    card = teams.gate_message(payment_gate(data))
    assert_adaptive_card_valid(card)
    (section,) = [e for e in card["body"] if e.get("separator") is True]
    size = len(json.dumps(section, ensure_ascii=False).encode("utf-8"))
    assert size <= certificates.TEAMS_SECTION_BYTES_MAX
    assert "more violated invariants not shown here" in teams_text(card) and "and 19 more clauses" in teams_text(card)


FAST = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TEXT = st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=3000).filter(str.strip)


@FAST
@given(title=TEXT, explanation=TEXT, reference=TEXT, count=st.integers(min_value=0, max_value=40))
def test_any_certificate_text_keeps_both_cards_valid_with_their_buttons(
    title: str, explanation: str, reference: str, count: int
) -> None:
    data = many_violations(count)
    for item in data["violations"]:
        item.update(title=title, explanation=explanation, lines=[reference])
        item["clauses"] = [{"id": reference, "title": title}]
    data.update(contract_title=title, contract_id=reference)
    gate = payment_gate(data)
    message = slack.gate_message(gate)
    assert_slack_message_valid(message)
    assert [b["value"] for b in slack_actions(message)[0]["elements"]] == [gate.gate_id, gate.gate_id]
    card = teams.gate_message(gate)
    assert_adaptive_card_valid(card)
    assert [a["data"]["gate_id"] for a in card["actions"]] == [gate.gate_id, gate.gate_id]
    assert "GBP 123,456.78" in teams_text(card)


# --- no certificate, no change ----------------------------------------------------------------------------


@pytest.mark.parametrize("platform", ["slack", "teams"])
def test_a_certificate_only_adds_its_own_section(platform: str) -> None:
    plain = open_gate_cards()["accruals"]
    with_certificate = replace(plain, summary={**plain.summary, "certificate": full_certificate()})
    if platform == "slack":
        before, after = slack.gate_message(plain), slack.gate_message(with_certificate)
        added = certificates.slack_certificate_blocks(certificate_summary(with_certificate.summary))  # type: ignore[arg-type]
        assert [b for b in after["blocks"] if b not in added] == before["blocks"]
        assert after["text"] == before["text"]
    else:
        before, after = teams.gate_message(plain), teams.gate_message(with_certificate)
        added = certificates.teams_certificate_elements(certificate_summary(with_certificate.summary))  # type: ignore[arg-type]
        assert [e for e in after["body"] if e not in added] == before["body"]
        assert {k: v for k, v in after.items() if k != "body"} == {k: v for k, v in before.items() if k != "body"}


@pytest.mark.parametrize("invariant", INVARIANTS)
def test_every_invariant_the_domain_names_can_be_shown(invariant: str) -> None:
    data = full_certificate()
    data["violations"][0]["invariant"] = invariant
    shown = certificate_summary({"certificate": data})
    assert shown is not None and shown.violations[0].invariant == invariant
