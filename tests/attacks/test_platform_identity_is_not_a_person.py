"""Issue 21's two attacks: a platform identity is a system's word, not a person's proof.

Written before the fix, when both passed a quorum-2 critical gate; since migration 0017 the database refuses a
platform-identity decision on a gate whose tier accepts only a person's own key (risk.yaml `proofs`), whoever
connects, and both attacks fail.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from countersign.bootstrap.chat import build_senders
from countersign.bootstrap.database import Database
from countersign.bootstrap.runtime import engine_context
from countersign.callbacks.principals import upsert_principals
from countersign.delivery.worker import deliver_due
from countersign.engine.orchestrator import advance
from countersign.engine.runs import close_status
from tests.bot.conftest import PEOPLE, TEAM, decision_form, slack_headers
from tests.support import count, rewrite_gate_as_owner, start_default_close
from tests.test_database_boundary import _as, _decide, _seed

SETTLE_TIMEOUT_S = 300.0  # a bound on a loaded machine, not a measure


def test_the_callbacks_role_cannot_pass_a_critical_gate_with_two_platform_identities(
    database: Database, owner: psycopg.Connection[Any]
) -> None:
    gate_id = _seed(owner, quorum=2, role="cfo")  # a critical sign-off gate, two distinct CFOs needed
    with _as(database, "callbacks") as callbacks:
        for person, slack_user in (("bob.osei", "U0BOB"), ("carol.main", "U0CAROL")):
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="accepts only ed25519, passkey"):
                _decide(
                    callbacks,
                    gate_id,
                    person,
                    channel="slack",
                    proof=Jsonb({"kind": "slack", "tenant": "T01", "external_id": slack_user}),
                )
    status = owner.execute("SELECT status FROM gate_state WHERE gate_id = %s", (gate_id,)).fetchone()
    assert status == ("open",), "two rows of mapped Slack identities passed a critical gate"


async def test_the_slack_signing_secret_alone_cannot_approve_a_critical_gate_for_two_cfos(
    conn: Any, chat_api: Any, chat_runtime: Any, default_books: Any, fake_slack: Any
) -> None:
    close_id = await start_default_close(conn, chat_runtime, default_books)
    await upsert_principals(conn, PEOPLE)
    async with engine_context(chat_runtime) as ctx:
        await advance(conn, close_id, ctx)
    await deliver_due(conn, build_senders(chat_runtime.settings))  # type: ignore[arg-type]
    gate_id = next(g["gate_id"] for g in (await close_status(conn, close_id))["gates"] if g["task"] == "accruals")
    await rewrite_gate_as_owner(
        conn, gate_id, "tier = 'critical', quorum = 2, approver_role = 'cfo', accepted_proofs = '{ed25519,passkey}'"
    )
    # One holder of the signing secret signs two decision forms, each naming another CFO's Slack user id.
    for user in ("U0BOB", "U0CAROL"):
        body = decision_form(gate_id, user, view_id=f"V0ATTACK{user}")
        assert (await chat_api.post("/slack/events", content=body, headers=slack_headers(body))).status_code == 200
    # Both clicks are settled once each is recorded or refused (a refusal is traced); only then count.
    settled = (
        "SELECT (SELECT count(*) FROM gate_decision WHERE gate_id = %s)"
        " + (SELECT count(*) FROM trace_event WHERE kind = 'decision_refused' AND payload->>'gate_id' = %s)"
    )
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while await count(conn, settled, gate_id, gate_id) < 2:
        if time.monotonic() > deadline:
            raise TimeoutError("the two clicks were neither recorded nor refused")
        await asyncio.sleep(0.1)
    decided = await count(conn, "SELECT count(*) FROM gate_decision WHERE gate_id = %s", gate_id)
    assert decided < 2, f"the signing secret alone recorded {decided} CFO approvals on a critical gate ({TEAM})"
