"""Gate cards meet the Close Board: every gate card links to its page, a gate that needs a person's own key offers
"Review and sign" there instead of one-tap buttons, Slack asks for the reason in a modal, and Teams cards carry a
reason box, a refresh for the gate's deciders and each viewer's own state."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from slack_sdk.models.views import View

from countersign.cards import slack, teams
from countersign.cards.links import gate_page_url
from countersign.cards.model import CardDataError, GateCard, Viewer
from countersign.cards.platform_limits import TEAMS_USERS_PER_REFRESH
from countersign.cards.refusals import person_key_needed
from tests.cards.checks import assert_adaptive_card_valid, assert_slack_message_valid, slack_actions, walk
from tests.cards.fixtures import decided_cards, escalation_cards, open_gate_cards

BOARD = "https://close.example.com"


def _linked(card: GateCard, *, person_key: bool = False) -> GateCard:
    return replace(card, page_url=gate_page_url(BOARD, card.gate_id), needs_person_key=person_key)


def _open_cards() -> dict[str, tuple[GateCard, Any, Any]]:
    """name -> (card, slack renderer, teams renderer), for every open gate and halt fixture."""
    cards = {f"gate:{n}": (c, slack.gate_message, teams.gate_message) for n, c in open_gate_cards().items()}
    cards |= {f"halt:{n}": (c, slack.halt_message, teams.halt_message) for n, c in escalation_cards().items()}
    return cards


def _buttons(message: dict[str, Any]) -> list[dict[str, Any]]:
    return [element for block in slack_actions(message) for element in block["elements"]]


def _teams_actions(card: dict[str, Any]) -> list[dict[str, Any]]:
    return list(card.get("actions", []))


def test_the_gate_page_is_under_the_boards_base_url() -> None:
    gate_id = "0b18817d-832c-4704-a17a-848d2984feb8"
    assert gate_page_url(BOARD, gate_id) == f"{BOARD}/board/gates/{gate_id}"
    assert gate_page_url(BOARD + "/", gate_id) == f"{BOARD}/board/gates/{gate_id}"
    assert gate_page_url("http://127.0.0.1:8000", gate_id) == f"http://127.0.0.1:8000/board/gates/{gate_id}"


@pytest.mark.parametrize("board_url", ["", "close.example.com", "javascript:alert(1)", "https://x.example/?a=1"])
def test_a_board_url_that_is_not_an_absolute_http_address_is_refused(board_url: str) -> None:
    with pytest.raises(CardDataError, match="board_url"):
        gate_page_url(board_url, "0b18817d-832c-4704-a17a-848d2984feb8")


def test_a_gate_that_needs_a_persons_key_cannot_be_shown_without_its_page() -> None:
    with pytest.raises(CardDataError, match="page_url"):
        replace(open_gate_cards()["bank"], needs_person_key=True)


@pytest.mark.parametrize("name", sorted(_open_cards()))
def test_one_tap_gates_keep_approve_and_reject_and_link_to_the_board(name: str) -> None:
    card, slack_render, teams_render = _open_cards()[name]
    linked = _linked(card)
    message = slack_render(linked)
    assert_slack_message_valid(message)
    approve, reject, board = _buttons(message)
    assert (approve["action_id"], reject["action_id"]) == ("gate_approve", "gate_reject")
    assert (board["action_id"], board["text"]["text"], board["url"]) == (
        "gate_open_board",
        "Open in Close Board",
        f"{BOARD}/board/gates/{card.gate_id}",
    )
    rendered = teams_render(linked)
    assert_adaptive_card_valid(rendered)
    verbs = [a.get("verb") for a in _teams_actions(rendered)]
    assert verbs == ["gate.approve", "gate.reject", None]
    link = _teams_actions(rendered)[2]
    assert (link["type"], link["title"], link["url"]) == ("Action.OpenUrl", "Open in Close Board", linked.page_url)


@pytest.mark.parametrize("name", sorted(_open_cards()))
def test_a_gate_that_needs_a_persons_key_offers_review_and_sign_instead_of_buttons(name: str) -> None:
    card, slack_render, teams_render = _open_cards()[name]
    signed = _linked(card, person_key=True)
    message = slack_render(signed)
    assert_slack_message_valid(message)
    assert message["blocks"][-1]["type"] == "actions"
    (review,) = _buttons(message)
    assert (review["action_id"], review["text"]["text"], review["url"]) == (
        "gate_review_and_sign",
        "Review and sign",
        signed.page_url,
    )
    assert not [o for o in walk(message) if o.get("action_id") in ("gate_approve", "gate_reject")]
    rendered = teams_render(signed)
    assert_adaptive_card_valid(rendered)
    (action,) = _teams_actions(rendered)
    assert (action["type"], action["title"], action["url"]) == ("Action.OpenUrl", "Review and sign", signed.page_url)
    decisions = ("Action.Execute", "Action.Submit", "Input.Text")
    assert not [o for o in walk({**rendered, "refresh": None}) if o.get("type") in decisions]
    assert rendered["refresh"]["action"]["verb"] == "refresh"  # each viewer still sees their own state


@pytest.mark.parametrize("name", sorted(decided_cards()))
def test_decided_cards_link_to_the_board_and_offer_no_decision(name: str) -> None:
    card = _linked(decided_cards()[name])
    message = slack.decided_message(card)
    assert_slack_message_valid(message)
    assert [(b["action_id"], b["url"]) for b in _buttons(message)] == [("gate_open_board", card.page_url)]
    rendered = teams.decided_message(card)
    assert_adaptive_card_valid(rendered)
    assert [(a["type"], a["url"]) for a in _teams_actions(rendered)] == [("Action.OpenUrl", card.page_url)]
    assert "refresh" not in rendered


@pytest.mark.parametrize("decision", ["approve", "reject"])
def test_the_slack_decision_modal_asks_for_the_reason_required_only_to_reject(decision: str) -> None:
    card = _linked(open_gate_cards()["accruals"])
    modal = slack.decision_modal(card, decision, '{"v":1}')
    parsed = View(**modal)
    parsed.validate_json()  # slack_sdk's own Block Kit limits for views
    assert parsed.to_dict() == modal, "slack_sdk dropped or changed an attribute"
    assert (modal["type"], modal["callback_id"], modal["private_metadata"]) == ("modal", "gate_decision", '{"v":1}')
    (reason,) = [b for b in modal["blocks"] if b["type"] == "input"]
    assert (reason["block_id"], reason["element"]["action_id"]) == ("reason", "reason")
    assert reason["element"]["type"] == "plain_text_input"
    assert reason["optional"] is (decision == "approve")
    assert modal["submit"]["text"] == ("Reject" if decision == "reject" else "Approve")


def test_the_modal_refuses_metadata_longer_than_slack_keeps() -> None:
    with pytest.raises(CardDataError, match="private_metadata"):
        slack.decision_modal(_linked(open_gate_cards()["accruals"]), "approve", "x" * 3001)


def test_the_teams_card_carries_a_reason_box_whose_value_joins_the_action_data() -> None:
    rendered = teams.gate_message(_linked(open_gate_cards()["accruals"]))
    (box,) = [o for o in walk(rendered) if o.get("type") == "Input.Text"]
    assert box["id"] == "reason" and box["isMultiline"] is True and "isRequired" not in box  # Approve needs none
    for action in _teams_actions(rendered)[:2]:
        assert action.get("associatedInputs", "auto") == "auto"  # Teams adds the box's value to `data`


def test_an_open_teams_card_refreshes_for_its_deciders_with_the_refresh_verb() -> None:
    card = _linked(open_gate_cards()["signoff"])
    rendered = teams.gate_message(card, refresh_user_ids=("aad-bob", "aad-carol"))
    assert_adaptive_card_valid(rendered)
    assert rendered["refresh"] == {
        "action": {"type": "Action.Execute", "title": "Refresh", "verb": "refresh", "data": {"gate_id": card.gate_id}},
        "userIds": ["aad-bob", "aad-carol"],
    }
    with pytest.raises(CardDataError, match="refresh_user_ids"):
        teams.gate_message(card, refresh_user_ids=[f"aad-{n}" for n in range(TEAMS_USERS_PER_REFRESH + 1)])


@pytest.mark.parametrize(
    ("state", "words", "buttons"),
    [
        ("may_decide", "Waiting on you.", True),
        ("approved", "You approved this gate.", False),
        ("rejected", "You rejected this gate.", False),
        ("prepared", "You prepared or requested this work: someone else decides it.", False),
        ("not_entitled", "This gate is not yours to decide.", False),
    ],
)
def test_each_teams_viewer_sees_their_own_state(state: str, words: str, buttons: bool) -> None:
    rendered = teams.gate_message(_linked(open_gate_cards()["signoff"]), viewer=Viewer(state))
    assert_adaptive_card_valid(rendered)
    assert words in [o.get("text") for o in walk(rendered["body"])]
    verbs = [a.get("verb") for a in _teams_actions(rendered)]
    assert verbs == (["gate.approve", "gate.reject", None] if buttons else [None])
    assert bool([o for o in walk(rendered) if o.get("type") == "Input.Text"]) is buttons


def test_a_prompt_for_the_viewer_is_shown_as_a_text_run_never_markdown() -> None:
    card = _linked(open_gate_cards()["signoff"], person_key=True)
    prompt = person_key_needed(card.page_url)
    rendered = teams.gate_message(card, viewer=Viewer("may_decide", prompt))
    assert_adaptive_card_valid(rendered)
    holders = [o["type"] for o in walk(rendered) if o.get("text") == prompt]
    assert holders == ["TextRun"]
    assert prompt == f"This gate needs your own key: review and sign it on the Close Board: {card.page_url}"
