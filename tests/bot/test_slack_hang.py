"""A Slack that hangs must not take the other doors with it.

Issue 9 reproduced it: after 28 clicks the card updates held every engine pool connection while chat.update hung,
`GET /closes` took 27 s and Teams returned 500. Now a delivery holds no connection during the call and a click's
answer waits for its card updates only briefly, so Teams decisions and `GET /closes` answer while Slack still hangs.

Slack hangs here for longer than the test may run (`stop` releases it), so an answer that waited for Slack never
comes: the test asserts that the doors answer, and answer correctly, not how fast (issue 20). `ANSWER_BOUND_S` only
keeps such a regression from hanging the suite for an hour; it is minutes, far inside the hang.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from countersign.bootstrap.chat import build_senders
from countersign.bootstrap.runtime import engine_context
from countersign.callbacks.callers import issue_token
from countersign.callbacks.principals import upsert_principals
from countersign.delivery.worker import deliver_due
from countersign.engine.orchestrator import advance
from countersign.engine.runs import close_status
from tests.bot.conftest import PEOPLE, decision_form, slack_headers, wait_until
from tests.bot.test_teams import _auth, invoke
from tests.support import count, rewrite_gate_as_owner, start_default_close

SLACK_HANG_S = 3600.0  # Slack answers the hung methods only when the fake stops, after the test
ANSWER_BOUND_S = 300.0  # a door that waited for Slack would wait SLACK_HANG_S; this fails it long before
SLACK_USERS = ("U0ALICE", "U0BOB", "U0CAROL", "U0DANA", "U0MALLORY")


@pytest.mark.parametrize(
    "hung", [("chat.update", "chat.postMessage"), ("users.info", "chat.update", "chat.postMessage")]
)
async def test_a_hung_slack_leaves_teams_decisions_and_get_closes_answering_while_slack_still_hangs(
    conn: Any,
    chat_api: Any,
    chat_runtime: Any,
    default_books: Any,
    fake_slack: Any,
    fake_teams_auth: Any,
    teams_connector: Any,
    hung: tuple[str, ...],
) -> None:
    close_id = await start_default_close(conn, chat_runtime, default_books)
    await upsert_principals(conn, PEOPLE)
    async with engine_context(chat_runtime) as ctx:
        await advance(conn, close_id, ctx)
    await deliver_due(conn, build_senders(chat_runtime.settings))  # type: ignore[arg-type]
    status = await close_status(conn, close_id)
    accruals = next(g["gate_id"] for g in status["gates"] if g["task"] == "accruals")
    others = [g["gate_id"] for g in status["gates"] if g["gate_id"] != accruals]
    token = await issue_token(conn, "alice.chen")  # GET /closes needs a principal's credentials
    for (gate,) in await (await conn.execute("SELECT gate_id FROM gate")).fetchall():  # every gate decidable in chat
        await rewrite_gate_as_owner(conn, str(gate), "accepted_proofs = '{platform_identity,ed25519,passkey}'")

    fake_slack.hang(*hung, seconds=SLACK_HANG_S)
    clicks = [  # decision forms submitted (a click only opens one)
        decision_form(gate, user, decision, f"reason {n}", view_id=f"V0HANG{n:04d}")
        for n, (gate, user, decision) in enumerate(
            (others[i % len(others)], SLACK_USERS[i % len(SLACK_USERS)], ("approve", "reject")[i % 2])
            for i in range(30)
        )
    ]
    answers = await asyncio.gather(
        *(chat_api.post("/slack/events", content=body, headers=slack_headers(body)) for body in clicks)
    )
    assert {a.status_code for a in answers} == {200}
    # Slack is hanging: a call to a hung method has arrived and will not be answered before the test ends.
    await wait_until(lambda: any(fake_slack.calls_to(method) for method in hung), timeout_s=ANSWER_BOUND_S)

    async with asyncio.timeout(ANSWER_BOUND_S):
        decided = await chat_api.post(
            "/api/messages", json=invoke(accruals, "aad-alice"), headers=_auth(fake_teams_auth)
        )
    assert decided.status_code == 200 and decided.json()["statusCode"] == 200
    assert await count(conn, f"SELECT count(*) FROM gate_decision WHERE gate_id = '{accruals}'") == 1

    for _ in range(3):
        async with asyncio.timeout(ANSWER_BOUND_S):
            read = await chat_api.get(f"/closes/{close_id}", headers={"Authorization": f"Bearer {token}"})
        assert read.status_code == 200 and read.json()["close_id"] == close_id
    # Teams' own card was updated for everyone, Slack's waits in the outbox for the worker's retry.
    await wait_until(lambda: any(c.request.method == "PUT" for c in teams_connector.calls), timeout_s=ANSWER_BOUND_S)
