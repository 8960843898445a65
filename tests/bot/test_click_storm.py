"""Click storm: the same signed decision sent 500 times at once, by each door, to a running `countersign serve`."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import psycopg

from callbacks.principals import upsert_principals
from engine.runs import close_status
from tests.bot.conftest import (
    PEOPLE,
    TEAMS_APP_ID,
    button_click,
    free_port,
    server_env,
    slack_headers,
)
from tests.bot.test_teams import invoke
from tests.fakes.teams_connector import FakeTeamsConnector
from tests.support import decision_body, rewrite_gate_as_owner, signed_headers, start_default_close

STORM = 500


async def test_five_hundred_identical_decisions_per_door_record_one_each(
    database: Any, conn: Any, runtime: Any, default_books: Any, tmp_path: Path, fake_slack: Any, fake_teams_auth: Any
) -> None:
    connector = FakeTeamsConnector().start()
    env = server_env(database.url, tmp_path / "state", fake_slack, fake_teams_auth, connector)
    close_id = await start_default_close(conn, runtime, default_books)
    await upsert_principals(conn, PEOPLE)
    # Quorum 2 everywhere, so each gate stays open after the one vote the storm may record.
    worker = subprocess.run(
        [sys.executable, "-m", "cli.main", "worker", "--once"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert worker.returncode == 0, worker.stderr
    for (gate,) in await (await conn.execute("SELECT gate_id FROM gate")).fetchall():
        await rewrite_gate_as_owner(conn, str(gate), "quorum = 2")
    status = await close_status(conn, close_id)
    by_task = {g["task"]: g["gate_id"] for g in status["gates"]}
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        limits = httpx.Limits(max_connections=100, max_keepalive_connections=0)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=120, limits=limits) as http:
            for _ in range(300):
                try:
                    if (await http.get("/healthz")).status_code == 200:
                        break
                except httpx.TransportError:
                    await asyncio.sleep(0.1)

            signed = decision_body("alice.chen", nonce="storm-nonce", gate_id=by_task["accruals"])
            callback = [
                http.post(
                    f"/callbacks/gates/{by_task['accruals']}/decisions", content=signed, headers=signed_headers(signed)
                )
                for _ in range(STORM)
            ]
            click = button_click(by_task["intercompany"], "U0BOB", action_ts="1700000999.000001")
            slack = [http.post("/slack/events", content=click, headers=slack_headers(click)) for _ in range(STORM)]
            token = fake_teams_auth.token(app_id=TEAMS_APP_ID, service_url=connector.base_url)
            activity = invoke(by_task["bank_reconciliation"], "aad-alice", activity_id="storm-invoke")
            activity["serviceUrl"] = connector.base_url
            teams = [
                http.post("/api/messages", json=activity, headers={"Authorization": f"Bearer {token}"})
                for _ in range(STORM)
            ]
            responses = await asyncio.gather(*callback, *slack, *teams)

            async def slack_done() -> bool:
                row = await (
                    await conn.execute(
                        "SELECT count(*) FROM gate_decision WHERE gate_id = %s", (by_task["intercompany"],)
                    )
                ).fetchone()
                return bool(row and row[0]) and len(fake_slack.calls_to("users.info")) >= STORM

            for _ in range(600):
                if await slack_done():
                    break
                await asyncio.sleep(0.1)
            await asyncio.sleep(1.0)
    finally:
        server.terminate()
        server.wait(timeout=30)
        connector.stop()

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
    slack_updates = [c for c in fake_slack.calls_to("chat.update")]
    # One update per decided gate, whichever door decided it (the signed callback too): accruals, intercompany, bank.
    assert len(slack_updates) == 3
    teams_puts = [a for a in connector.activities if a[0] == "PUT"]
    assert len(teams_puts) == 3
    with psycopg.connect(database.url) as check:
        refused = check.execute("SELECT count(*) FROM trace_event WHERE kind = 'decision_refused'").fetchone()
    assert refused == (0,)  # replays are not refusals
