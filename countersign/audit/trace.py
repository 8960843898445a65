"""The close trace: one append-only, hash-chained log of everything that happened.

Two phases. `append_event` writes to `trace_pending` inside the caller's transaction, so an event exists exactly when
its effect committed, and no global lock sits on the request path. `seal_pending` then takes pending events in
batches under one advisory lock, numbers them without gaps, chains them —
`hash(n) = SHA-256(hash(n-1) || canonical(event n))`, 32 zero bytes before the first — and moves them to
`trace_event`, where UPDATE, DELETE and TRUNCATE raise. The same canonical bytes are the Merkle leaves
(countersign/audit/merkle.py).

The database stamps every event with the role that wrote it (`writer`, part of the hashed content) and refuses kinds
and actors that role may not write (migration 0006). Neither service role may write `trace_event` or `trace_head`:
sealing goes through two functions, `trace_claim_pending` and `trace_seal_claimed`, which copy each event's content
from the queue themselves and check the canonical bytes and hash the caller computed before chaining them.

The statements are countersign/store/trace.py's; this module holds the chain: what an event's hashed content is, its
canonical bytes, the sealer's numbering and hashing, and the verifier's streaming check.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator, Mapping
from contextlib import aclosing
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import orjson
from psycopg import AsyncConnection
from psycopg.pq import TransactionStatus

from countersign.audit.canonical import NonCanonicalValue, canonical_bytes, normalise
from countersign.audit.merkle import frontier_root
from countersign.drill_hooks.kill_points import KillPoint, kill_point
from countersign.states import TraceKind
from countersign.store import trace as store
from countersign.store.trace import StoredEventText, TraceEventRow, iter_sealed_rows

GENESIS_HASH = bytes(32)
SEAL_BATCH_ROWS = 2_000
MAX_SEAL_ROUNDS = 10_000

_FAST_CANONICAL = orjson.OPT_SORT_KEYS | orjson.OPT_STRICT_INTEGER


def _loads_jsonb(data: str | bytes) -> Any:
    return json.loads(data)


class TraceEvent(TraceEventRow):
    """A sealed event (countersign.store.trace.TraceEventRow, its kind a TraceKind) with its hashed content."""

    def body(self) -> dict[str, Any]:
        return event_body(
            self.seq, self.ts, self.close_id, self.actor, str(self.kind), self.payload, self.version_set, self.writer
        )

    def canonical(self) -> bytes:
        return canonical_bytes(self.body())


@dataclass(frozen=True)
class VerifyResult:
    ok: bool
    size: int
    head_hash: bytes
    first_bad_seq: int | None = None
    problem: str | None = None
    leaf_hashes: list[bytes] | None = field(default=None, repr=False, compare=False)
    root: bytes | None = None  # the Merkle root of the log, when signed roots were checked
    unsigned_at: int | None = None  # the first signed tree size whose root the log no longer gives


def event_body(
    seq: int,
    ts: str,
    close_id: str | None,
    actor: str,
    kind: str,
    payload: Mapping[str, Any],
    version_set: Mapping[str, Any],
    writer: str | None = None,
) -> dict[str, Any]:
    """The hashed content of one event. `writer`, the database role that wrote it, is absent only from events sealed
    before the database recorded it (migration 0006)."""
    body = {
        "seq": seq,
        "ts": ts,
        "close_id": close_id,
        "actor": actor,
        "kind": kind,
        "payload": dict(payload),
        "version_set": dict(version_set),
    }
    if writer is not None:
        body["writer"] = writer
    return body


def chain_hash(prev_hash: bytes, canonical_event: bytes) -> bytes:
    return hashlib.sha256(prev_hash + canonical_event).digest()


def utc_timestamp(now: datetime | None = None) -> str:
    moment = (now or datetime.now(UTC)).astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


async def append_event(
    conn: AsyncConnection[Any],
    *,
    actor: str,
    kind: TraceKind,
    payload: Mapping[str, Any],
    close_id: UUID | str | None = None,
    versions: Mapping[str, Any] | None = None,
) -> int:
    """Queue one event inside the caller's transaction; it commits or rolls back with the effect it records.

    Returns the pending id. The event gets its sequence number and hash when `seal_pending` runs.
    """
    clean_payload = normalise(dict(payload))
    clean_versions = normalise(dict(versions or {}))
    return await store.queue_event(
        conn,
        ts=utc_timestamp(),
        close_id=close_id,
        actor=actor,
        kind=kind,
        payload=clean_payload,
        versions=clean_versions,
    )


async def register_close_versions(
    conn: AsyncConnection[Any], close_id: UUID | str, version_set: Mapping[str, Any]
) -> None:
    """The version set (app, policy and checklist hashes, profile and seed …) every event of this close carries."""
    await store.insert_close_versions(conn, close_id, normalise(dict(version_set)))


async def _seal_batch(conn: AsyncConnection[Any], limit: int) -> int:
    pending = await store.claim_pending(conn, limit)
    if not pending:
        return 0
    seq, prev = pending[0].head_seq, bytes(pending[0].head_hash)
    ids, canonicals, hashes = [], [], []
    for event in pending:
        seq += 1
        canonical = canonical_bytes(
            event_body(
                seq,
                event.ts,
                event.close_id,
                event.actor,
                event.kind,
                event.payload,
                event.version_set,
                event.writer,
            )
        )
        prev = chain_hash(prev, canonical)
        ids.append(event.pending_id)
        canonicals.append(canonical)
        hashes.append(prev)
    kill_point(KillPoint.TRACE_MID_SEAL)
    await store.seal_claimed(conn, ids, canonicals, hashes)
    return len(pending)


async def seal_pending(conn: AsyncConnection[Any], *, batch_rows: int = SEAL_BATCH_ROWS) -> int:
    """Chain every pending event. `conn` must be in autocommit mode. Returns how many this call sealed.

    Never blocks behind another sealer: if one is running, it will see our committed events, because a sealer
    checks the queue again after each release of the lock.
    """
    total = 0
    for _ in range(MAX_SEAL_ROUNDS):
        async with conn.transaction():
            if not await store.try_seal_lock(conn):
                return total
            sealed = await _seal_batch(conn, batch_rows)
        total += sealed
        # Fewer than asked means we took all there was: look again only for what committed while we held the lock.
        if sealed < batch_rows and not await store.has_pending(conn):
            return total
    return total


def iter_events(
    conn: AsyncConnection[Any], *, close_id: UUID | str | None = None, after_seq: int = 0, upto_seq: int | None = None
) -> AsyncIterator[TraceEvent]:
    """Sealed events in sequence order, read in bounded batches; a kind TraceKind does not name raises
    countersign.store.trace.UnknownTraceKind."""
    return store.iter_events(conn, TraceEvent, close_id=close_id, after_seq=after_seq, upto_seq=upto_seq)


@dataclass(frozen=True, slots=True)
class SealedRecord:
    """One sealed event as the verifier needs it: its links, and its canonical bytes as stored now.

    `canonical` is None when the stored event cannot be canonicalised at all (an edit put in a value RFC 8785
    refuses). `intact` says whether SHA-256(prev_hash || canonical) equals the stored hash.
    """

    seq: int
    prev_hash: bytes
    hash: bytes
    canonical: bytes | None
    intact: bool


_CACHE_LIMIT = 4_096
_REFUSED = b""  # cached for a value orjson cannot serialise (no JSON value serialises to nothing)
_LAYOUT = b'{"actor":%b,"close_id":%b,"kind":%b,"payload":%b,"seq":%d,"ts":%b,"version_set":%b%b'


class TextCaches:
    """Serialisations the reader reuses across rows: a close's version set, and the names (actor, kind, close id,
    writer) that most events share. Bounded: each is emptied when it reaches _CACHE_LIMIT entries."""

    __slots__ = ("names", "versions", "writers")

    def __init__(self) -> None:
        self.names: dict[str | None, bytes] = {}
        self.versions: dict[str, bytes] = {}
        self.writers: dict[str | None, bytes] = {}


def _name(value: str | None, names: dict[str | None, bytes]) -> bytes:
    """orjson's JSON string (or null) for `value`, cached; _REFUSED when orjson refuses it (a lone surrogate)."""
    try:
        encoded = orjson.dumps(value)
    except orjson.JSONEncodeError:
        encoded = _REFUSED
    if len(names) >= _CACHE_LIMIT:
        names.clear()
    names[value] = encoded
    return encoded


