"""No card lost to an outage (issue 24, ADR 0035).

Slack (the local fake Web API server) and Teams (its connector, through respx) answer 503 for far longer than the
127 s the old schedule lasted, then recover. Time passes in the database, never for real: every timestamp of the
outbox moves back by the wait the deliverer scheduled, so each pass finds the messages due.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import psycopg
import pytest
import respx

from countersign.bootstrap.chat import build_senders
from countersign.bootstrap.runtime import engine_context
from countersign.delivery.worker import deliver_due
from countersign.engine.orchestrator import advance
from countersign.engine.outbox import BACKOFF_CAP_S, enqueue_card_updates, redrive_dead_letters
from countersign.engine.runs import close_status
from countersign.store.gates import card_state
from tests.bot.conftest import SERVICE_URL, TOKEN_URL
from tests.engine.workflow_support import approve_open_gates
from tests.support import count, start_default_close

POST = "chat.postMessage"
OUTAGE_S = 1800.0  # half an hour: fourteen times the old schedule's 127 s
MAX_PASSES = 60


@dataclass
class TeamsConnector:
    """Teams' connector as respx answers it: down (503) or up; what it accepted, in order."""

    down: bool = True
    retry_after: str | None = None
    accepted: list[str] = field(default_factory=list)
    refused: int = 0


@pytest.fixture
def teams() -> Iterator[TeamsConnector]:
    """The shared `teams_connector` fixture's routes, with a connector that can be down."""
    connector = TeamsConnector()
    ids = itertools.count(1)

    def answer(request: httpx.Request) -> httpx.Response:
        if connector.down:
            connector.refused += 1
            headers = {"Retry-After": connector.retry_after} if connector.retry_after else {}
            return httpx.Response(503, text="Service Unavailable", headers=headers)
        activity = f"activity-{next(ids)}"
        connector.accepted.append(activity)
        return httpx.Response(200, json={"id": activity})

    with respx.mock(assert_all_called=False, assert_all_mocked=False) as router:
        router.post(TOKEN_URL).mock(return_value=httpx.Response(200, json={"access_token": "t0k", "expires_in": 3600}))
        router.post(url__startswith=SERVICE_URL.rstrip("/") + "/v3/conversations/").mock(side_effect=answer)
        router.put(url__startswith=SERVICE_URL.rstrip("/") + "/v3/conversations/").mock(side_effect=answer)
        router.route(host="countersign.test").pass_through()
        yield connector


def slack_down(fake_slack: Any, *, retry_after: str | None = None) -> None:
    headers = {"Retry-After": retry_after} if retry_after else {}
    fake_slack.fail(POST, 503, headers=headers, body={"ok": False, "error": "service_unavailable"}, times=100_000)


def slack_up(fake_slack: Any) -> int:
    """Slack answers again; returns how many posts it had refused."""
    left = len(fake_slack.fail_next.pop(POST, []))
    return 100_000 - left


async def pass_time(conn: Any) -> float:
    """Let the longest scheduled wait among pending messages pass, so every one is due; returns the seconds."""
    wait_s = float(
        (
            await (
                await conn.execute(
                    "SELECT greatest(coalesce(max(extract(epoch FROM next_attempt_at - now())), 0), 0)::float8"
                    " FROM outbox_message WHERE status = 'pending'"
                )
            ).fetchone()
        )[0]
    )
    await conn.execute(
        "UPDATE outbox_message SET created_at = created_at - make_interval(secs => %(s)s),"
        " budget_from = budget_from - make_interval(secs => %(s)s),"
        " next_attempt_at = next_attempt_at - make_interval(secs => %(s)s),"
        " dead_lettered_at = dead_lettered_at - make_interval(secs => %(s)s)",
        {"s": wait_s},
    )
    return wait_s


async def close_with_cards(conn: Any, runtime: Any, books: Any) -> str:
    close_id = await start_default_close(conn, runtime, books)
    async with engine_context(runtime) as ctx:
        await advance(conn, close_id, ctx)
    return close_id


async def test_slack_and_teams_down_for_half_an_hour_lose_no_card_and_post_each_once(
    conn: Any, chat_runtime: Any, default_books: Any, fake_slack: Any, teams: TeamsConnector
) -> None:
    slack_down(fake_slack)
    close_id = await close_with_cards(conn, chat_runtime, default_books)
    cards = await count(conn, "SELECT count(*) FROM outbox_message WHERE kind = 'gate_card'")
    assert cards == 6  # three gates, on Slack and on Teams
    senders = build_senders(chat_runtime.settings)
    outage_s, passes, longest_wait_s = 0.0, 0, 0.0
    while outage_s < OUTAGE_S:
        report = await deliver_due(conn, senders)  # type: ignore[arg-type]
        assert report.sent == 0 and report.failed == 0 and report.retried >= 1, report
        wait_s = await pass_time(conn)
        outage_s, passes, longest_wait_s = outage_s + wait_s, passes + 1, max(longest_wait_s, wait_s)
        assert passes < MAX_PASSES
    assert longest_wait_s <= BACKOFF_CAP_S + 1  # capped at five minutes, however long the outage
    attempts = await count(conn, "SELECT min(attempts) FROM outbox_message WHERE kind = 'gate_card'")
    assert attempts > 8  # past the old limit, still pending
    assert await count(conn, "SELECT count(*) FROM outbox_message WHERE status = 'failed'") == 0

    refused_by_slack = slack_up(fake_slack)
    teams.down = False
    await pass_time(conn)
    recovered = await deliver_due(conn, senders)  # type: ignore[arg-type]
    assert recovered.sent == await count(conn, "SELECT count(*) FROM outbox_message")
    await pass_time(conn)
    again = await deliver_due(conn, senders)  # type: ignore[arg-type]
    assert again.sent == again.retried == again.failed == 0

    slack_cards = [c for c in fake_slack.calls_to(POST) if c.params.get("blocks")]
    assert len(slack_cards) - refused_by_slack == 3  # each Slack card accepted exactly once
    assert len(teams.accepted) == 3 and teams.refused >= 3 * attempts
    assert await count(conn, "SELECT count(*) FROM outbox_message WHERE status <> 'sent'") == 0
    assert await count(conn, "SELECT count(DISTINCT (platform, platform_message_id)) FROM outbox_message") == 6
    assert (await close_status(conn, close_id))["deliveries_failed"] == []


