"""The trace's statements: its queue, its sealed events and head, each close's version set, its signed checkpoints.

Reads and writes `trace_pending` (the queue `append_event` writes to), `trace_event` and `trace_head` (the sealed log,
written only by the owner's `trace_claim_pending` and `trace_seal_claimed`, which this module calls), `trace_context`
(a close's version set) and `trace_checkpoint` (the signed tree heads), and takes the sealer's advisory lock. Called by
countersign/audit/trace.py and countersign/audit/transparency_log.py, which own the chain, the hashing and the Merkle
tree; the drills' counts (`close_event_counts`), the metrics (`log_progress`) and the delivery of checkpoint notes
(`checkpoint_note`) read here directly. Every function runs on the caller's connection, inside the caller's
transaction.

A sealed event read as a `TraceEventRow` carries its kind as a `TraceKind`; the database admits any word there, so a
word `TraceKind` does not name is refused with `UnknownTraceKind`. The sealer's and the verifier's rows
(`ClaimedEvent`, and the plain tuples of `iter_sealed_rows`) keep the kind as the stored word: they hash what is
stored, whatever it is.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from contextlib import aclosing, asynccontextmanager
from dataclasses import dataclass
from typing import Any, TypeVar, cast
from uuid import UUID

import orjson
from psycopg import AsyncConnection, pq
from psycopg.rows import BaseRowFactory, RowMaker, class_row, scalar_row
from psycopg.types.json import Jsonb, set_json_loads

from countersign.states import TraceKind

READ_BATCH_ROWS = 5_000
STREAM_CHUNK_ROWS = 250  # about 170 kB a chunk: what a socket buffer holds while the previous chunk is hashed
CHUNKED_ROWS_LIBPQ = 170_000  # libpq's chunked-rows mode (PQsetChunkedRowsMode) came with version 17
SEAL_LOCK = 0x436F756E74657273  # pg advisory lock key for the sealer ("Counters")
EVENT_COLUMNS = "seq, ts, close_id::text AS close_id, actor, kind, payload, version_set, prev_hash, hash, writer"
SEALED_COLUMNS = (
    "seq, ts, close_id::text AS close_id, actor, kind, payload::text AS payload, version_set::text AS version_set,"
    " prev_hash, hash, writer"
)  # in StoredEventText's order


class UnknownTraceKind(ValueError):
    """A sealed event whose kind is a word `TraceKind` does not name."""

    def __init__(self, seq: int, word: str) -> None:
        super().__init__(f"trace event {seq} has kind {word!r}, which is not a trace kind countersign knows")
        self.seq = seq
        self.word = word


# --- the queue ---------------------------------------------------------------------------------------------------


async def queue_event(
    conn: AsyncConnection[Any],
    *,
    ts: str,
    close_id: UUID | str | None,
    actor: str,
    kind: TraceKind,
    payload: Any,
    versions: Any,
) -> int:
    """Insert one event into `trace_pending` (payload and version set already normalised); its pending id."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute(
            "INSERT INTO trace_pending (ts, close_id, actor, kind, payload, version_set)"
            " VALUES (%s, %s, %s, %s, %s, %s) RETURNING pending_id",
            (
                ts,
                str(close_id) if close_id is not None else None,
                actor,
                str(kind),  # the stored word (a TraceKind's value)
                Jsonb(payload, dumps=orjson.dumps),
                Jsonb(versions, dumps=orjson.dumps),
            ),
        )
        pending_id: int | None = await cur.fetchone()
    assert pending_id is not None
    return pending_id


async def insert_close_versions(conn: AsyncConnection[Any], close_id: UUID | str, version_set: Any) -> None:
    """Record a close's version set (already normalised) in `trace_context`, once: a second call leaves the first."""
    async with conn.cursor() as cur:
        await cur.execute(
            "INSERT INTO trace_context (close_id, version_set) VALUES (%s, %s) ON CONFLICT (close_id) DO NOTHING",
            (str(close_id), Jsonb(version_set, dumps=orjson.dumps)),
        )


