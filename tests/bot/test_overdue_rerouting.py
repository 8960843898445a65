"""An overdue gate is routed past whoever is away, and each eligible person gets a direct message on Slack and Teams.

The real engine on PostgreSQL opens the gate and runs the overdue step; the real deliverer sends the messages to a
fake Slack Web API (conversations.open, then chat.postMessage into the direct message) and to Teams' connector under
respx (a proactive 1:1: create the personal conversation, then the activity in it).
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import replace
from typing import Any

import respx

from countersign.bootstrap.chat import build_senders
from countersign.bootstrap.runtime import Runtime
from countersign.callbacks.principals import upsert_principals
from countersign.cards.targets import ChannelTarget
from countersign.delivery.worker import deliver_due
from countersign.engine.context import AdvanceReport
from countersign.engine.orchestrator import advance
from countersign.engine.rerouting import reroute_overdue
from countersign.engine.runs import close_status
from countersign.services.delegating import set_delegation
from countersign.store.delegations import read_routings_of_gate
from countersign.store.gates import read_gate
from tests.bot.conftest import PEOPLE, SLACK_CHANNEL, TEAMS_CONVERSATION, TENANT
from tests.fakes.slack_api import FakeSlack
from tests.support import count, rewrite_gate_as_owner, start_default_close

CHANNELS = (ChannelTarget("slack", SLACK_CHANNEL), ChannelTarget("teams", TEAMS_CONVERSATION))
TODAY = dt.datetime.now(dt.UTC).date()
LAST_DAY = TODAY + dt.timedelta(days=7)


async def _overdue_accruals_gate(conn: Any, runtime: Runtime, engine_ctx: Any, books: Any) -> tuple[str, str, Any]:
    """The default close to its accruals gate (role controller: alice and bob), made overdue; the people on chat."""
    close_id = await start_default_close(conn, runtime, books)
    await upsert_principals(conn, PEOPLE)
    ctx = replace(engine_ctx, channels=CHANNELS)
    await advance(conn, close_id, ctx)
    status = await close_status(conn, close_id)
    gate_id = next(g["gate_id"] for g in status["gates"] if g["task"] == "accruals")
    await rewrite_gate_as_owner(conn, gate_id, "due_at = now() - interval '1 hour'")
    return close_id, gate_id, ctx


def _teams_dm_routes(router: respx.MockRouter) -> respx.Route:
    """The connector's create-conversation route (tests/bot/conftest.py `teams_connector`)."""
    return router["create_conversation"]


async def test_an_away_approvers_gate_goes_to_the_delegate_by_direct_message_on_slack_and_teams(
    conn: Any,
    chat_runtime: Runtime,
    engine_ctx: Any,
    default_books: Any,
    fake_slack: FakeSlack,
    teams_connector: respx.MockRouter,
) -> None:
    close_id, gate_id, ctx = await _overdue_accruals_gate(conn, chat_runtime, engine_ctx, default_books)
    delegation = await set_delegation(
        conn, principal="alice.chen", delegate="bob.osei", first_day=TODAY, last_day=LAST_DAY, reason="annual leave"
    )
    create = _teams_dm_routes(teams_connector)

    report = await advance(conn, close_id, ctx)

    routings = await read_routings_of_gate(conn, gate_id)
    assert [(r.routed_to, r.rank, r.delegation_id, r.away) for r in routings] == [
        ("bob.osei", 1, delegation.delegation_id, "alice.chen")
    ]
    assert routings[0].why == f"alice.chen away until {LAST_DAY.isoformat()}"
    assert any("routed to bob.osei (alice.chen is away)" in step for step in report.steps)
    assert not any("not routed" in step for step in report.steps)  # the engine asked the database for nobody away
    assert await count(conn, "SELECT count(*) FROM trace_event WHERE kind = 'gate_rerouted'") == 1
    assert await count(conn, "SELECT count(*) FROM trace_event WHERE kind = 'delegation_set'") == 1

    delivered = await deliver_due(conn, build_senders(chat_runtime.settings))  # type: ignore[arg-type]
    assert delivered.failed == 0, delivered.errors

    opened = fake_slack.calls_to("conversations.open")
    assert [c.params["users"] for c in opened] == ["U0BOB"]
    dms = [c for c in fake_slack.calls_to("chat.postMessage") if c.params["channel"].startswith("D")]
    assert [c.params["channel"] for c in dms] == ["DU0BOB"]
    words = f"Alice Chen is away until {LAST_DAY.day} {LAST_DAY.strftime('%b %Y')}; this approval was routed to you."
    assert words in dms[0].params["text"]
    assert f"/board/gates/{gate_id}" in dms[0].params["text"]

    assert create.call_count == 1
    body = json.loads(create.calls[0].request.content)
    assert body["members"] == [{"id": "aad-bob"}] and body["isGroup"] is False
    assert body["tenantId"] == TENANT.casefold() and body["channelData"] == {"tenant": {"id": TENANT.casefold()}}
    activities = [
        json.loads(c.request.content)
        for c in teams_connector.calls
        if c.request.url.path.endswith("/v3/conversations/a:dm-aad-bob/activities")
    ]
    assert len(activities) == 1 and words in activities[0]["text"]


