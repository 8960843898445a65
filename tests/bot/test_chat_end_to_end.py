"""A close carried from `/close start` to sign-off by `countersign serve` and `countersign worker` processes,
driven by signed Slack and Teams requests over real sockets. Slack, Teams and the Bot Framework identity service are
local fakes. The one step taken outside chat is the controller loading the corrected bank feed at a terminal
(`countersign close load-bank-feed`), as a person resolving the planted halt would.

Chat decides the gates whose tier accepts a platform identity (medium), through Slack's decision form and Teams'
card, each with a reason. A high or critical gate's card offers "Review and sign" on the Close Board instead; an old
card's button on it is refused with where to sign it, and each person signs it with their own Ed25519 key over the
signed callback (the Close Board's passkey path has its own tests in tests/board)."""

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

from countersign.audit.person_proof import public_key_text
from countersign.engine.runs import close_status
from countersign.states import ProofKind
from tests.bot.conftest import (
    TEAM,
    TEAMS_APP_ID,
    TENANT,
    button_click,
    free_port,
    server_env,
    slack_headers,
    slash_command,
    view_submission,
)
from tests.bot.test_teams import invoke
from tests.fakes.teams_connector import FakeTeamsConnector
from tests.support import person_public_key, post_decision

PRINCIPALS = f"""
principals:
  - {{id: dana.reyes, kind: human, name: Dana Reyes, roles: [accountant], public_key: {public_key_text(person_public_key("dana.reyes"))},
      identities: {{slack: {{team: {TEAM}, user: U0DANA}}, teams: {{tenant: {TENANT}, aad_object_id: aad-dana}}}}}}
  - {{id: alice.chen, kind: human, name: Alice Chen, roles: [controller], public_key: {public_key_text(person_public_key("alice.chen"))},
      identities: {{slack: {{team: {TEAM}, user: U0ALICE}}, teams: {{tenant: {TENANT}, aad_object_id: aad-alice}}}}}}
  - {{id: bob.osei, kind: human, name: Bob Osei, roles: [cfo, controller], public_key: {public_key_text(person_public_key("bob.osei"))},
      identities: {{slack: {{team: {TEAM}, user: U0BOB}}, teams: {{tenant: {TENANT}, aad_object_id: aad-bob}}}}}}
  - {{id: carol.main, kind: human, name: Carol Main, roles: [cfo], public_key: {public_key_text(person_public_key("carol.main"))},
      identities: {{slack: {{team: {TEAM}, user: U0CAROL}}, teams: {{tenant: {TENANT}, aad_object_id: aad-carol}}}}}}
"""  # noqa: E501
BOARD_URL = "http://localhost:8000"  # COUNTERSIGN_BOARD_URL: where the cards link
PERSON_KEY_ANSWER = "This gate needs your own key: review and sign it on the Close Board: {page}"
SLACK_USER = {"dana.reyes": "U0DANA", "alice.chen": "U0ALICE", "bob.osei": "U0BOB", "carol.main": "U0CAROL"}
TEAMS_AAD = {"dana.reyes": "aad-dana", "alice.chen": "aad-alice", "bob.osei": "aad-bob", "carol.main": "aad-carol"}
ROLES = {"controller": ["alice.chen", "bob.osei"], "cfo": ["bob.osei", "carol.main"]}


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "countersign.cli.main", *args], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, f"{args}: {done.stdout}\n{done.stderr}"
    return done


