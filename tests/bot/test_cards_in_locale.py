"""Slack and Teams cards write amounts in COUNTERSIGN_LOCALE, on every path a card takes: posted by the worker's
delivery, updated by the server's inline delivery after a decision, answered by the Teams door itself, and the
payment-runs cards both doors answer with.

Each test runs twice: with the default locale (en_GB) and with de_CH. The expected text is worked out with
`countersign.money.formatting.format_money` from an amount in the gate's own summary, and the other locale's writing of
the same
amount must not appear, so a locale dropped anywhere between the settings and the renderer fails the test.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import replace
from decimal import Decimal
from typing import Any

import pytest

from countersign.bootstrap.chat import build_senders
from countersign.bootstrap.runtime import Runtime, engine_context
from countersign.bot.queries import load_gate
from countersign.callbacks.principals import upsert_principals
from countersign.delivery.worker import deliver_due
from countersign.engine.orchestrator import advance
from countersign.engine.runs import close_status
from countersign.engine.workflows.certificates.runs import payment_run_status
from countersign.money.formatting import format_money
from tests.bot.conftest import PEOPLE, decision_form, slack_headers, slash_command, wait_until
from tests.bot.test_access import _replies
from tests.bot.test_payments_command import PERIOD, payment_month
from tests.bot.test_teams import _auth, invoke, message
from tests.support import rewrite_gate_as_owner, start_default_close

DEFAULT_LOCALE = "en_GB"  # COUNTERSIGN_LOCALE unset
SWISS = "de_CH"


@pytest.fixture(params=[None, SWISS], ids=["default", SWISS])
def chat_runtime(chat_runtime: Runtime, request: pytest.FixtureRequest) -> Runtime:
    """The chat runtime with COUNTERSIGN_LOCALE as the parameter says (None: left at its default)."""
    if request.param is None:
        assert chat_runtime.settings.locale == DEFAULT_LOCALE
        return chat_runtime
    return replace(chat_runtime, settings=chat_runtime.settings.model_copy(update={"locale": request.param}))


def _amount_forms(locale: str, amount: Decimal) -> tuple[str, str]:
    """`amount` as the card must write it in `locale`, and as the other locale of the two would."""
    other = SWISS if locale == DEFAULT_LOCALE else DEFAULT_LOCALE
    expected, elsewhere = format_money(amount, "GBP", locale=locale), format_money(amount, "GBP", locale=other)
    assert expected != elsewhere  # the amount is large enough for the locales to write it differently
    return expected, elsewhere


async def _close_with_cards(conn: Any, runtime: Runtime, default_books: Any) -> dict[str, str]:
    """A close run to its gates, their cards delivered by the worker's path; each gate's id by its task."""
    close_id = await start_default_close(conn, runtime, default_books)
    await upsert_principals(conn, PEOPLE)  # the default import knows no chat identities
    async with engine_context(runtime) as ctx:
        await advance(conn, close_id, ctx)
    await deliver_due(conn, build_senders(runtime.settings))  # type: ignore[arg-type]
    return {g["task"]: g["gate_id"] for g in (await close_status(conn, close_id))["gates"]}


async def _summary_amount(conn: Any, runtime: Runtime, gate_id: str, pick: Callable[[Any], Any]) -> tuple[str, str]:
    """The amount `pick` takes from the gate's summary, written in the runtime's locale and in the other one."""
    summary = (await load_gate(conn, gate_id)).summary
    assert summary is not None and summary["currency"] == "GBP"
    return _amount_forms(runtime.settings.locale, Decimal(str(pick(summary))))


async def _intercompany_gate(conn: Any, runtime: Runtime, default_books: Any) -> tuple[str, tuple[str, str]]:
    """The intercompany gate (medium, decided from chat) and its first pair's balance in both writings."""
    gate_id = (await _close_with_cards(conn, runtime, default_books))["intercompany"]
    return gate_id, await _summary_amount(conn, runtime, gate_id, lambda s: s["pairs"][0]["our_balance"])


