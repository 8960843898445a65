"""Click storm: the same signed decision sent 500 times at once, by each door, to a running `countersign serve`.

The test asserts what happened (one decision per gate, one card update per gate and chat door, every replay a
no-op), never how long it took. Its waits poll for a state and its bounds are minutes, so a loaded 2-core machine
makes it slower, not red (issue 20: a client pool timeout after a long run, seen three times).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import psycopg

from countersign.callbacks.principals import upsert_principals
from countersign.engine.runs import close_status
from tests.bot.conftest import (
    PEOPLE,
    TEAMS_APP_ID,
    decision_form,
    free_port,
    server_env,
    slack_headers,
)
from tests.bot.test_teams import invoke
from tests.fakes.teams_connector import FakeTeamsConnector
from tests.support import count, decision_body, rewrite_gate_as_owner, signed_headers, start_default_close

STORM = 500
CARD_UPDATES = 6  # three decided gates, each updated once on Slack and once on Teams
STORM_TIMEOUT = httpx.Timeout(300.0, pool=1800.0)
"""Per request: minutes to connect, send and be answered. `pool` bounds the wait for one of the client's 100
connections, which the last of 1,500 queued requests spends behind all the others (the whole storm)."""
READY_TIMEOUT_S = 300.0  # bound on `serve` starting and on the storm's background work settling
# `serve` closes a connection whose head it has not read within 10 s; a loaded server reads 100 at once late.
SUBPROCESS_TIMEOUT_S = 600.0  # bound on `worker --once` and on `serve` stopping


async def _poll_until(check: Callable[[], Awaitable[bool]], *, what: str, timeout_s: float = READY_TIMEOUT_S) -> None:
    """Poll `check` until it holds; the bound only keeps a broken server from hanging the suite."""
    deadline = time.monotonic() + timeout_s
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not reached within {timeout_s:.0f} s")
        await asyncio.sleep(0.2)


async def test_five_hundred_identical_decisions_per_door_record_one_each(
    database: Any, conn: Any, runtime: Any, default_books: Any, tmp_path: Path, fake_slack: Any, fake_teams_auth: Any
) -> None:
    connector = FakeTeamsConnector().start()
    env = server_env(database.url, tmp_path / "state", fake_slack, fake_teams_auth, connector)
    close_id = await start_default_close(conn, runtime, default_books)
    await upsert_principals(conn, PEOPLE)
    # Quorum 2 everywhere, so each gate stays open after the one vote the storm may record.
    worker = subprocess.run(
        [sys.executable, "-m", "countersign.cli.main", "worker", "--once"],
        env=env,
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_TIMEOUT_S,
    )
    assert worker.returncode == 0, worker.stderr
    # (and every proof accepted, so the Teams door may decide the high bank gate: the storm is about replays).
    for (gate,) in await (await conn.execute("SELECT gate_id FROM gate")).fetchall():
        await rewrite_gate_as_owner(
            conn, str(gate), "quorum = 2, accepted_proofs = '{platform_identity,ed25519,passkey}'"
        )
    status = await close_status(conn, close_id)
    by_task = {g["task"]: g["gate_id"] for g in status["gates"]}
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "countersign.cli.main", "serve", "--port", str(port), "--header-read-timeout-s", "300"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        limits = httpx.Limits(max_connections=100, max_keepalive_connections=0)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=STORM_TIMEOUT, limits=limits) as http:

            async def serving() -> bool:
                assert server.poll() is None, f"`countersign serve` exited with {server.returncode}"
                try:
                    return (await http.get("/healthz")).status_code == 200
                except httpx.TransportError:
                    return False

            await _poll_until(serving, what="`countersign serve` answering /healthz")

            signed = decision_body("alice.chen", nonce="storm-nonce", gate_id=by_task["accruals"])
            callback = [
                http.post(
                    f"/callbacks/gates/{by_task['accruals']}/decisions", content=signed, headers=signed_headers(signed)
                )
                for _ in range(STORM)
            ]
            click = decision_form(by_task["intercompany"], "U0BOB", view_id="V0STORM")  # one form, submitted 500 times
            slack = [http.post("/slack/events", content=click, headers=slack_headers(click)) for _ in range(STORM)]
            token = fake_teams_auth.token(app_id=TEAMS_APP_ID, service_url=connector.base_url)
            activity = invoke(by_task["bank_reconciliation"], "aad-alice", activity_id="storm-invoke")
            activity["serviceUrl"] = connector.base_url
            teams = [
                http.post("/api/messages", json=activity, headers={"Authorization": f"Bearer {token}"})
                for _ in range(STORM)
            ]
            responses = await asyncio.gather(*callback, *slack, *teams)

        async def settled() -> bool:
            """Every gate decided, and every card update the decisions queued sent; `serve` stops only after this."""
            decided = await (
                await conn.execute(
                    "SELECT count(DISTINCT gate_id) FROM gate_decision WHERE gate_id = ANY(%s::uuid[])",
                    ([by_task[t] for t in ("accruals", "intercompany", "bank_reconciliation")],),
                )
            ).fetchone()
            updates = await (
                await conn.execute(
                    "SELECT count(*) FILTER (WHERE status = 'sent'), count(*) FILTER (WHERE status <> 'sent')"
                    " FROM outbox_message WHERE kind = 'card_update'"
                )
            ).fetchone()
            return decided == (3,) and updates is not None and updates[0] >= CARD_UPDATES and updates[1] == 0

        await _poll_until(settled, what="the storm's decisions and card updates")
    finally:
        server.terminate()
        try:
            server.wait(timeout=SUBPROCESS_TIMEOUT_S)
        finally:
            if server.poll() is None:
                server.kill()
                server.wait()
        connector.stop()

    # `serve` has exited: nothing more can reach the fakes or the database, so the counts below are final.
    callback_answers, slack_answers, teams_answers = (
        responses[:STORM],
        responses[STORM : 2 * STORM],
        responses[2 * STORM :],
    )
    assert {r.status_code for r in callback_answers} == {200}
    bodies = [r.json() for r in callback_answers]
    assert sum(b["recorded"] for b in bodies) == 1
    assert {(b["status"], b["approvals"]) for b in bodies} == {("open", 1)}  # every answer tells the same state
    assert {r.status_code for r in slack_answers} == {200}
    assert {r.status_code for r in teams_answers} == {200}
    assert len({json.dumps(r.json(), sort_keys=True) for r in teams_answers}) == 1
    for task in ("accruals", "intercompany", "bank_reconciliation"):
        row = await (
            await conn.execute("SELECT count(*) FROM gate_decision WHERE gate_id = %s", (by_task[task],))
        ).fetchone()
        assert row == (1,), task
    # One update per decided gate, whichever door decided it (the signed callback too): accruals, intercompany, bank.
    assert len(fake_slack.calls_to("chat.update")) == 3
    assert len([a for a in connector.activities if a[0] == "PUT"]) == 3
    assert await count(conn, "SELECT count(*) FROM outbox_message WHERE kind = 'card_update'") == CARD_UPDATES
    with psycopg.connect(database.url) as check:
        refused = check.execute("SELECT count(*) FROM trace_event WHERE kind = 'decision_refused'").fetchone()
    assert refused == (0,)  # replays are not refusals
