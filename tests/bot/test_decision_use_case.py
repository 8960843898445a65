"""One decision use case for every door (`countersign.services.decide.decide_gate`), on real PostgreSQL as the
callbacks role:
the decision and its card updates commit in one transaction, or neither does."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest
import pytest_asyncio

from countersign.bootstrap.chat import build_senders
from countersign.bootstrap.database import Database
from countersign.bootstrap.runtime import engine_context
from countersign.callbacks.principals import upsert_principals
from countersign.delivery.worker import deliver_due
from countersign.engine.orchestrator import advance
from countersign.engine.outbox import enqueue_card_updates
from countersign.engine.runs import close_status
from countersign.services.decide import DecisionRefused, PlatformIdentity, decide_gate
from countersign.store.gates import read_gate
from tests.bot.conftest import PEOPLE, TEAM, wait_until
from tests.support import count, post_decision, start_default_close

CARD_UPDATES = "SELECT count(*) FROM outbox_message WHERE kind = 'card_update' AND gate_id = %s"
DECISIONS = "SELECT count(*) FROM gate_decision WHERE gate_id = %s"
DECIDED_EVENTS = "SELECT count(*) FROM trace_event WHERE kind = 'gate_decided' AND payload->>'gate_id' = %s"


class CardUpdateFailed(RuntimeError):
    pass


@pytest_asyncio.fixture
async def callbacks_conn(database: Database) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    """The decision writer's own role, as the server connects it."""
    connection = await psycopg.AsyncConnection.connect(database.callbacks_url, autocommit=True)
    try:
        yield connection
    finally:
        await connection.close()


@pytest_asyncio.fixture
async def posted_gate(conn: Any, chat_runtime: Any, default_books: Any, fake_slack: Any, teams_connector: Any) -> str:
    """The intercompany gate (medium: a chat identity may decide it) of a close whose gate cards were posted, so a
    decision has cards to update."""
    close_id = await start_default_close(conn, chat_runtime, default_books)
    await upsert_principals(conn, PEOPLE)
    async with engine_context(chat_runtime) as ctx:
        await advance(conn, close_id, ctx)
    await deliver_due(conn, build_senders(chat_runtime.settings))  # type: ignore[arg-type]
    status = await close_status(conn, close_id)
    return str(next(g["gate_id"] for g in status["gates"] if g["task"] == "intercompany"))


ALICE_ON_SLACK = PlatformIdentity(channel="slack", external_id="U0ALICE", tenant=TEAM)


async def test_the_decision_and_its_card_updates_commit_together(
    conn: Any, callbacks_conn: Any, posted_gate: str
) -> None:
    decided = await decide_gate(
        callbacks_conn,
        ALICE_ON_SLACK,
        gate_id=posted_gate,
        decision="approve",
        reason="reviewed",
        nonce="n-1",
        on_recorded=enqueue_card_updates,
    )
    assert decided.outcome.recorded and decided.outcome.status == "approved"
    assert decided.outcome.decisions[0]["principal"] == "alice.chen"
    assert len(decided.message_ids) >= 1  # one per channel the card was posted to
    assert await count(conn, CARD_UPDATES, posted_gate) == len(decided.message_ids)


async def test_a_failing_card_update_leaves_no_decision_behind(
    conn: Any, callbacks_conn: Any, posted_gate: str
) -> None:
    enqueued: list[int] = []

    async def enqueue_then_fail(connection: Any, gate_id: str) -> list[int]:
        enqueued.extend(await enqueue_card_updates(connection, gate_id))
        raise CardUpdateFailed(gate_id)

    with pytest.raises(CardUpdateFailed):
        await decide_gate(
            callbacks_conn,
            ALICE_ON_SLACK,
            gate_id=posted_gate,
            decision="approve",
            reason="reviewed",
            nonce="n-1",
            on_recorded=enqueue_then_fail,
        )
    assert enqueued, "the card update was written before the failure"
    assert await count(conn, DECISIONS, posted_gate) == 0
    assert await count(conn, CARD_UPDATES, posted_gate) == 0
    assert await count(conn, DECIDED_EVENTS, posted_gate) == 0