def _texts(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _teams_cards(teams_connector: Any, method: str, gate_id: str) -> list[str]:
    """The Adaptive Cards for `gate_id` sent to the Teams connector with `method` (POST a card, PUT an update)."""
    bodies = [
        json.loads(c.request.content)
        for c in teams_connector.calls
        if c.request.method == method and "/v3/conversations/" in c.request.url.path
    ]
    return [_texts(a["content"]) for b in bodies for a in b.get("attachments", []) if gate_id in _texts(a)]


async def test_the_slack_card_the_worker_posts_writes_amounts_in_the_configured_locale(
    conn: Any, chat_api: Any, chat_runtime: Runtime, default_books: Any, fake_slack: Any
) -> None:
    gate_id, (expected, elsewhere) = await _intercompany_gate(conn, chat_runtime, default_books)
    (posted,) = [_texts(p.params) for p in fake_slack.calls_to("chat.postMessage") if gate_id in _texts(p.params)]
    assert expected in posted
    assert elsewhere not in posted


async def test_a_slack_decision_updates_the_card_in_the_configured_locale(
    conn: Any, chat_api: Any, chat_runtime: Runtime, default_books: Any, fake_slack: Any
) -> None:
    gate_id, (expected, elsewhere) = await _intercompany_gate(conn, chat_runtime, default_books)
    body = decision_form(gate_id, "U0ALICE")
    assert (await chat_api.post("/slack/events", content=body, headers=slack_headers(body))).status_code == 200
    await wait_until(lambda: len(fake_slack.calls_to("chat.update")) >= 1)  # the server's inline delivery
    (updated,) = [_texts(u.params) for u in fake_slack.calls_to("chat.update")]
    assert "alice" in updated.lower()  # the decided card
    assert expected in updated
    assert elsewhere not in updated


async def test_the_teams_card_the_worker_posts_writes_amounts_in_the_configured_locale(
    conn: Any, chat_api: Any, chat_runtime: Runtime, default_books: Any, teams_connector: Any
) -> None:
    gate_id, (expected, elsewhere) = await _intercompany_gate(conn, chat_runtime, default_books)
    (posted,) = _teams_cards(teams_connector, "POST", gate_id)
    assert expected in posted
    assert elsewhere not in posted


async def test_the_teams_door_answers_and_updates_cards_in_the_configured_locale(
    conn: Any,
    chat_api: Any,
    chat_runtime: Runtime,
    default_books: Any,
    fake_teams_auth: Any,
    teams_connector: Any,
) -> None:
    gates = await _close_with_cards(conn, chat_runtime, default_books)
    gate_id = gates["intercompany"]
    expected, elsewhere = await _summary_amount(conn, chat_runtime, gate_id, lambda s: s["pairs"][0]["our_balance"])
    await rewrite_gate_as_owner(conn, gate_id, "quorum = 2")  # open after one approval, decided after the second

    async def answered(activity: dict[str, Any]) -> str:
        response = await chat_api.post("/api/messages", json=activity, headers=_auth(fake_teams_auth))
        assert response.status_code == 200, response.text
        return _texts(response.json()["value"])

    open_card = await answered(invoke(gate_id, "aad-alice", reason="Agreed to ACME-US"))
    refresh = invoke(gate_id, "aad-bob", verb="refresh", activity_id="refresh-bob")
    refresh["value"]["action"]["data"] = {"gate_id": gate_id}
    refreshed = await answered(refresh)
    asking_for_a_reason = await answered(invoke(gate_id, "aad-bob", "reject", activity_id="reject-bob"))
    decided = await answered(invoke(gate_id, "aad-bob", reason="Agreed too", activity_id="approve-bob"))
    assert "Action.Execute" not in decided  # the decided card: no buttons left
    await wait_until(lambda: len(_teams_cards(teams_connector, "PUT", gate_id)) >= 2)  # the inline updates
    await asyncio.sleep(0.3)  # let a straggling update land before reading them all
    updates = _teams_cards(teams_connector, "PUT", gate_id)
    for card in (open_card, refreshed, asking_for_a_reason, decided, *updates):
        assert expected in card
        assert elsewhere not in card

    accruals = gates["accruals"]  # high: a click is answered with where to sign it, on the card with its total
    total, total_elsewhere = await _summary_amount(conn, chat_runtime, accruals, lambda s: s["total"])
    where_to_sign = await answered(invoke(accruals, "aad-alice", reason="Checked", activity_id="approve-accruals"))
    assert "This gate needs your own key: review and sign it on the Close Board" in where_to_sign
    assert total in where_to_sign
    assert total_elsewhere not in where_to_sign


async def _a_certified_amount(conn: Any, runtime: Runtime) -> tuple[str, str]:
    """The largest amount a payment run of the month would certify, in the runtime's locale and in the other one."""
    runs = [r for r in await payment_run_status(conn, period=PERIOD) if r["amount_to_certify"] is not None]
    largest = max(runs, key=lambda r: Decimal(r["amount_to_certify"]))
    assert largest["currency"] == "GBP"
    return _amount_forms(runtime.settings.locale, Decimal(largest["amount_to_certify"]))


async def test_the_payment_runs_cards_write_amounts_in_the_configured_locale(
    conn: Any,
    chat_api: Any,
    chat_runtime: Runtime,
    fake_slack: Any,
    fake_teams_auth: Any,
    teams_connector: Any,
) -> None:
    await payment_month(conn, chat_runtime, teams_connector)
    expected, elsewhere = await _a_certified_amount(conn, chat_runtime)
    body = slash_command(f"payments {PERIOD}", "U0ALICE")
    assert (await chat_api.post("/slack/events", content=body, headers=slack_headers(body))).status_code == 200
    await wait_until(lambda: len(fake_slack.responses()) == 1)
    before = len(teams_connector.calls)
    asked = message(f"close payments {PERIOD}", aad="aad-alice")
    assert (await chat_api.post("/api/messages", json=asked, headers=_auth(fake_teams_auth))).status_code == 200
    (teams_reply,) = _replies(teams_connector, before)
    for card in (_texts(fake_slack.responses()[0]["blocks"]), _texts(teams_reply["attachments"][0]["content"])):
        assert expected in card
        assert elsewhere not in card
