"""A close carried from `/close start` to sign-off by `countersign serve` and `countersign worker` processes,
driven by signed Slack and Teams requests over real sockets. Slack, Teams and the Bot Framework identity service are
local fakes. The one step taken outside chat is the controller loading the corrected bank feed at a terminal
(`countersign close load-bank-feed`), as a person resolving the planted halt would."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import psycopg

from engine.runs import close_status
from tests.bot.conftest import (
    TEAM,
    TEAMS_APP_ID,
    TENANT,
    button_click,
    free_port,
    server_env,
    slack_headers,
    slash_command,
)
from tests.bot.test_teams import invoke
from tests.fakes.teams_connector import FakeTeamsConnector

PRINCIPALS = f"""
principals:
  - {{id: dana.reyes, kind: human, name: Dana Reyes, roles: [accountant],
      identities: {{slack: {{team: {TEAM}, user: U0DANA}}, teams: {{tenant: {TENANT}, aad_object_id: aad-dana}}}}}}
  - {{id: alice.chen, kind: human, name: Alice Chen, roles: [controller],
      identities: {{slack: {{team: {TEAM}, user: U0ALICE}}, teams: {{tenant: {TENANT}, aad_object_id: aad-alice}}}}}}
  - {{id: bob.osei, kind: human, name: Bob Osei, roles: [cfo, controller],
      identities: {{slack: {{team: {TEAM}, user: U0BOB}}, teams: {{tenant: {TENANT}, aad_object_id: aad-bob}}}}}}
  - {{id: carol.main, kind: human, name: Carol Main, roles: [cfo],
      identities: {{slack: {{team: {TEAM}, user: U0CAROL}}, teams: {{tenant: {TENANT}, aad_object_id: aad-carol}}}}}}
"""
SLACK_USER = {"dana.reyes": "U0DANA", "alice.chen": "U0ALICE", "bob.osei": "U0BOB", "carol.main": "U0CAROL"}
TEAMS_AAD = {"dana.reyes": "aad-dana", "alice.chen": "aad-alice", "bob.osei": "aad-bob", "carol.main": "aad-carol"}
ROLES = {"controller": ["alice.chen", "bob.osei"], "cfo": ["bob.osei", "carol.main"]}


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "cli.main", *args], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, f"{args}: {done.stdout}\n{done.stderr}"
    return done


def _posted_gate_ids(fake_slack: Any) -> set[str]:
    ids = set()
    for call in fake_slack.calls_to("chat.postMessage"):
        blocks = call.params.get("blocks")
        blocks = json.loads(blocks) if isinstance(blocks, str) else blocks or []
        for block in blocks:
            for element in block.get("elements", []) if block.get("type") == "actions" else []:
                if element.get("action_id") == "gate_approve":
                    ids.add(element["value"])
    return ids


async def _wait_for(predicate: Any, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if await predicate():
            return
        await asyncio.sleep(0.1)
    raise AssertionError("condition not met in time")


async def test_a_close_runs_from_slash_command_to_signoff_over_signed_platform_requests(
    database: Any, tmp_path: Path, fake_slack: Any, fake_teams_auth: Any
) -> None:
    connector = FakeTeamsConnector().start()
    port = free_port()
    env = server_env(database.url, tmp_path / "state", fake_slack, fake_teams_auth, connector)
    people = tmp_path / "people.yaml"
    people.write_text(PRINCIPALS)
    _cli(env, "principals", "import", str(people))
    server = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    owner = await psycopg.AsyncConnection.connect(database.url, autocommit=True)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
            for _ in range(300):
                try:
                    if (await http.get("/healthz")).status_code == 200:
                        break
                except httpx.TransportError:
                    await asyncio.sleep(0.1)
            start = slash_command("start E2E 2026-10 synthetic", "U0ALICE")  # a controller starts the close
            assert (await http.post("/slack/events", content=start, headers=slack_headers(start))).status_code == 200

            async def close_exists() -> bool:
                row = await (await owner.execute("SELECT count(*) FROM close_run")).fetchone()
                return bool(row and row[0])

            await _wait_for(close_exists, 120)
            close_id = str((await (await owner.execute("SELECT close_id FROM close_run")).fetchone())[0])  # type: ignore[index]
            use_teams = False
            status: dict[str, Any] = {}
            for _ in range(12):
                _cli(env, "worker", "--once")
                status = await close_status(owner, close_id)
                if status["status"] == "closed":
                    break
                posted = _posted_gate_ids(fake_slack)
                for gate in (g for g in status["gates"] if g["status"] == "open"):
                    assert gate["gate_id"] in posted, "every open gate has its card in the channel"
                    if gate["kind"] == "escalation":
                        feed = tmp_path / "state" / "books" / "E2E-2026-10" / "corrected" / "bank_lines.csv"
                        _cli(env, "close", "load-bank-feed", str(feed), "--close", close_id, "--by", "alice.chen")
                    excluded = {gate["prepared_by"], *gate["requested_by"]}
                    voters = [p for p in ROLES[gate["approver_role"]] if p not in excluded]
                    for person in voters[: gate["quorum"] - gate["approvals"]]:
                        use_teams = not use_teams
                        if use_teams:
                            token = fake_teams_auth.token(app_id=TEAMS_APP_ID, service_url=connector.base_url)
                            activity = invoke(
                                gate["gate_id"], TEAMS_AAD[person], activity_id=f"inv-{gate['gate_id']}-{person}"
                            )
                            activity["serviceUrl"] = connector.base_url
                            reply = await http.post(
                                "/api/messages", json=activity, headers={"Authorization": f"Bearer {token}"}
                            )
                            assert reply.status_code == 200 and reply.json()["statusCode"] == 200, reply.text
                        else:
                            click = button_click(gate["gate_id"], SLACK_USER[person], action_ts=f"{time.time():.6f}")
                            answer = await http.post("/slack/events", content=click, headers=slack_headers(click))
                            assert answer.status_code == 200

                        async def voted(gate_id: str = gate["gate_id"], who: str = person) -> bool:
                            row = await (
                                await owner.execute(
                                    "SELECT count(*) FROM gate_decision WHERE gate_id = %s AND principal_id = %s",
                                    (gate_id, who),
                                )
                            ).fetchone()
                            return bool(row and row[0])

                        await _wait_for(voted)
            _cli(env, "worker", "--once")  # deliver the last card updates
    finally:
        server.terminate()
        server.wait(timeout=30)
        connector.stop()
        await owner.close()

    assert status["status"] == "closed"
    assert len(status["gates"]) >= 5
    channels = {d["channel"] for g in status["gates"] for d in g["decisions"]}
    assert channels == {"slack", "teams"}
    assert status["deliveries_failed"] == []
    assert len(fake_slack.calls_to("chat.update")) >= len(status["gates"])
    assert sum(1 for method, _, _ in connector.activities if method == "PUT") >= len(status["gates"])
