"""The passkey tables' statements (countersign.store.passkeys) against real PostgreSQL, as the callbacks role runs
them: an enrolment opens once, a challenge answers once, a revoked passkey is no longer live and ends its sessions,
and a sign count only rises."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest
import pytest_asyncio

from countersign.states import ChallengePurpose, PrincipalKind
from countersign.store import passkeys as store
from countersign.store.principals import Principal, read_active_human_id, upsert_principal
from tests.support import count, import_default_principals

CREDENTIAL = "cred-" + "A" * 20
PUBLIC_KEY = b"k" * 32


@pytest_asyncio.fixture
async def callbacks(database: Any, conn: Any) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    """A connection as the callbacks role, with the shipped principals imported (as the owner)."""
    await import_default_principals(conn)
    async with await psycopg.AsyncConnection.connect(database.callbacks_url, autocommit=True) as connection:
        yield connection


async def _enrolled(conn: Any, callbacks: Any, principal: str = "alice.chen", credential: str = CREDENTIAL) -> bytes:
    """Enrol `credential` for the principal (the owner issues, the callbacks role redeems); returns the token."""
    token = secrets.token_urlsafe(32).encode()
    await store.insert_enrolment(conn, principal, hashlib.sha256(token).digest(), issued_by="test-owner", hours=1)
    redeemed = await store.redeem_enrolment(
        callbacks, token, credential_id=credential, public_key=PUBLIC_KEY, label="laptop"
    )
    assert redeemed == principal
    return token


async def test_an_enrolment_opens_for_its_token_until_it_is_redeemed_once(conn: Any, callbacks: Any) -> None:
    token = secrets.token_urlsafe(32).encode()
    enrolment_id = await store.insert_enrolment(
        conn, "alice.chen", hashlib.sha256(token).digest(), issued_by="test-owner", hours=2
    )
    enrolment = await store.read_enrolment(callbacks, token)
    assert enrolment is not None
    assert (enrolment.enrolment_id, enrolment.principal_id) == (enrolment_id, "alice.chen")
    assert len(enrolment.user_handle) == 16
    assert await store.read_enrolment(callbacks, b"another token") is None

    credential = await store.redeem_enrolment(
        callbacks, token, credential_id=CREDENTIAL, public_key=PUBLIC_KEY, label="laptop"
    )
    assert credential == "alice.chen"
    assert await store.read_enrolment(callbacks, token) is None  # used
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="already used"):
        await store.redeem_enrolment(
            callbacks, token, credential_id="cred-" + "B" * 20, public_key=PUBLIC_KEY, label="x"
        )


async def test_a_revoked_passkey_is_not_live_but_still_listed_and_ends_its_sessions(conn: Any, callbacks: Any) -> None:
    await _enrolled(conn, callbacks)
    live = await store.live_passkey(callbacks, CREDENTIAL)
    assert live is not None and live.principal_id == "alice.chen" and live.revoked_at is None
    session = hashlib.sha256(b"session token").digest()
    await store.insert_session(
        callbacks, session, principal_id="alice.chen", credential_id=CREDENTIAL, csrf_token="c" * 43, hours=1
    )
    assert await store.read_session(callbacks, session) is not None

    assert await store.revoke_passkey(callbacks, "bob.osei", CREDENTIAL) is False  # not bob's
    assert await store.live_passkey(callbacks, CREDENTIAL) is not None
    assert await store.revoke_passkey(callbacks, "alice.chen", CREDENTIAL) is True
    assert await store.live_passkey(callbacks, CREDENTIAL) is None
    assert await store.revoke_passkey(callbacks, "alice.chen", CREDENTIAL) is False  # already revoked
    (listed,) = await store.passkeys_of(callbacks, "alice.chen")
    assert listed.credential_id == CREDENTIAL and listed.revoked_at is not None
    assert await store.read_session(callbacks, session) is None
    assert await count(conn, "SELECT count(*) FROM board_session WHERE ended_at IS NOT NULL") == 1


async def test_a_passkey_of_an_inactive_person_is_not_live(conn: Any, callbacks: Any) -> None:
    await _enrolled(conn, callbacks)
    await conn.execute("UPDATE principal SET active = false WHERE principal_id = 'alice.chen'")
    assert await store.live_passkey(callbacks, CREDENTIAL) is None
    assert [k.credential_id for k in await store.passkeys_of(callbacks, "alice.chen")] == [CREDENTIAL]


async def test_a_sign_count_only_rises(conn: Any, callbacks: Any) -> None:
    await _enrolled(conn, callbacks)
    await store.record_passkey_use(callbacks, CREDENTIAL, 3)
    live = await store.live_passkey(callbacks, CREDENTIAL)
    assert live is not None and live.sign_count == 3 and live.last_used_at is not None
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="not above 3"):
        await store.record_passkey_use(callbacks, CREDENTIAL, 3)
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="unknown or revoked"):
        await store.record_passkey_use(callbacks, "cred-" + "Z" * 20, 1)


async def test_a_challenge_answers_once_and_only_for_its_purpose(conn: Any, callbacks: Any) -> None:
    challenge = secrets.token_bytes(32)
    await store.insert_challenge(
        callbacks, challenge, ChallengePurpose.ENROL, principal_id="alice.chen", gate_id=None, message=None, seconds=60
    )
    assert await store.use_challenge(callbacks, challenge, ChallengePurpose.SIGN_IN) is None  # another purpose
    used = await store.use_challenge(callbacks, challenge, ChallengePurpose.ENROL)
    assert used is not None
    assert used.purpose is ChallengePurpose.ENROL  # the Enum, not the stored text
    assert (used.challenge, used.principal_id, used.gate_id, used.message) == (challenge, "alice.chen", None, None)
    assert await store.use_challenge(callbacks, challenge, ChallengePurpose.ENROL) is None  # a replay
    assert await store.use_challenge(callbacks, secrets.token_bytes(32), ChallengePurpose.ENROL) is None  # never issued


async def test_live_sign_ins_are_counted_up_to_the_limit_and_expired_challenges_swept(
    conn: Any, callbacks: Any
) -> None:
    for _ in range(4):
        await store.insert_challenge(
            callbacks,
            secrets.token_bytes(32),
            ChallengePurpose.SIGN_IN,
            principal_id=None,
            gate_id=None,
            message=None,
            seconds=60,
        )
    enrol = secrets.token_bytes(32)
    await store.insert_challenge(
        callbacks, enrol, ChallengePurpose.ENROL, principal_id="alice.chen", gate_id=None, message=None, seconds=60
    )
    assert await store.count_live_sign_ins(callbacks, 100) == 4  # the enrolment's challenge is no sign-in
    assert await store.count_live_sign_ins(callbacks, 3) == 3  # counted no further than the limit
    await conn.execute(
        "UPDATE webauthn_challenge SET created_at = now() - interval '1 hour',"
        " expires_at = now() - interval '55 minutes' WHERE purpose = 'sign_in'"
    )
    assert await store.count_live_sign_ins(callbacks, 100) == 0
    assert await store.use_challenge(callbacks, enrol, ChallengePurpose.ENROL) is not None  # used, not expired
    await store.sweep_expired_challenges(callbacks, 3)
    assert await count(conn, "SELECT count(*) FROM webauthn_challenge") == 2  # at most 3 swept per call
    await store.sweep_expired_challenges(callbacks, 3)
    assert await count(conn, "SELECT count(*) FROM webauthn_challenge") == 1  # the used, unexpired one stays


async def test_a_session_shows_its_person_until_it_ends(conn: Any, callbacks: Any) -> None:
    await _enrolled(conn, callbacks)
    session = hashlib.sha256(b"session token").digest()
    await store.insert_session(
        callbacks, session, principal_id="alice.chen", credential_id=CREDENTIAL, csrf_token="c" * 43, hours=1
    )
    viewer = await store.read_session(callbacks, session)
    assert viewer is not None and viewer.csrf_token == "c" * 43
    assert viewer.kind is PrincipalKind.HUMAN and isinstance(viewer.roles, tuple)
    caller = viewer.caller
    assert (caller.principal_id, caller.is_human, caller.active) == ("alice.chen", True, True)
    assert await store.read_session(callbacks, hashlib.sha256(b"another").digest()) is None
    await store.end_session(callbacks, session)
    assert await store.read_session(callbacks, session) is None


async def test_only_an_active_human_may_be_given_an_enrolment(conn: Any) -> None:
    await import_default_principals(conn)
    async with conn.transaction(), conn.cursor() as cur:
        assert await upsert_principal(cur, Principal("close-bot", PrincipalKind.MACHINE, "Close bot", ()))
    assert await read_active_human_id(conn, "alice.chen") == "alice.chen"
    assert await read_active_human_id(conn, "close-bot") is None
    assert await read_active_human_id(conn, "nobody.at.all") is None
    await conn.execute("UPDATE principal SET active = false WHERE principal_id = 'alice.chen'")
    assert await read_active_human_id(conn, "alice.chen") is None
