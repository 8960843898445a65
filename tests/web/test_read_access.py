"""Attacks on `GET /closes/{id}` and the OpenAPI pages, which answered anyone before issue 9 (approver names,
reasons and amounts); and the CLI side of read access: tokens shown once, exports recorded in the trace."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from dataclasses import replace
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from countersign.audit.person_proof import public_key_raw, read_message, sign
from countersign.bootstrap.app import create_app
from countersign.bootstrap.settings import PROJECT_ROOT
from countersign.callbacks.callers import issue_token, revoke_tokens
from tests.support import count, start_default_close


@pytest.fixture
async def close_id(conn: Any, runtime: Any, default_books: Any) -> str:
    close = await start_default_close(conn, runtime, default_books)
    await conn.execute(
        "INSERT INTO principal (principal_id, kind, display_name, roles) VALUES"
        " ('erin.park', 'human', 'Erin Park', '{auditor}') ON CONFLICT DO NOTHING"
    )
    return close


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_reading_a_close_needs_credentials(api: Any, close_id: str) -> None:
    response = await api.get(f"/closes/{close_id}")
    assert response.status_code == 401
    assert "dana" not in response.text and "accruals" not in response.text
    for header in ("Basic YWxpY2U6cHc=", "Bearer ", "Bearer cs_not-a-token", "Bearer sk_other"):
        assert (await api.get(f"/closes/{close_id}", headers={"Authorization": header})).status_code == 401


async def test_an_unknown_close_is_404_only_after_authentication(api: Any, conn: Any, close_id: str) -> None:
    unknown = "00000000-0000-0000-0000-000000000000"
    assert (await api.get(f"/closes/{unknown}")).status_code == 401
    token = await issue_token(conn, "erin.park")
    assert (await api.get(f"/closes/{unknown}", headers=_bearer(token))).status_code == 404


async def test_a_revoked_token_is_401(api: Any, conn: Any, close_id: str) -> None:
    token = await issue_token(conn, "alice.chen")
    assert (await api.get(f"/closes/{close_id}", headers=_bearer(token))).status_code == 200
    assert await revoke_tokens(conn, "alice.chen") == 1
    assert (await api.get(f"/closes/{close_id}", headers=_bearer(token))).status_code == 401


async def test_a_token_of_a_principal_without_a_read_role_is_403(api: Any, conn: Any, close_id: str) -> None:
    token = await issue_token(conn, "dana.reyes")  # accountant: prepares work, reads no close over HTTP
    response = await api.get(f"/closes/{close_id}", headers=_bearer(token))
    assert response.status_code == 403 and "missing_role" in response.text
    machine = await issue_token(conn, "orchestrator")
    assert (await api.get(f"/closes/{close_id}", headers=_bearer(machine))).status_code == 403
    inactive = await issue_token(conn, "alice.chen")
    await conn.execute("UPDATE principal SET active = false WHERE principal_id = 'alice.chen'")
    assert (await api.get(f"/closes/{close_id}", headers=_bearer(inactive))).status_code == 403


@pytest.mark.parametrize("principal", ["erin.park", "alice.chen", "carol.main"])  # auditor, controller, cfo approver
async def test_a_valid_token_of_a_reader_is_200(api: Any, conn: Any, close_id: str, principal: str) -> None:
    token = await issue_token(conn, principal)
    response = await api.get(f"/closes/{close_id}", headers=_bearer(token))
    assert response.status_code == 200 and response.json()["close_id"] == close_id
    digest = hashlib.sha256(token.encode()).digest()
    assert await count(conn, "SELECT count(*) FROM api_token WHERE token_sha256 = %s", digest) == 1  # only the hash


def _signed(key: Ed25519PrivateKey, principal: str, path: str, signed_at: int | None = None) -> dict[str, str]:
    at = int(time.time()) if signed_at is None else signed_at
    signature = sign(key, read_message(method="GET", path=path, principal=principal, signed_at=at))
    return {
        "X-Countersign-Principal": principal,
        "X-Countersign-Signed-At": str(at),
        "X-Countersign-Person-Signature": signature,
    }


async def test_a_persons_signed_request_reads_and_a_forged_one_does_not(api: Any, conn: Any, close_id: str) -> None:
    key, other = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    await conn.execute("UPDATE principal SET public_key = %s WHERE principal_id = 'erin.park'", (public_key_raw(key),))
    path = f"/closes/{close_id}"
    assert (await api.get(path, headers=_signed(key, "erin.park", path))).status_code == 200
    assert (await api.get(path, headers=_signed(other, "erin.park", path))).status_code == 401  # someone else's key
    assert (await api.get(path, headers=_signed(key, "erin.park", "/closes/x"))).status_code == 401  # other path
    stale = _signed(key, "erin.park", path, signed_at=int(time.time()) - 301)
    assert (await api.get(path, headers=stale)).status_code == 401
    assert (await api.get(path, headers=_signed(key, "alice.chen", path))).status_code == 401  # alice has no key
    partial = {k: v for k, v in _signed(key, "erin.park", path).items() if k != "X-Countersign-Signed-At"}
    assert (await api.get(path, headers=partial)).status_code == 401


@pytest.mark.parametrize("path", ["/docs", "/openapi.json", "/redoc"])
async def test_openapi_pages_are_off_by_default(api: Any, runtime: Any, path: str) -> None:
    assert (await api.get(path)).status_code == 404
    app = create_app(replace(runtime, settings=runtime.settings.model_copy(update=dict(openapi=True))))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://countersign.test") as on:
        assert (await on.get(path)).status_code == 200


def _cli(database: Any, *args: str) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "DATABASE_URL": database.url, "COUNTERSIGN_CONFIG_DIR": str(PROJECT_ROOT / "config")}
    return subprocess.run(
        [sys.executable, "-m", "countersign.cli.main", *args], env=env, capture_output=True, timeout=120
    )


async def test_cli_token_is_printed_once_and_reads_and_cli_export_is_a_trace_event(
    api: Any, conn: Any, database: Any, close_id: str
) -> None:
    done = _cli(database, "principals", "token", "erin.park")
    assert done.returncode == 0, done.stderr
    token = done.stdout.decode().strip()
    assert token.startswith("cs_")
    assert (await api.get(f"/closes/{close_id}", headers=_bearer(token))).status_code == 200
    assert _cli(database, "principals", "token", "nobody").returncode == 2

    exported = _cli(database, "trace", "export", "--close", close_id, "--format", "csv")
    assert exported.returncode == 0, exported.stderr
    cur = await conn.execute("SELECT actor, payload, writer FROM trace_event WHERE kind = 'trace_exported'")
    ((actor, payload, writer),) = await cur.fetchall()
    assert actor == "countersign-cli" and writer != "countersign_engine"
    assert payload == {
        "close_id": close_id,
        "format": "csv",
        "sha256": hashlib.sha256(exported.stdout).hexdigest(),
        "bytes": len(exported.stdout),
        "platform": "cli",
    }
