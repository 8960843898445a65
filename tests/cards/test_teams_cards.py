from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from jsonschema import Draft6Validator, ValidationError

from countersign.cards import teams
from tests.cards.checks import (
    SCHEMA_PATH,
    adaptive_card_validator,
    assert_adaptive_card_valid,
    teams_action_objects,
    walk,
)
from tests.cards.fixtures import TEAMS_CARDS, decided_cards, escalation_cards, open_gate_cards


def _texts(card: dict[str, Any]) -> str:
    return "\n".join(str(o["text"]) for o in walk(card) if isinstance(o.get("text"), str))


def test_the_vendored_schema_is_the_draft_06_adaptive_card_1_5_schema() -> None:
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    Draft6Validator.check_schema(schema)
    assert schema["$schema"] == "http://json-schema.org/draft-06/schema#"
    assert schema["id"] == "http://adaptivecards.io/schemas/adaptive-card.json"
    assert "Action.Execute" in schema["definitions"] and "Table" in schema["definitions"]


@pytest.mark.parametrize("name", sorted(TEAMS_CARDS))
def test_every_card_validates_against_the_adaptive_card_1_5_schema(name: str) -> None:
    assert_adaptive_card_valid(TEAMS_CARDS[name])


def _broken_cards() -> dict[str, dict[str, Any]]:
    good = teams.gate_message(open_gate_cards()["bank"])
    no_type = copy.deepcopy(good)
    del no_type["actions"][0]["type"]
    bad_version = {**copy.deepcopy(good), "version": 7}
    unknown_element = copy.deepcopy(good)
    unknown_element["body"].append({"type": "Marquee", "text": "scrolling"})
    stray_property = copy.deepcopy(good)
    stray_property["body"][0]["colour"] = "red"
    return {
        "action_execute_without_type": no_type,
        "version_7": bad_version,
        "unknown_element": unknown_element,
        "misspelt_property": stray_property,
    }


@pytest.mark.parametrize("name", sorted(_broken_cards()))
def test_the_schema_check_rejects_a_broken_card(name: str) -> None:
    with pytest.raises(ValidationError):
        adaptive_card_validator().validate(_broken_cards()[name])


@pytest.mark.parametrize(
    ("name", "render"),
    [(f"gate:{n}", teams.gate_message) for n in open_gate_cards()]
    + [(f"halt:{n}", teams.halt_message) for n in escalation_cards()],
)
def test_execute_actions_carry_the_gate_id_with_a_submit_fallback(name: str, render: Any) -> None:
    kind, key = name.split(":")
    card = (open_gate_cards() if kind == "gate" else escalation_cards())[key]
    approve, reject = render(card)["actions"]
    for action, verb, decision in ((approve, "gate.approve", "approve"), (reject, "gate.reject", "reject")):
        assert action["type"] == "Action.Execute"
        assert action["verb"] == verb
        assert action["data"] == {"gate_id": card.gate_id, "decision": decision}
        assert action["fallback"]["type"] == "Action.Submit"
        assert action["fallback"]["data"] == action["data"]
        assert "msteams" not in action["fallback"]
    assert (approve["style"], reject["style"]) == ("positive", "destructive")


@pytest.mark.parametrize("name", sorted(decided_cards()))
def test_decided_cards_have_no_actions(name: str) -> None:
    card = teams.decided_message(decided_cards()[name])
    assert "actions" not in card
    assert teams_action_objects(card) == []


def test_halt_card_names_the_account_and_17_of_17() -> None:
    card = teams.halt_message(escalation_cards()["bank_halt"])
    texts = _texts(card)
    assert "account 1000: 17 of 17 bank lines unmatched (tolerance 55%)" in texts
    assert "Account 1000: 17 of 17 bank lines unmatched" in texts
    assert card["actions"][0]["title"] == "Approve re-run"


def test_text_from_people_goes_into_text_runs_that_are_never_markdown() -> None:
    card = teams.decided_message(decided_cards()["accruals_rejected"])
    holders = [o["type"] for o in walk(card) if "<posted>" in str(o.get("text", ""))]
    assert holders == ["TextRun"]


def test_long_lists_and_narratives_are_cut_with_a_more_note() -> None:
    card = teams.gate_message(open_gate_cards()["many_flagged_long_narrative"])
    texts = _texts(card)
    assert f"+{40 - teams.LINES_SHOWN_MAX} more" in texts
    assert "more characters" in texts
    assert len(card["actions"]) == 2


def test_status_card_shows_who_open_gates_wait_on() -> None:
    texts = _texts(TEAMS_CARDS["status:awaiting_7_tasks_6_gates"])
    assert "waiting on role cfo: 1 more approval needed (1 of 2)" in texts
    assert "{{DATE(2026-12-02T04:11:30Z, SHORT)}} {{TIME(2026-12-02T04:11:30Z)}} — overdue" in texts


def test_invoke_response_has_status_type_and_value_at_the_top_level() -> None:
    card = teams.decided_message(decided_cards()["accruals_rejected"])
    assert teams.invoke_response(card) == {
        "statusCode": 200,
        "type": "application/vnd.microsoft.card.adaptive",
        "value": card,
    }


def test_error_card_shows_the_refusal_in_attention_colour() -> None:
    card = teams.refusal_card("machine_principal", "")
    assert_adaptive_card_valid(card)
    assert card["body"][0]["color"] == "attention"
    assert "Bots, apps and service accounts cannot decide gates" in _texts(card)


def test_an_open_card_is_measured_with_its_refresh_against_the_byte_cap() -> None:
    """A body that fits the cap on its own must still fit once the refresh is added (hypothesis found an emoji-heavy
    gate card 40 bytes over: the cap was checked before the refresh went in)."""

    def size(card: dict[str, Any]) -> int:
        return len(json.dumps(card, ensure_ascii=False).encode("utf-8"))

    gate = open_gate_cards()["accruals"]
    base = size(teams._card([{"type": "TextBlock", "text": ""}], None, "x"))
    body = [{"type": "TextBlock", "text": "a" * (teams.TEAMS_CARD_BYTES - 5 - base)}]
    assert size(teams._card(body, None, "x")) == teams.TEAMS_CARD_BYTES - 5  # fits on its own, 5 bytes to spare
    card = teams._open_card(gate, body, [], "x", ["29:user"])
    assert size(card) <= teams.TEAMS_CARD_BYTES
    assert card["refresh"]["userIds"] == ["29:user"]
    assert "too large for a Teams card" in json.dumps(card)  # it says so rather than dropping text silently