async def test_a_replayed_decision_announces_nothing_more(conn: Any, callbacks_conn: Any, posted_gate: str) -> None:
    def decide() -> Any:
        return decide_gate(
            callbacks_conn,
            ALICE_ON_SLACK,
            gate_id=posted_gate,
            decision="approve",
            reason="reviewed",
            nonce="n-1",
            on_recorded=enqueue_card_updates,
        )

    first = await decide()
    again = await decide()
    assert first.message_ids and again.message_ids == ()
    assert not again.outcome.recorded and again.outcome.status == "approved"
    assert await count(conn, DECISIONS, posted_gate) == 1
    assert await count(conn, CARD_UPDATES, posted_gate) == len(first.message_ids)


async def test_the_platforms_machine_verdict_is_refused_and_traced_before_anything_is_written(
    conn: Any, callbacks_conn: Any, posted_gate: str
) -> None:
    announced: list[str] = []

    async def announce(connection: Any, gate_id: str) -> list[int]:
        announced.append(gate_id)
        return []

    with pytest.raises(DecisionRefused) as refused:
        await decide_gate(
            callbacks_conn,
            PlatformIdentity(channel="slack", external_id="U0ALICE", tenant=TEAM, machine="Slack says: a bot"),
            gate_id=posted_gate,
            decision="approve",
            reason="reviewed",
            nonce="n-1",
            on_recorded=announce,
        )
    assert refused.value.code == "machine_principal"
    assert announced == []
    assert await count(conn, DECISIONS, posted_gate) == 0
    refusals = "SELECT count(*) FROM trace_event WHERE kind = 'decision_refused' AND payload->>'code' = %s"
    assert await count(conn, refusals, "machine_principal") == 1


async def test_a_signed_callback_updates_the_posted_cards_too(
    conn: Any, chat_api: Any, posted_gate: str, fake_slack: Any
) -> None:
    """The signed callback is a door like the chat buttons: its decision enqueues and delivers the card update."""
    response = await post_decision(chat_api, posted_gate, "alice.chen")
    assert response.status_code == 200, response.text
    assert await count(conn, CARD_UPDATES, posted_gate) >= 1
    await wait_until(lambda: len(fake_slack.calls_to("chat.update")) == 1)
    assert "Alice Chen" in json.dumps(fake_slack.calls_to("chat.update")[0].params)


async def test_the_card_state_key_is_the_one_the_deliverer_stores(
    conn: Any, callbacks_conn: Any, posted_gate: str
) -> None:
    """The outbox (which card moved on) and the deliverer (what a sent card shows) key a card's state by one
    definition, `countersign.store.gates.card_state`: a posted card is announced again only once its gate has moved
    on."""
    gate = await read_gate(conn, posted_gate)
    assert gate is not None and gate.card_state == "open:0:0"
    async with conn.cursor() as cur:
        await cur.execute(
            "SELECT DISTINCT rendered_state FROM outbox_message WHERE kind = 'gate_card' AND gate_id = %s",
            (posted_gate,),
        )
        assert await cur.fetchall() == [(gate.card_state,)]
    assert await enqueue_card_updates(conn, posted_gate) == []  # nothing moved on: nothing announced
    decided = await decide_gate(
        callbacks_conn,
        ALICE_ON_SLACK,
        gate_id=posted_gate,
        decision="approve",
        reason="reviewed",
        nonce="n-key",
        on_recorded=enqueue_card_updates,
    )
    moved = await read_gate(conn, posted_gate)
    assert moved is not None and moved.card_state != gate.card_state
    async with conn.cursor() as cur:
        await cur.execute(
            "SELECT DISTINCT payload->>'state' FROM outbox_message WHERE kind = 'card_update' AND gate_id = %s",
            (posted_gate,),
        )
        assert await cur.fetchall() == [(moved.card_state,)]
    assert len(decided.message_ids) >= 1