async def has_pending(conn: AsyncConnection[Any]) -> bool:
    """Whether any event waits in `trace_pending`."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute("SELECT EXISTS (SELECT 1 FROM trace_pending)")
        more: bool | None = await cur.fetchone()
    return bool(more)


# --- sealing -----------------------------------------------------------------------------------------------------


async def try_seal_lock(conn: AsyncConnection[Any]) -> bool:
    """Take the sealer's advisory lock for the caller's transaction if no one holds it; whether it was taken."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute("SELECT pg_try_advisory_xact_lock(%s)", (SEAL_LOCK,))
        locked: bool | None = await cur.fetchone()
    return bool(locked)


async def take_seal_lock(conn: AsyncConnection[Any]) -> None:
    """Take the sealer's advisory lock for the caller's transaction, waiting for whoever holds it."""
    async with conn.cursor() as cur:
        await cur.execute("SELECT pg_advisory_xact_lock(%s)", (SEAL_LOCK,))


@dataclass(frozen=True, slots=True)
class ClaimedEvent:
    """One queued event claimed for sealing, with the head of the log it will follow (the same on every row).

    `kind` is the word as queued: the sealer hashes it as it is."""

    head_seq: int
    head_hash: bytes
    pending_id: int
    ts: str
    close_id: str | None
    actor: str
    kind: str
    payload: Mapping[str, Any]
    version_set: Mapping[str, Any]
    writer: str | None


async def claim_pending(conn: AsyncConnection[Any], limit: int) -> list[ClaimedEvent]:
    """Up to `limit` queued events, oldest first, claimed by `trace_claim_pending` (under the sealer's lock)."""
    async with conn.cursor(row_factory=class_row(ClaimedEvent)) as cur:
        set_json_loads(orjson.loads, cur)  # jsonb to Python with orjson: the same values, several times faster
        await cur.execute(
            "SELECT head_seq, head_hash, pending_id, ts, close_id::text AS close_id, actor, kind, payload, version_set,"
            " writer FROM trace_claim_pending(%s)",
            (limit,),
        )
        return await cur.fetchall()


async def seal_claimed(
    conn: AsyncConnection[Any], ids: list[int], canonicals: list[bytes], hashes: list[bytes]
) -> None:
    """Hand the claimed events' canonical bytes and chain hashes to `trace_seal_claimed`, which checks, chains and
    moves them to `trace_event`."""
    async with conn.cursor() as cur:
        # Binary parameters: two arrays of thousands of byte strings go as they are, not escaped as text.
        await cur.execute(
            "SELECT trace_seal_claimed(%b::bigint[], %b::bytea[], %b::bytea[])", (ids, canonicals, hashes)
        )


# --- the sealed log ----------------------------------------------------------------------------------------------


@asynccontextmanager
async def snapshot(conn: AsyncConnection[Any]) -> AsyncIterator[None]:
    """A read-only REPEATABLE READ transaction: every read inside it sees the same log. `conn` must be idle."""
    async with conn.transaction():
        await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        yield


@dataclass(frozen=True)
class TraceEventRow:
    """A sealed event as `trace_event` holds it, its JSON columns as Python values."""

    seq: int
    ts: str
    close_id: str | None
    actor: str
    kind: TraceKind
    payload: Mapping[str, Any]
    version_set: Mapping[str, Any]
    prev_hash: bytes
    hash: bytes
    writer: str | None = None


E = TypeVar("E", bound=TraceEventRow)


def trace_kind(seq: int, word: str) -> TraceKind:
    """The stored word as a TraceKind; UnknownTraceKind naming the event when it is none."""
    try:
        return TraceKind(word)
    except ValueError:
        raise UnknownTraceKind(seq, word) from None


def _event_rows(row: type[E]) -> BaseRowFactory[E]:
    """Rows of EVENT_COLUMNS as `row` (a TraceEventRow), the kind as a TraceKind."""

    def factory(cursor: Any) -> RowMaker[E]:
        def make(values: Sequence[Any]) -> E:
            seq, ts, close_id, actor, kind, payload, version_set, prev_hash, digest, writer = values
            return row(seq, ts, close_id, actor, trace_kind(seq, kind), payload, version_set, prev_hash, digest, writer)

        return make

    return factory