def _posted_cards(fake_slack: Any) -> dict[str, list[dict[str, Any]]]:
    """gate id -> the buttons of its first posted Slack card."""
    cards: dict[str, list[dict[str, Any]]] = {}
    for call in fake_slack.calls_to("chat.postMessage"):
        blocks = call.params.get("blocks")
        blocks = json.loads(blocks) if isinstance(blocks, str) else blocks or []
        for block in blocks:
            if block.get("type") == "actions" and str(block.get("block_id", "")).startswith("gate:"):
                cards.setdefault(block["block_id"].removeprefix("gate:"), block["elements"])
    return cards


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
    # Set, as a deployment sets it: the server, the worker and the CLI link cards to the same board.
    env["COUNTERSIGN_BOARD_URL"] = BOARD_URL
    people = tmp_path / "people.yaml"
    people.write_text(PRINCIPALS)
    _cli(env, "principals", "import", str(people))
    server = subprocess.Popen(
        [sys.executable, "-m", "countersign.cli.main", "serve", "--port", str(port)],
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
            signed_on_board: set[str] = set()
            refused_in_chat: set[str] = set()
            for _ in range(12):
                _cli(env, "worker", "--once")
                status = await close_status(owner, close_id)
                if status["status"] == "closed":
                    break
                posted = _posted_cards(fake_slack)
                for gate in (g for g in status["gates"] if g["status"] == "open"):
                    gate_id = gate["gate_id"]
                    assert gate_id in posted, "every open gate has its card in the channel"
                    page = f"{BOARD_URL}/board/gates/{gate_id}"
                    one_tap = ProofKind.PLATFORM_IDENTITY in gate["accepted_proofs"]
                    buttons = [(b["action_id"], b.get("url")) for b in posted[gate_id]]
                    if one_tap:
                        assert buttons == [("gate_approve", None), ("gate_reject", None), ("gate_open_board", page)]
                    else:
                        assert buttons == [("gate_review_and_sign", page)], f"{gate['tier']} gate: review and sign"
                    if gate["kind"] == "escalation":
                        feed = tmp_path / "state" / "books" / "E2E-2026-10" / "corrected" / "bank_lines.csv"
                        _cli(env, "close", "load-bank-feed", str(feed), "--close", close_id, "--by", "alice.chen")
                    excluded = {gate["prepared_by"], *gate["requested_by"]}
                    voters = [p for p in ROLES[gate["approver_role"]] if p not in excluded]
                    for person in voters[: gate["quorum"] - gate["approvals"]]:
                        if not one_tap:
                            if gate_id not in refused_in_chat:  # an old card's button, from each door
                                await _chat_is_refused(http, fake_slack, fake_teams_auth, connector, gate_id, person)
                                refused_in_chat.add(gate_id)
                            reason = f"{person} checked {gate['task']}"
                            answer = await post_decision(http, gate_id, person, "approve", reason=reason)
                            assert answer.status_code == 200, answer.text
                            signed_on_board.add(gate_id)
                            continue
                        use_teams = not use_teams
                        reason = f"{person} checked {gate['task']} in {'Teams' if use_teams else 'Slack'}"
                        if use_teams:
                            token = fake_teams_auth.token(app_id=TEAMS_APP_ID, service_url=connector.base_url)
                            activity = invoke(
                                gate_id, TEAMS_AAD[person], activity_id=f"inv-{gate_id}-{person}", reason=reason
                            )
                            activity["serviceUrl"] = connector.base_url
                            reply = await http.post(
                                "/api/messages", json=activity, headers={"Authorization": f"Bearer {token}"}
                            )
                            assert reply.status_code == 200 and reply.json()["statusCode"] == 200, reply.text
                        else:
                            await _decide_in_slack(http, fake_slack, gate_id, SLACK_USER[person], reason)

                        async def voted(gate_id: str = gate_id, who: str = person) -> bool:
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
    by_channel: dict[str, set[str]] = {}
    for gate in status["gates"]:
        for decision in gate["decisions"]:
            by_channel.setdefault(decision["channel"], set()).add(gate["gate_id"])
    assert set(by_channel) == {"slack", "teams", "signed_callback"}
    assert signed_on_board and by_channel["signed_callback"] == signed_on_board == refused_in_chat
    assert not (by_channel["slack"] | by_channel["teams"]) & signed_on_board, "chat decided a person-key gate"
    chat_reasons = [d["reason"] for g in status["gates"] for d in g["decisions"] if d["channel"] in ("slack", "teams")]
    assert chat_reasons and all(" checked " in reason for reason in chat_reasons)  # each person's own reason
    assert status["deliveries_failed"] == []
    assert len(fake_slack.calls_to("chat.update")) >= len(status["gates"])
    assert sum(1 for method, _, _ in connector.activities if method == "PUT") >= len(status["gates"])


async def _decide_in_slack(http: httpx.AsyncClient, fake_slack: Any, gate_id: str, user: str, reason: str) -> None:
    """Click Approve, wait for the decision form Slack opens, and submit it with the reason."""
    opened = len(fake_slack.opened_views())
    click = button_click(gate_id, user, action_ts=f"{time.time():.6f}")
    assert (await http.post("/slack/events", content=click, headers=slack_headers(click))).status_code == 200

    async def form_open() -> bool:
        return len(fake_slack.opened_views()) > opened

    await _wait_for(form_open)
    form = fake_slack.opened_views()[opened]
    submitted = view_submission(form, user, reason)
    answer = await http.post("/slack/events", content=submitted, headers=slack_headers(submitted))
    assert answer.status_code == 200 and not answer.content, answer.text  # the form closes


async def _chat_is_refused(
    http: httpx.AsyncClient, fake_slack: Any, fake_teams_auth: Any, connector: Any, gate_id: str, person: str
) -> None:
    """An old card's Approve, in Slack and in Teams, on a gate that needs the person's own key: told where to sign."""
    expected = PERSON_KEY_ANSWER.format(page=f"{BOARD_URL}/board/gates/{gate_id}")
    told = len(fake_slack.calls_to("chat.postEphemeral"))
    click = button_click(gate_id, SLACK_USER[person], action_ts=f"{time.time():.6f}")
    assert (await http.post("/slack/events", content=click, headers=slack_headers(click))).status_code == 200

    async def answered() -> bool:
        return len(fake_slack.calls_to("chat.postEphemeral")) > told

    await _wait_for(answered)
    assert fake_slack.calls_to("chat.postEphemeral")[told].params["text"] == expected
    token = fake_teams_auth.token(app_id=TEAMS_APP_ID, service_url=connector.base_url)
    activity = invoke(gate_id, TEAMS_AAD[person], activity_id=f"old-{gate_id}-{person}", reason="one tap")
    activity["serviceUrl"] = connector.base_url
    reply = await http.post("/api/messages", json=activity, headers={"Authorization": f"Bearer {token}"})
    assert reply.status_code == 200 and expected in reply.text, reply.text