def _json_text(text: str) -> bytes:
    """orjson's sorted-key form of a JSON text, or _REFUSED."""
    try:
        return orjson.dumps(orjson.loads(text), option=_FAST_CANONICAL)
    except (orjson.JSONDecodeError, orjson.JSONEncodeError):
        return _REFUSED


def _writer_tail(writer: str | None, writers: dict[str | None, bytes]) -> bytes:
    if writer is None:
        tail = b"}"
    else:
        encoded = _name(writer, {})
        tail = _REFUSED if encoded is _REFUSED else b',"writer":' + encoded + b"}"
    if len(writers) >= _CACHE_LIMIT:
        writers.clear()
    writers[writer] = tail
    return tail


def _row_canonical(
    seq: int,
    ts: str,
    close_id: str | None,
    actor: str,
    kind: str,
    payload: str,
    versions: bytes,
    writer: str | None,
    caches: TextCaches | None = None,
) -> bytes | None:
    """The event's canonical form straight from its text columns (orjson), or None where orjson refuses.

    Every piece is a faithful JSON serialisation of the stored value, so if SHA-256 over these bytes matches the
    stored hash, the stored event equals, as JSON, the event that was sealed. Where they differ from RFC 8785 (floats,
    integers beyond 2**53, keys beyond U+FFFF, which orjson orders by code point), the hash does not match and the
    caller takes the exact path. `versions` is the version set already serialised (sorted keys).
    """
    c = caches or TextCaches()
    names = c.names
    body = _json_text(payload)
    actor_json = names.get(actor) or _name(actor, names)
    close_json = names.get(close_id) or _name(close_id, names)
    kind_json = names.get(kind) or _name(kind, names)
    tail = c.writers.get(writer) or _writer_tail(writer, c.writers)
    try:
        ts_json = orjson.dumps(ts)
    except orjson.JSONEncodeError:
        return None
    if _REFUSED in (body, actor_json, close_json, kind_json, tail):
        return None
    return _LAYOUT % (actor_json, close_json, kind_json, body, seq, ts_json, versions, tail)


