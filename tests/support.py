"""Helpers shared by tests: signed requests, principals, a loaded close."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
from psycopg import AsyncConnection

from callbacks.principals import parse_principals, upsert_principals
from callbacks.signature import sign
from countersign.runtime import Runtime
from countersign.settings import PROJECT_ROOT
from engine.books import load_books
from engine.closes import start_close

SECRET = "test-callback-secret"


def signed_headers(body: bytes, secret: str = SECRET, timestamp: int | None = None) -> dict[str, str]:
    stamp = str(int(time.time()) if timestamp is None else timestamp)
    return {
        "content-type": "application/json",
        "x-countersign-timestamp": stamp,
        "x-countersign-signature": sign(secret, stamp, body),
    }


def decision_body(principal: str, decision: str = "approve", nonce: str | None = None, **extra: Any) -> bytes:
    body = {
        "principal": principal,
        "decision": decision,
        "reason": "reviewed",
        "nonce": nonce or uuid.uuid4().hex,
    }
    body.update(extra)
    return json.dumps(body).encode()


async def post_decision(
    client: httpx.AsyncClient,
    gate_id: str,
    principal: str,
    decision: str = "approve",
    nonce: str | None = None,
) -> httpx.Response:
    body = decision_body(principal, decision, nonce)
    return await client.post(f"/callbacks/gates/{gate_id}/decisions", content=body, headers=signed_headers(body))


async def import_default_principals(conn: AsyncConnection[Any]) -> None:
    await upsert_principals(conn, parse_principals(PROJECT_ROOT / "config" / "principals.yaml"))


async def start_default_close(conn: AsyncConnection[Any], runtime: Runtime, books: Path) -> str:
    await import_default_principals(conn)
    loaded = await load_books(conn, books, loaded_by="test")
    return await start_close(
        conn,
        entity=loaded.entity,
        period=loaded.period,
        book_set_id=loaded.book_set_id,
        policy=runtime.policy,
        checklist=runtime.checklist,
        started_by="test-starter",
    )


async def count(conn: AsyncConnection[Any], sql: str, *params: Any) -> int:
    async with conn.cursor() as cur:
        await cur.execute(sql, params)
        row = await cur.fetchone()
    assert row is not None
    return int(row[0])