async def iter_events(
    conn: AsyncConnection[Any],
    row: type[E],
    *,
    close_id: UUID | str | None = None,
    after_seq: int = 0,
    upto_seq: int | None = None,
) -> AsyncIterator[E]:
    """Sealed events (of one close, or all) in sequence order, as `row`, read in READ_BATCH_ROWS keyset pages."""
    after = after_seq
    while True:
        async with conn.cursor(row_factory=_event_rows(row)) as cur:
            await cur.execute(
                f"SELECT {EVENT_COLUMNS} FROM trace_event WHERE seq > %s AND (%s::bigint IS NULL OR seq <= %s)"
                " AND (%s::uuid IS NULL OR close_id = %s::uuid) ORDER BY seq LIMIT %s",
                (
                    after,
                    upto_seq,
                    upto_seq,
                    None if close_id is None else str(close_id),
                    None if close_id is None else str(close_id),
                    READ_BATCH_ROWS,
                ),
            )
            rows = await cur.fetchall()
        if not rows:
            return
        for event in rows:
            after = event.seq
            yield event


@dataclass(frozen=True, slots=True)
class StoredEventText:
    """A sealed event as stored, its JSON columns as text: what the verifier canonicalises. `kind` is the stored
    word, whatever it is (the verifier hashes what is stored)."""

    seq: int
    ts: str
    close_id: str | None
    actor: str
    kind: str
    payload: str
    version_set: str
    prev_hash: bytes
    hash: bytes
    writer: str | None


async def iter_sealed_rows(
    conn: AsyncConnection[Any], *, after_seq: int = 0, upto_seq: int | None = None, streamed: bool = False
) -> AsyncGenerator[list[tuple[Any, ...]], None]:
    """Sealed events after `after_seq` in sequence order, as pages of plain tuples in StoredEventText's field order
    (JSON columns as text: no Python objects per value), read in READ_BATCH_ROWS keyset pages.

    `streamed`: the same rows from one statement whose result PostgreSQL streams in STREAM_CHUNK_ROWS-row pages (libpq
    17's chunked rows; the keyset pages where libpq is older), so the server produces the next page while the caller
    works on this one. The connection is busy until the last row: consume every page, or close the iterator
    (`contextlib.aclosing`) before anything else uses `conn` — an exception in the caller's loop included."""
    if streamed and pq.version() >= CHUNKED_ROWS_LIBPQ:
        async with aclosing(_streamed_sealed_rows(conn, after_seq, upto_seq)) as pages:
            async for rows in pages:
                yield rows
        return
    after = after_seq
    query = (
        f"SELECT {SEALED_COLUMNS} FROM trace_event WHERE seq > %s AND (%s::bigint IS NULL OR seq <= %s)"
        " ORDER BY seq LIMIT %s"
    )
    while True:
        async with conn.cursor() as cur:
            await cur.execute(query, (after, upto_seq, upto_seq, READ_BATCH_ROWS))
            rows = await cur.fetchall()
        if not rows:
            return
        yield rows
        after = rows[-1][0]


async def _streamed_sealed_rows(
    conn: AsyncConnection[Any], after_seq: int, upto_seq: int | None
) -> AsyncGenerator[list[tuple[Any, ...]], None]:
    query = (
        f"SELECT {SEALED_COLUMNS} FROM trace_event WHERE seq > %s AND (%s::bigint IS NULL OR seq <= %s) ORDER BY seq"
    )
    params = (after_seq, upto_seq, upto_seq)
    async with (
        conn.cursor() as cur,
        # closed here, not by the garbage collector: until it is, it holds the connection's lock (psycopg types
        # `stream` as an iterator; it is an async generator)
        aclosing(
            cast(AsyncGenerator[tuple[Any, ...], None], cur.stream(query, params, size=STREAM_CHUNK_ROWS))
        ) as stream,
    ):
        page: list[tuple[Any, ...]] = []
        async for row in stream:
            page.append(row)
            if len(page) == STREAM_CHUNK_ROWS:
                yield page
                page = []
        if page:
            yield page


@dataclass(frozen=True, slots=True)
class TraceHead:
    seq: int
    hash: bytes


async def read_head(conn: AsyncConnection[Any]) -> TraceHead | None:
    """The last sealed event's sequence number and hash (`trace_head`'s singleton; 0 and 32 zero bytes when empty)."""
    async with conn.cursor(row_factory=class_row(TraceHead)) as cur:
        await cur.execute("SELECT seq, hash FROM trace_head WHERE singleton")
        return await cur.fetchone()