async def test_a_message_past_its_budget_is_dead_lettered_and_a_redrive_delivers_it_once_in_its_current_state(
    conn: Any, database: Any, api: Any, chat_runtime: Any, default_books: Any, fake_slack: Any, teams: TeamsConnector
) -> None:
    slack_down(fake_slack, retry_after="120")
    teams.down = False
    close_id = await close_with_cards(conn, chat_runtime, default_books)
    senders = build_senders(chat_runtime.settings)
    first = await deliver_due(conn, senders, budget_hours=1)  # type: ignore[arg-type]
    assert first.sent == 3 and first.retried == 3  # Teams took its cards; Slack said 503, come back in 120 s
    waits = await (
        await conn.execute(
            "SELECT extract(epoch FROM next_attempt_at - now())::float8 FROM outbox_message WHERE status = 'pending'"
        )
    ).fetchall()
    assert len(waits) == 3 and all(115 < wait <= 120 for (wait,) in waits)  # Retry-After honoured, not the backoff

    passes = 0
    while await count(conn, "SELECT count(*) FROM outbox_message WHERE status = 'pending'"):
        await pass_time(conn)
        report = await deliver_due(conn, senders, budget_hours=1)  # type: ignore[arg-type]
        passes += 1
        assert passes < MAX_PASSES
    assert report.failed == 3
    dead = await (
        await conn.execute(
            "SELECT platform, extract(epoch FROM dead_lettered_at - budget_from)::float8, last_error"
            " FROM outbox_message WHERE status = 'failed'"
        )
    ).fetchall()
    assert [platform for platform, _, _ in dead] == ["slack"] * 3
    # Dead-lettered by the attempt that fell on the budget's end (plus the calls' own time), not before it and not
    # after a further wait (by now each is 150 s or more).
    assert all(3600 <= spent_s < 3660 and "retry budget of 1 h spent" in error for _, spent_s, error in dead), dead
    assert {f["platform"] for f in (await close_status(conn, close_id))["deliveries_failed"]} == {"slack"}

    # Meanwhile a gate is decided: its dead-lettered Slack card must show the decision when it is finally posted.
    first_task = (await close_status(conn, close_id))["gates"][0]["task"]
    decided = (await approve_open_gates(api, conn, close_id, tasks={first_task}))[0]["gate_id"]
    refused_by_slack = slack_up(fake_slack)

    assert await redrive_dead_letters(conn, platform="teams") == []
    assert await redrive_dead_letters(conn, gate_id=decided, since=datetime.now(UTC) + timedelta(hours=1)) == []
    assert len(await redrive_dead_letters(conn, gate_id=decided)) == 1
    assert len(await redrive_dead_letters(conn, platform="slack")) == 2
    assert await redrive_dead_letters(conn) == []  # twice is a no-op
    redriven = await deliver_due(conn, senders, budget_hours=1)  # type: ignore[arg-type]
    assert redriven.sent >= 3 and redriven.failed == 0
    assert (await deliver_due(conn, senders, budget_hours=1)).sent == 0  # type: ignore[arg-type]

    slack_cards = [c for c in fake_slack.calls_to(POST) if c.params.get("blocks")]
    assert len(slack_cards) - refused_by_slack == 3  # each card once, after the redrive
    state = await (
        await conn.execute(
            "SELECT o.rendered_state, s.status, s.approvals::int, s.rejections::int, o.redrives"
            " FROM outbox_message o JOIN gate_state s USING (gate_id)"
            " WHERE o.gate_id = %s AND o.platform = 'slack' AND o.kind = 'gate_card'",
            (decided,),
        )
    ).fetchone()
    rendered, status, approvals, rejections, redrives = state
    assert status != "open" and redrives == 1
    assert rendered == card_state(status, approvals, rejections)  # posted as it is now, not as it was
    await enqueue_card_updates(conn)
    assert (
        await count(conn, "SELECT count(*) FROM outbox_message WHERE platform = 'slack' AND kind = 'card_update'") == 0
    )

    # A sent message never goes back, whoever asks: a redrive cannot post a card twice.
    async with await psycopg.AsyncConnection.connect(database.engine_url, autocommit=True) as engine:
        with pytest.raises(psycopg.errors.CheckViolation, match="sent is final"):
            await engine.execute(
                "UPDATE outbox_message SET status = 'pending', redrives = redrives + 1,"
                " budget_from = now() + interval '1 day', dead_lettered_at = NULL WHERE status = 'sent'"
            )
        with pytest.raises(psycopg.errors.CheckViolation, match="may not move from sent to failed"):
            await engine.execute(
                "UPDATE outbox_message SET status = 'failed', dead_lettered_at = now() WHERE status = 'sent'"
            )