def _exact_canonical(row: StoredEventText) -> bytes | None:
    try:
        return canonical_bytes(
            event_body(
                row.seq,
                row.ts,
                row.close_id,
                row.actor,
                row.kind,
                _loads_jsonb(row.payload),
                _loads_jsonb(row.version_set),
                row.writer,
            )
        )
    except (NonCanonicalValue, ValueError):
        return None


async def iter_sealed(
    conn: AsyncConnection[Any], *, after_seq: int = 0, upto_seq: int | None = None
) -> AsyncIterator[list[SealedRecord]]:
    """Every sealed event after `after_seq` in sequence order, in batches, each with its canonical bytes as stored.

    A record's `canonical` comes from orjson over the text columns when SHA-256(prev_hash || those bytes) equals
    the stored hash (then they are the sealed bytes, see `_row_canonical`), and from `canonical_bytes` otherwise,
    so it is always the exact RFC 8785 form of the event as stored.
    """
    caches = TextCaches()
    async for rows in iter_sealed_rows(conn, after_seq=after_seq, upto_seq=upto_seq):
        yield [_record_from_row(row, caches) for row in rows]


def _fast_versions(version_set: str, versions_seen: dict[str, bytes]) -> bytes:
    versions = _json_text(version_set)
    if len(versions_seen) >= _CACHE_LIMIT:
        versions_seen.clear()
    versions_seen[version_set] = versions
    return versions


