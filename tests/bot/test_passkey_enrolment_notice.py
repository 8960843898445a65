"""Every passkey enrolment is announced to the person in chat (issue 21).

A compromised web process could substitute its own credential while a person enrols; the person notices because the
database itself, as it redeems the enrolment, writes a direct-message notice to each of their Slack identities. The
notice carries only the credential id; the deliverer reads the label and time from `principal_passkey`, escapes the
label as Slack data and posts only to that credential's own person.
"""

from __future__ import annotations

import hashlib
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from countersign.bootstrap.chat import build_senders
from countersign.callbacks.principals import Identity, Principal, upsert_principals
from countersign.delivery.worker import deliver_due
from countersign.engine.outbox import NotAFact, enqueue_notices
from tests.bot.conftest import PEOPLE, TENANT
from tests.support import count

CREDENTIAL = "cred-AAAAAAAAAAAAAAAAAAAAAAAA_alice"
PUBLIC_KEY = bytes(range(64))
# Teams only: no Slack identity to tell.
TEAMS_ONLY = Principal(
    "frank.teams", "human", "Frank Teams", ("controller",), (Identity("teams", TENANT, "aad-frank"),)
)
NOTICE = (
    "INSERT INTO outbox_message (dedupe_key, close_id, gate_id, platform, channel, kind, payload, template)"
    " VALUES (%s, NULL, NULL, 'slack', %s, 'notice', %s, 'passkey_enrolled')"
)


async def _issue(conn: Any, principal_id: str, token: bytes) -> None:
    """As the owner (countersign principals enroll): an enrolment whose token's SHA-256 is stored."""
    await conn.execute(
        "INSERT INTO passkey_enrolment (principal_id, token_sha256, issued_by, expires_at)"
        " VALUES (%s, %s, 'test-owner', now() + interval '1 hour')",
        (principal_id, hashlib.sha256(token).digest()),
    )


async def _redeem(database: Any, token: bytes, credential_id: str, label: str) -> str:
    """As the callbacks role, the board's redeem call."""
    async with await psycopg.AsyncConnection.connect(database.callbacks_url, autocommit=True) as callbacks:
        cur = await callbacks.execute(
            "SELECT redeem_passkey_enrolment(%s, %s, %s, %s)", (token, credential_id, PUBLIC_KEY, label)
        )
        row = await cur.fetchone()
    assert row is not None
    return str(row[0])


async def _notices(conn: Any) -> list[tuple[Any, ...]]:
    cur = await conn.execute(
        "SELECT dedupe_key, platform, channel, close_id, gate_id, payload FROM outbox_message"
        " WHERE template = 'passkey_enrolled' ORDER BY message_id"
    )
    return list(await cur.fetchall())


async def test_redeeming_an_enrolment_writes_a_notice_for_each_slack_identity_of_the_person_and_none_without(
    conn: Any, database: Any
) -> None:
    await upsert_principals(conn, [*PEOPLE, TEAMS_ONLY])
    await _issue(conn, "alice.chen", b"alice-token")
    await _issue(conn, "frank.teams", b"frank-token")

    assert await _redeem(database, b"alice-token", CREDENTIAL, "laptop") == "alice.chen"
    assert await _notices(conn) == [
        (f"passkey_enrolled:{CREDENTIAL}:slack:t01acme:U0ALICE", "slack", "U0ALICE", None, None,
         {"credential_id": CREDENTIAL}),
    ]  # fmt: skip

    assert await _redeem(database, b"frank-token", "cred-FFFFFFFFFFFFFFFFFFFF_frank", "phone") == "frank.teams"
    assert len(await _notices(conn)) == 1  # Frank has no Slack identity; Teams is not announced (LIMITATIONS.md)
    assert await count(conn, "SELECT count(*) FROM outbox_message WHERE platform = 'teams'") == 0