@dataclass(frozen=True)
class CloseEventCounts:
    """How often the once-only events of a close appear in the sealed trace, and how much is still unsealed."""

    journals_posted: int
    periods_closed: int
    gates_opened: int
    tasks_not_done_once: int  # tasks whose `task_done` event appears other than exactly once
    unsealed: int  # events queued in trace_pending (any close): zero once sealing caught up


async def close_event_counts(conn: AsyncConnection[Any], close_id: UUID | str) -> CloseEventCounts:
    async with conn.cursor(row_factory=class_row(CloseEventCounts)) as cur:
        await cur.execute(
            "SELECT count(*) FILTER (WHERE kind = 'journal_posted') AS journals_posted,"
            "       count(*) FILTER (WHERE kind = 'period_closed') AS periods_closed,"
            "       count(*) FILTER (WHERE kind = 'gate_opened') AS gates_opened,"
            "       (SELECT count(*) FROM (SELECT payload->>'task' FROM trace_event"
            "          WHERE close_id = %(c)s AND kind = 'task_done' GROUP BY 1 HAVING count(*) <> 1) bad)"
            "         AS tasks_not_done_once,"
            "       (SELECT count(*) FROM trace_pending) AS unsealed"
            "  FROM trace_event WHERE close_id = %(c)s",
            {"c": str(close_id)},
        )
        row = await cur.fetchone()
    assert row is not None  # an aggregate without GROUP BY always returns one row
    return row


# --- signed checkpoints ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CheckpointRow:
    """A signed checkpoint as `trace_checkpoint` holds it. `frontier` and `chain_head` are NULL for checkpoints
    signed before migration 0023."""

    tree_size: int
    root: bytes
    origin: str
    key_name: str
    note: str
    frontier: bytes | None
    chain_head: bytes | None


async def latest_checkpoint(conn: AsyncConnection[Any]) -> CheckpointRow | None:
    """The checkpoint of the largest tree, or None before the first is signed."""
    async with conn.cursor(row_factory=class_row(CheckpointRow)) as cur:
        await cur.execute(
            "SELECT tree_size, root, origin, key_name, note, frontier, chain_head"
            " FROM trace_checkpoint ORDER BY tree_size DESC LIMIT 1"
        )
        return await cur.fetchone()


async def insert_checkpoint(
    conn: AsyncConnection[Any],
    *,
    tree_size: int,
    root: bytes,
    origin: str,
    key_name: str,
    note: str,
    frontier: bytes,
    chain_head: bytes,
) -> None:
    async with conn.cursor() as cur:
        await cur.execute(
            "INSERT INTO trace_checkpoint (tree_size, root, origin, key_name, note, frontier, chain_head)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s)",
            (tree_size, root, origin, key_name, note, frontier, chain_head),
        )


async def signed_roots(conn: AsyncConnection[Any]) -> dict[int, bytes]:
    """Every signed checkpoint's root, by tree size."""
    async with conn.cursor() as cur:
        await cur.execute("SELECT tree_size, root FROM trace_checkpoint")
        return {int(size): bytes(root) for size, root in await cur.fetchall()}


async def checkpoint_note(conn: AsyncConnection[Any], tree_size: int) -> str | None:
    """The signed note of the checkpoint at `tree_size`, if the log signed one there."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute("SELECT note FROM trace_checkpoint WHERE tree_size = %s", (tree_size,))
        note = await cur.fetchone()
    return None if note is None else str(note)


@dataclass(frozen=True)
class LogProgress:
    """How far the log has come: its last sealed sequence number and the age of its last signed checkpoint."""

    head_seq: int | None
    checkpoint_age_s: float | None


async def log_progress(conn: AsyncConnection[Any]) -> LogProgress:
    async with conn.cursor(row_factory=class_row(LogProgress)) as cur:
        await cur.execute(
            "SELECT (SELECT seq FROM trace_head) AS head_seq,"
            " (SELECT extract(epoch FROM now() - max(signed_at))::float8 FROM trace_checkpoint) AS checkpoint_age_s"
        )
        row = await cur.fetchone()
    assert row is not None
    return row
