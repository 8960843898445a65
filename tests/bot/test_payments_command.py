"""`/close payments [YYYY-MM]` in Slack and `close payments [YYYY-MM]` in Teams: the payment-runs card, shown only
to the people who may see a close (countersign/policy/command_roles.py), through the same signed doors as
`/close status`."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from rich.console import Console

from countersign.callbacks.principals import upsert_principals
from countersign.scenarios.demo_certificates import run_certificates_demo
from tests.bot.conftest import PEOPLE, TENANT, slack_headers, slash_command, wait_until
from tests.bot.test_access import _refusals, _replies
from tests.bot.test_teams import _auth, message
from tests.support import count

PERIOD = "2025-06"


async def payment_month(conn: Any, runtime: Any, teams_connector: Any) -> list[str]:
    """The demo's month of payment runs; its certificate ids in submission order."""
    # respx answers every unmatched httpx call; the demo's signed callbacks go to its own server on 127.0.0.1.
    teams_connector.route(host="127.0.0.1").pass_through()
    console = Console(record=True, width=200)
    assert await run_certificates_demo(runtime, seed=42, console=console), console.export_text()
    await upsert_principals(conn, PEOPLE)  # the demo registers the shipped principals, without chat identities
    cur = await conn.execute("SELECT entity FROM close_run WHERE workflow = 'certificates' ORDER BY entity")
    return [row[0] for row in await cur.fetchall()]


def texts(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


async def test_slack_payments_shows_every_certificate_to_a_controller_and_nothing_to_a_stranger(
    conn: Any, chat_api: Any, runtime: Any, fake_slack: Any, teams_connector: Any
) -> None:
    certificates = await payment_month(conn, runtime, teams_connector)
    for answers, user in enumerate(("U0ALICE", "U0MALLORY"), start=1):
        body = slash_command(f"payments {PERIOD}", user)
        assert (await chat_api.post("/slack/events", content=body, headers=slack_headers(body))).status_code == 200
        await wait_until(lambda n=answers: len(fake_slack.responses()) == n)
    card, refusal = fake_slack.responses()
    assert card["response_type"] == "in_channel"
    assert f"Payment runs {PERIOD}" in card["text"]
    shown = texts(card["blocks"])
    assert all(certificate in shown for certificate in certificates)
    assert "escalated: suspected manipulation of the books or the agents" in shown
    assert refusal["response_type"] == "ephemeral" and refusal["text"].startswith("Refused")
    assert not any(certificate in texts(refusal) for certificate in certificates)
    await asyncio.sleep(0.3)
    assert fake_slack.calls_to("chat.postMessage") == []
    assert [(r["user"], r["command"], r["reason"]) for r in await _refusals(conn)] == [
        ("U0MALLORY", "payments", "unknown_principal")
    ]


async def test_slack_payments_with_a_bad_month_gets_the_usage(conn: Any, chat_api: Any, fake_slack: Any) -> None:
    body = slash_command("payments June", "U0ALICE")
    await chat_api.post("/slack/events", content=body, headers=slack_headers(body))
    await wait_until(lambda: len(fake_slack.responses()) == 1)
    (answer,) = fake_slack.responses()
    assert answer["response_type"] == "ephemeral" and "/close payments [YYYY-MM]" in answer["text"]


async def test_teams_payments_answers_a_controller_with_the_card_and_a_stranger_with_a_refusal(
    conn: Any, chat_api: Any, runtime: Any, fake_teams_auth: Any, teams_connector: Any
) -> None:
    certificates = await payment_month(conn, runtime, teams_connector)
    before = len(teams_connector.calls)
    for aad in ("aad-alice", "aad-zed"):
        response = await chat_api.post(
            "/api/messages", json=message(f"close payments {PERIOD}", aad=aad), headers=_auth(fake_teams_auth)
        )
        assert response.status_code == 200, response.text
    card_reply, refusal = _replies(teams_connector, before)
    (attachment,) = card_reply["attachments"]
    assert attachment["contentType"] == "application/vnd.microsoft.card.adaptive"
    card = attachment["content"]
    assert card["type"] == "AdaptiveCard" and card["version"] == "1.5"
    assert all(certificate in texts(card) for certificate in certificates)
    assert "attachments" not in refusal and refusal["text"].startswith("Refused")
    assert [(r["user"], r["command"], r["tenant"]) for r in await _refusals(conn)] == [("aad-zed", "payments", TENANT)]
    assert await count(conn, "SELECT count(*) FROM close_run WHERE workflow = 'certificates'") == len(certificates)