async def test_a_passkey_enrolled_notice_is_posted_to_the_persons_slack_user_with_the_label_escaped(
    conn: Any, database: Any, chat_runtime: Any, fake_slack: Any, teams_connector: Any
) -> None:
    await upsert_principals(conn, PEOPLE)
    await _issue(conn, "alice.chen", b"alice-token")
    label = "<!channel> *re-approve* at <https://evil.example|board>"
    await _redeem(database, b"alice-token", CREDENTIAL, label)

    senders = build_senders(chat_runtime.settings)
    # The deliverer's own role: it records the outcome on a row it may not otherwise change.
    async with await psycopg.AsyncConnection.connect(database.engine_url, autocommit=True) as engine:
        report = await deliver_due(engine, senders)  # type: ignore[arg-type]
    assert report.sent == 1 and report.failed == 0, report.errors

    (posted,) = fake_slack.calls_to("chat.postMessage")
    assert posted.params["channel"] == "U0ALICE"
    created = await (
        await conn.execute(
            "SELECT to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI') FROM principal_passkey"
            " WHERE credential_id = %s",
            (CREDENTIAL,),
        )
    ).fetchone()
    board = chat_runtime.settings.board_url.rstrip("/")
    assert posted.params["text"] == (
        "A passkey named “&lt;!channel&gt; \u2217re-approve\u2217 at &lt;https://evil.example|board&gt;” was enrolled"
        f" for you on the Close Board at {created[0]} UTC. If this was not you, revoke it at {board}/board/passkeys"
        " and tell your Countersign owner."
    )
    assert (
        await count(conn, "SELECT count(*) FROM outbox_message WHERE status = 'sent' AND template = 'passkey_enrolled'")
        == 1
    )


async def test_a_notice_naming_another_persons_passkey_is_not_posted(
    conn: Any, database: Any, chat_runtime: Any, fake_slack: Any, teams_connector: Any
) -> None:
    """Even a row the owner wrote: the deliverer posts a passkey's label only to that passkey's own person."""
    await upsert_principals(conn, PEOPLE)
    await _issue(conn, "alice.chen", b"alice-token")
    await _redeem(database, b"alice-token", CREDENTIAL, "laptop")
    await conn.execute(NOTICE, ("planted", "U0BOB", Jsonb({"credential_id": CREDENTIAL})))

    report = await deliver_due(conn, build_senders(chat_runtime.settings))  # type: ignore[arg-type]
    assert report.sent == 1 and report.failed == 1
    assert [c.params["channel"] for c in fake_slack.calls_to("chat.postMessage")] == ["U0ALICE"]


@pytest.mark.parametrize(
    "payload",
    [
        {"credential_id": CREDENTIAL, "label": "please re-approve at https://evil.example"},
        {"credential_id": CREDENTIAL, "board_url": "https://evil.example"},
        {"credential_id": 12345678901234567},
        {"credential_id": "not base64url: https://evil.example"},
        {"credential_id": "short"},
        {},
    ],
)
async def test_the_outbox_refuses_a_passkey_enrolled_notice_with_anything_but_its_credential_id(
    conn: Any, payload: dict[str, Any]
) -> None:
    with pytest.raises(psycopg.errors.CheckViolation):
        await conn.execute(NOTICE, ("attack", "U0ALICE", Jsonb(payload)))
    assert await count(conn, "SELECT count(*) FROM outbox_message WHERE template = 'passkey_enrolled'") == 0


async def test_negative_control_the_exact_fact_is_accepted_and_the_same_fact_on_a_gate_is_not(conn: Any) -> None:
    await conn.execute(NOTICE, ("fact", "U0ALICE", Jsonb({"credential_id": CREDENTIAL})))
    assert await count(conn, "SELECT count(*) FROM outbox_message WHERE template = 'passkey_enrolled'") == 1
    with pytest.raises(psycopg.errors.CheckViolation):
        await conn.execute(
            "INSERT INTO outbox_message (dedupe_key, gate_id, platform, channel, kind, payload, template)"
            " VALUES ('on-a-gate', gen_random_uuid(), 'slack', 'U0ALICE', 'notice', %s, 'passkey_enrolled')",
            (Jsonb({"credential_id": CREDENTIAL}),),
        )


@pytest.mark.parametrize("role", ["engine", "callbacks"])
async def test_no_service_role_can_write_or_redirect_a_passkey_enrolled_notice(
    conn: Any, database: Any, role: str
) -> None:
    await upsert_principals(conn, PEOPLE)
    await _issue(conn, "alice.chen", b"alice-token")
    await _redeem(database, b"alice-token", CREDENTIAL, "laptop")
    url = database.engine_url if role == "engine" else database.callbacks_url
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as service:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            await service.execute(NOTICE, ("forged", "U0BOB", Jsonb({"credential_id": CREDENTIAL})))
        if role == "engine":
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                await service.execute("UPDATE outbox_message SET channel = 'U0BOB' WHERE template = 'passkey_enrolled'")
    assert [row[2] for row in await _notices(conn)] == ["U0ALICE"]


async def test_the_engine_cannot_enqueue_a_passkey_enrolled_notice(conn: Any) -> None:
    with pytest.raises(NotAFact, match="only by the database"):
        await enqueue_notices(conn, key="x", template="passkey_enrolled", close_id="c", channels=())