def _fast_canonical(row: tuple[Any, ...], caches: TextCaches) -> bytes | None:
    """`_row_canonical` of a row tuple, its version set serialised once per distinct text."""
    versions = caches.versions.get(row[6]) or _fast_versions(row[6], caches.versions)
    if versions is _REFUSED:
        return None
    return _row_canonical(row[0], row[1], row[2], row[3], row[4], row[5], versions, row[9], caches)


def _record_from_row(row: tuple[Any, ...], caches: TextCaches) -> SealedRecord:
    """One row (StoredEventText's field order) to a record: the fast bytes when they hash right, else the exact."""
    seq, prev_hash, digest = row[0], row[7], row[8]
    canonical = _fast_canonical(row, caches)
    if canonical is not None and chain_hash(prev_hash, canonical) == digest:
        return SealedRecord(seq, prev_hash, digest, canonical, True)
    canonical = _exact_canonical(StoredEventText(*row))
    intact = canonical is not None and chain_hash(prev_hash, canonical) == digest
    return SealedRecord(seq, prev_hash, digest, canonical, intact)


async def verify_chain(
    conn: AsyncConnection[Any],
    *,
    collect_leaves: bool = False,
    signed_roots: Mapping[int, bytes] | None = None,
) -> VerifyResult:
    """Recompute the whole chain from the database; name the first sequence number that diverges and how.

    Reads the log and its head in one REPEATABLE READ snapshot when `conn` is idle, so sealing that runs meanwhile
    cannot make a sound log look truncated. With `collect_leaves`, an intact result carries every Merkle leaf hash.
    With `signed_roots` (tree size -> signed root), it also computes the Merkle root as it streams (a frontier, never
    the whole tree) and notes in `unsigned_at` the first signed size whose root the log no longer gives.
    """
    if conn.info.transaction_status == TransactionStatus.IDLE:
        async with store.snapshot(conn):
            return await _verify_chain(conn, collect_leaves, signed_roots)
    return await _verify_chain(conn, collect_leaves, signed_roots)


def chain_problem(record: SealedRecord, expected_seq: int, expected_prev: bytes) -> tuple[int, str] | None:
    """The first thing wrong with `record` as the next link of the chain, with the sequence number to name."""
    if record.seq != expected_seq:
        return expected_seq, f"sequence gap: expected {expected_seq}, found {record.seq}"
    if record.prev_hash != expected_prev:
        return record.seq, "prev_hash does not link to the previous event's hash"
    if not record.intact:
        return record.seq, "content (seq, ts, actor, kind, payload or version set) does not match its hash"
    return None


@dataclass
class _Merkle:
    """The Merkle side of a streaming verification: the frontier, and the signed roots to meet on the way."""

    signed_roots: Mapping[int, bytes]
    frontier: list[bytes] = field(default_factory=list)
    unsigned_at: int | None = None

    def meet(self, size: int) -> None:
        """The frontier now covers `size` leaves, a size the log signed: note it if the roots differ."""
        if self.unsigned_at is None and frontier_root(self.frontier) != self.signed_roots[size]:
            self.unsigned_at = size


