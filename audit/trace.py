"""The close trace: one append-only, hash-chained log of everything that happened.

`hash(n) = SHA-256(hash(n-1) || canonical(event n))`, with 32 zero bytes before the first event. Sequence
numbers are gap-free because they come from the locked head row, inside the transaction that records the
effect, not from a Postgres sequence (which skips on rollback).
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from psycopg import AsyncConnection
from psycopg.types.json import Jsonb

from .canonical import canonical_bytes, normalise

GENESIS_HASH = bytes(32)
VERIFY_BATCH_ROWS = 5_000


@dataclass(frozen=True)
class TraceEvent:
    seq: int
    recorded_at: str
    close_id: str | None
    actor: str
    kind: str
    payload: Mapping[str, Any]
    versions: Mapping[str, Any]
    prev_hash: bytes
    hash: bytes

    def body(self) -> dict[str, Any]:
        return event_body(self.seq, self.recorded_at, self.close_id, self.actor, self.kind, self.payload, self.versions)


@dataclass(frozen=True)
class VerifyResult:
    ok: bool
    size: int
    head_hash: bytes
    first_bad_seq: int | None = None
    problem: str | None = None


def event_body(
    seq: int,
    recorded_at: str,
    close_id: str | None,
    actor: str,
    kind: str,
    payload: Mapping[str, Any],
    versions: Mapping[str, Any],
) -> dict[str, Any]:
    return {
        "seq": seq,
        "recorded_at": recorded_at,
        "close_id": close_id,
        "actor": actor,
        "kind": kind,
        "payload": dict(payload),
        "versions": dict(versions),
    }


def chain_hash(prev_hash: bytes, body: Mapping[str, Any]) -> bytes:
    return hashlib.sha256(prev_hash + canonical_bytes(body)).digest()


def utc_timestamp(now: datetime | None = None) -> str:
    moment = (now or datetime.now(UTC)).astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


async def append_event(
    conn: AsyncConnection[Any],
    *,
    actor: str,
    kind: str,
    payload: Mapping[str, Any],
    close_id: UUID | str | None = None,
    versions: Mapping[str, Any] | None = None,
) -> TraceEvent:
    """Append one event inside the caller's transaction; it commits or rolls back with the effect it records."""
    clean_payload = normalise(dict(payload))
    clean_versions = normalise(dict(versions or {}))
    close = str(close_id) if close_id is not None else None
    async with conn.cursor() as cur:
        await cur.execute("SELECT seq, hash FROM trace_head WHERE singleton FOR UPDATE")
        head = await cur.fetchone()
        if head is None:
            raise RuntimeError("trace_head row is missing: the audit schema is not migrated")
        prev_seq, prev_hash = int(head[0]), bytes(head[1])
        seq = prev_seq + 1
        recorded_at = utc_timestamp()
        body = event_body(seq, recorded_at, close, actor, kind, clean_payload, clean_versions)
        digest = chain_hash(prev_hash, body)
        await cur.execute(
            "INSERT INTO trace_event (seq, recorded_at, close_id, actor, kind, payload, versions, prev_hash, hash)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (
                seq,
                recorded_at,
                close,
                actor,
                kind,
                Jsonb(clean_payload),
                Jsonb(clean_versions),
                prev_hash,
                digest,
            ),
        )
        await cur.execute("UPDATE trace_head SET seq = %s, hash = %s WHERE singleton", (seq, digest))
    return TraceEvent(seq, recorded_at, close, actor, kind, clean_payload, clean_versions, prev_hash, digest)


def _row_to_event(row: tuple[Any, ...]) -> TraceEvent:
    seq, recorded_at, close_id, actor, kind, payload, versions, prev_hash, digest = row
    return TraceEvent(
        int(seq),
        str(recorded_at),
        str(close_id) if close_id is not None else None,
        str(actor),
        str(kind),
        payload,
        versions,
        bytes(prev_hash),
        bytes(digest),
    )


async def iter_events(conn: AsyncConnection[Any], *, close_id: UUID | str | None = None) -> AsyncIterator[TraceEvent]:
    """Events in sequence order, read in bounded batches."""
    after = 0
    while True:
        async with conn.cursor() as cur:
            if close_id is None:
                await cur.execute(
                    "SELECT seq, recorded_at, close_id, actor, kind, payload, versions, prev_hash, hash"
                    " FROM trace_event WHERE seq > %s ORDER BY seq LIMIT %s",
                    (after, VERIFY_BATCH_ROWS),
                )
            else:
                await cur.execute(
                    "SELECT seq, recorded_at, close_id, actor, kind, payload, versions, prev_hash, hash"
                    " FROM trace_event WHERE seq > %s AND close_id = %s ORDER BY seq LIMIT %s",
                    (after, str(close_id), VERIFY_BATCH_ROWS),
                )
            rows = await cur.fetchall()
        if not rows:
            return
        for row in rows:
            event = _row_to_event(row)
            after = event.seq
            yield event


async def verify_chain(conn: AsyncConnection[Any]) -> VerifyResult:
    """Recompute the whole chain from the database; name the first sequence number that diverges."""
    expected_prev = GENESIS_HASH
    expected_seq = 1
    async for event in iter_events(conn):
        if event.seq != expected_seq:
            return VerifyResult(
                False, expected_seq - 1, expected_prev, expected_seq, f"sequence gap: found {event.seq}"
            )
        if event.prev_hash != expected_prev:
            return VerifyResult(False, expected_seq - 1, expected_prev, event.seq, "prev_hash does not link")
        recomputed = chain_hash(expected_prev, event.body())
        if recomputed != event.hash:
            return VerifyResult(
                False, expected_seq - 1, expected_prev, event.seq, "event content does not match its hash"
            )
        expected_prev = event.hash
        expected_seq += 1
    async with conn.cursor() as cur:
        await cur.execute("SELECT seq, hash FROM trace_head WHERE singleton")
        head = await cur.fetchone()
    size = expected_seq - 1
    if head is None or int(head[0]) != size or bytes(head[1]) != expected_prev:
        return VerifyResult(False, size, expected_prev, size + 1, "head does not match the last event")
    return VerifyResult(True, size, expected_prev)
