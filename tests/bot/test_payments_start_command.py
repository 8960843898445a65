"""`/close payments start YYYY-MM` in Slack and `close payments start YYYY-MM` in Teams: a controller starts the
month's payment runs on the latest construction set with that month, through the same signed doors and the same role
check as `/close start`; anyone else is refused with the reason, the refusal is traced, and nothing is started."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from countersign.services.construction_input import read_construction_input
from countersign.services.loading import load_construction_input
from tests.bot.conftest import TENANT, slack_headers, slash_command, wait_until
from tests.bot.test_access import _refusals, _replies
from tests.bot.test_teams import _auth, message
from tests.support import count

APPLICATIONS = Path(__file__).resolve().parents[1] / "data" / "applications"
RUNS = "SELECT count(*) FROM close_run WHERE workflow = 'certificates'"


async def loaded_month(conn: Any) -> int:
    """The test pay applications (certificates of 2025-04, -05 and -06 of CT-100) loaded as a construction set."""
    return await load_construction_input(conn, read_construction_input(APPLICATIONS), loaded_by="test")


async def test_slack_starts_a_month_of_payment_runs_for_a_controller_and_refuses_others(
    conn: Any, chat_api: Any, fake_slack: Any
) -> None:
    set_id = await loaded_month(conn)
    for answers, user in enumerate(("U0MALLORY", "U0DANA", "U0ALICE"), start=1):
        body = slash_command("payments start 2025-06", user)
        assert (await chat_api.post("/slack/events", content=body, headers=slack_headers(body))).status_code == 200
        await wait_until(lambda n=answers: len(fake_slack.responses()) == n)
    stranger, accountant, controller = fake_slack.responses()
    assert stranger["response_type"] == "ephemeral" and stranger["text"].startswith("Refused")
    assert accountant["response_type"] == "ephemeral" and accountant["text"].startswith("Refused")
    assert "controller" in accountant["text"]  # the role that would have allowed it
    assert controller["response_type"] == "in_channel"
    assert controller["text"] == (
        f"Alice Chen started 1 payment runs for 2025-06 (construction set {set_id})."
        " `/close payments 2025-06` shows them."
    )
    cur = await conn.execute("SELECT entity, period, started_by FROM close_run WHERE workflow = 'certificates'")
    assert await cur.fetchall() == [("IPC-CT100-003", "2025-06", "alice.chen")]
    assert [(r["user"], r["command"], r["reason"]) for r in await _refusals(conn)] == [
        ("U0MALLORY", "payments start", "unknown_principal"),
        ("U0DANA", "payments start", "missing_role"),
    ]

    # A month started once is not started again, and a month nobody loaded is named.
    for answers, text in enumerate(("payments start 2025-06", "payments start 2024-01"), start=4):
        body = slash_command(text, "U0ALICE")
        await chat_api.post("/slack/events", content=body, headers=slack_headers(body))
        await wait_until(lambda n=answers: len(fake_slack.responses()) == n)
    again, empty = fake_slack.responses()[3:]
    assert again["response_type"] == "ephemeral"
    assert again["text"].startswith("Could not start the payment runs: the payment runs of 2025-06 are already started")
    assert empty["text"].startswith("Could not start the payment runs: no certificate submitted in 2024-01")
    assert await count(conn, RUNS) == 1
    await asyncio.sleep(0.2)
    assert fake_slack.calls_to("chat.postMessage") == []


async def test_slack_payments_start_without_a_month_gets_the_usage(conn: Any, chat_api: Any, fake_slack: Any) -> None:
    await loaded_month(conn)
    body = slash_command("payments start June", "U0ALICE")
    await chat_api.post("/slack/events", content=body, headers=slack_headers(body))
    await wait_until(lambda: len(fake_slack.responses()) == 1)
    (answer,) = fake_slack.responses()
    assert answer["response_type"] == "ephemeral" and "/close payments start YYYY-MM" in answer["text"]
    assert await count(conn, RUNS) == 0


async def test_teams_starts_a_month_of_payment_runs_for_a_controller_and_refuses_a_stranger(
    conn: Any, chat_api: Any, fake_teams_auth: Any, teams_connector: Any
) -> None:
    set_id = await loaded_month(conn)
    before = len(teams_connector.calls)
    for aad in ("aad-zed", "aad-carol", "aad-alice"):
        response = await chat_api.post(
            "/api/messages", json=message("close payments start 2025-05", aad=aad), headers=_auth(fake_teams_auth)
        )
        assert response.status_code == 200, response.text
    stranger, cfo, controller = _replies(teams_connector, before)
    assert stranger["text"].startswith("Refused") and cfo["text"].startswith("Refused")
    assert controller["text"] == (
        f"Alice Chen started 1 payment runs for 2025-05 (construction set {set_id})."
        " `close payments 2025-05` shows them."
    )
    cur = await conn.execute("SELECT entity, started_by FROM close_run WHERE workflow = 'certificates'")
    assert await cur.fetchall() == [("IPC-CT100-002", "alice.chen")]
    assert [(r["user"], r["command"], r["reason"], r["tenant"]) for r in await _refusals(conn)] == [
        ("aad-zed", "payments start", "unknown_principal", TENANT),
        ("aad-carol", "payments start", "missing_role", TENANT),
    ]