async def test_without_delegations_every_eligible_person_is_messaged_and_a_second_run_sends_nothing(
    conn: Any,
    chat_runtime: Runtime,
    engine_ctx: Any,
    default_books: Any,
    fake_slack: FakeSlack,
    teams_connector: respx.MockRouter,
) -> None:
    close_id, gate_id, ctx = await _overdue_accruals_gate(conn, chat_runtime, engine_ctx, default_books)
    _teams_dm_routes(teams_connector)

    await advance(conn, close_id, ctx)
    await advance(conn, close_id, ctx)
    gate = await read_gate(conn, gate_id)
    assert gate is not None
    again = await reroute_overdue(conn, ctx, gate, AdvanceReport(close_id))  # the step itself, run once more

    assert again == ()
    routings = await read_routings_of_gate(conn, gate_id)
    assert [(r.routed_to, r.rank, r.why) for r in routings] == [
        ("alice.chen", 1, "overdue"),
        ("bob.osei", 2, "overdue"),
    ]
    assert await count(conn, "SELECT count(*) FROM outbox_message WHERE template = 'gate_routed'") == 4
    await deliver_due(conn, build_senders(chat_runtime.settings))  # type: ignore[arg-type]
    await deliver_due(conn, build_senders(chat_runtime.settings))  # type: ignore[arg-type]
    assert sorted(c.params["users"] for c in fake_slack.calls_to("conversations.open")) == ["U0ALICE", "U0BOB"]
    text = next(c for c in fake_slack.calls_to("chat.postMessage") if c.params["channel"] == "DU0ALICE").params["text"]
    assert text.startswith("This approval is overdue and you are one of the people who may decide it.")
    assert await count(conn, "SELECT count(*) FROM trace_event WHERE kind = 'gate_rerouted'") == 2


async def test_a_delegate_who_lacks_the_gates_role_is_passed_over(
    conn: Any,
    chat_runtime: Runtime,
    engine_ctx: Any,
    default_books: Any,
    teams_connector: respx.MockRouter,
) -> None:
    """Alice away with dana (an accountant) standing in: dana gains nothing; bob, eligible and here, is asked."""
    close_id, gate_id, ctx = await _overdue_accruals_gate(conn, chat_runtime, engine_ctx, default_books)
    await set_delegation(
        conn, principal="alice.chen", delegate="dana.reyes", first_day=TODAY, last_day=LAST_DAY, reason="leave"
    )
    await advance(conn, close_id, ctx)
    assert [(r.routed_to, r.why) for r in await read_routings_of_gate(conn, gate_id)] == [("bob.osei", "overdue")]