class _ChainCheck:
    """The streaming check of one verification, page by page: its state is touched by one page at a time."""

    def __init__(self, collect_leaves: bool, signed_roots: Mapping[int, bytes] | None) -> None:
        self.leaves: list[bytes] | None = [] if collect_leaves else None
        self.merkle = _Merkle(signed_roots) if signed_roots is not None else None
        self.caches = TextCaches()
        self.expected_prev = GENESIS_HASH
        self.expected_seq = 1
        self.problem: tuple[int, str] | None = None

    def page(self, rows: list[tuple[Any, ...]]) -> bool:
        """Check the next page of rows; False (and `problem` set) at the first broken link.

        Written flat because it runs a million times: per row the links (seq, prev_hash), the fast canonical bytes
        (`_row_canonical`'s layout, names and version sets from caches) and one chain hash; only a row whose fast
        bytes do not hash right takes the exact RFC 8785 path (`_record_from_row`). The leaf hash and the frontier
        are computed only when leaves or signed roots are asked for.
        """
        leaves, merkle, caches = self.leaves, self.merkle, self.caches
        frontier = merkle.frontier if merkle is not None else []
        roots = merkle.signed_roots if merkle is not None else {}
        want_leaf = leaves is not None or merkle is not None
        names, versions_seen, writers = caches.names, caches.versions, caches.writers
        sha256, dumps, loads, layout, option = hashlib.sha256, orjson.dumps, orjson.loads, _LAYOUT, _FAST_CANONICAL
        refused, fast_errors = _REFUSED, (orjson.JSONDecodeError, orjson.JSONEncodeError)
        expected_prev, expected_seq = self.expected_prev, self.expected_seq
        for row in rows:
            seq, ts, close_id, actor, kind, payload, version_set, prev_hash, digest, writer = row
            canonical: bytes | None = None
            if seq == expected_seq and prev_hash == expected_prev:
                versions = versions_seen.get(version_set) or _fast_versions(version_set, versions_seen)
                actor_json = names.get(actor) or _name(actor, names)
                close_json = names.get(close_id) or _name(close_id, names)
                kind_json = names.get(kind) or _name(kind, names)
                tail = writers.get(writer) or _writer_tail(writer, writers)
                try:
                    canonical = layout % (
                        actor_json, close_json, kind_json, dumps(loads(payload), option=option), seq, dumps(ts),
                        versions, tail,
                    )  # fmt: skip
                except fast_errors:
                    canonical = None
                if refused in (versions, actor_json, close_json, kind_json, tail):
                    canonical = None
            if canonical is None or sha256(prev_hash + canonical).digest() != digest:
                record = _record_from_row(row, caches)
                self.problem = chain_problem(record, expected_seq, expected_prev)
                if self.problem is not None:
                    self.expected_prev, self.expected_seq = expected_prev, expected_seq
                    return False
                canonical = record.canonical
                assert canonical is not None  # an intact record has its canonical bytes
            if want_leaf:
                node = sha256(b"\x00" + canonical).digest()
                if leaves is not None:
                    leaves.append(node)
                if (
                    merkle is not None
                ):  # the frontier grows by this leaf (countersign.audit.merkle.extend_frontier, inline)
                    carry = expected_seq - 1
                    while carry & 1:
                        node = sha256(b"\x01" + frontier.pop() + node).digest()
                        carry >>= 1
                    frontier.append(node)
                    if expected_seq in roots:
                        merkle.meet(expected_seq)
            expected_prev = digest
            expected_seq += 1
        self.expected_prev, self.expected_seq = expected_prev, expected_seq
        return True


async def _verify_chain(
    conn: AsyncConnection[Any], collect_leaves: bool, signed_roots: Mapping[int, bytes] | None
) -> VerifyResult:
    """Read and hash at once, in one thread: the rows come from one streamed statement
    (`iter_sealed_rows(streamed=True)`), so PostgreSQL produces the next page while this one is hashed. (A worker
    thread hashing beside the reader measured slower: the hashing and the reader's wake-ups both need the GIL.)"""
    check = _ChainCheck(collect_leaves, signed_roots)
    async with aclosing(iter_sealed_rows(conn, streamed=True)) as pages:
        async for rows in pages:
            if not check.page(rows):
                break
    if check.problem is not None:
        return VerifyResult(False, check.expected_seq - 1, check.expected_prev, *check.problem)
    expected_prev, size = check.expected_prev, check.expected_seq - 1
    head = await store.read_head(conn)
    if head is None or head.seq != size or bytes(head.hash) != expected_prev:
        recorded = head.seq if head else 0
        return VerifyResult(
            False,
            size,
            expected_prev,
            size + 1,
            f"the head says {recorded} events but the log holds {size}: events are missing",
        )
    merkle = check.merkle
    return VerifyResult(
        True,
        size,
        expected_prev,
        leaf_hashes=check.leaves,
        root=None if merkle is None else frontier_root(merkle.frontier),
        unsigned_at=None if merkle is None else merkle.unsigned_at,
    )
