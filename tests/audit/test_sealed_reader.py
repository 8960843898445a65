"""The verifier's reader: canonical bytes from text columns are the sealed bytes exactly when the hash matches.

`iter_sealed` reads JSON columns as text and canonicalises them with orjson, falling back to `canonical_bytes` when
the hash does not match. These tests hold both halves: every event the sealer could have written verifies, and no
edited event is ever accepted, whichever path answers.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
import psycopg
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import countersign.audit.trace as trace
from countersign.audit.canonical import NonCanonicalValue, canonical_bytes
from countersign.audit.merkle import leaf_hash
from countersign.audit.trace import (
    GENESIS_HASH,
    TextCaches,
    _record_from_row,
    _row_canonical,
    append_event,
    chain_hash,
    event_body,
    iter_events,
    iter_sealed_rows,
    seal_pending,
    verify_chain,
)
from countersign.states import TraceKind

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**60), 2**60),
    st.text(max_size=12),
    st.floats(allow_nan=False, allow_infinity=False),
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)
PAYLOADS = st.dictionaries(st.text(max_size=6), JSON, max_size=5)
TS = "2026-10-31T00:00:00.000000Z"
CLOSE = "2f1b6c1e-8d1a-4c55-9a51-3f7f5d2c9e10"


def _row(
    seq: int,
    actor: str,
    kind: str,
    payload: Any,
    versions: Any,
    prev: bytes,
    digest: bytes,
    writer: str | None = "countersign_engine",
) -> tuple[Any, ...]:
    """A row as the reader fetches it (StoredEventText's field order)."""
    return (seq, TS, CLOSE, actor, kind, json.dumps(payload), json.dumps(versions), prev, digest, writer)


def _sealed_hash(
    seq: int, actor: str, kind: str, payload: Any, versions: Any, prev: bytes, writer: str | None = "countersign_engine"
) -> bytes | None:
    try:
        return chain_hash(prev, canonical_bytes(event_body(seq, TS, CLOSE, actor, kind, payload, versions, writer)))
    except NonCanonicalValue:
        return None


@settings(max_examples=400, deadline=None)
@given(
    payload=PAYLOADS,
    actor=st.text(max_size=8),
    versions=st.dictionaries(st.text(max_size=4), JSON, max_size=3),
    writer=st.none() | st.text(max_size=8),
)
@example(payload={"\U0001f600": 1, "\uff61": 2}, actor="a", versions={}, writer=None)  # orjson orders keys differently
@example(payload={"x": 1.0, "y": 1e21}, actor="a", versions={}, writer="w")  # floats have no canonical form
@example(payload={"big": 2**60}, actor="a", versions={}, writer="w")  # beyond 2**53: canonical_bytes refuses it
def test_every_sealable_event_reads_back_intact_with_its_exact_canonical_bytes(
    payload: dict[str, Any], actor: str, versions: dict[str, Any], writer: str | None
) -> None:
    prev = bytes(range(32))
    digest = _sealed_hash(7, actor, "k", payload, versions, prev, writer)
    record = _record_from_row(_row(7, actor, "k", payload, versions, prev, digest or bytes(32), writer), TextCaches())
    if digest is None:  # the sealer would have refused this event; the reader must not call it intact
        assert not record.intact
        return
    assert record.intact
    assert record.canonical == canonical_bytes(event_body(7, TS, CLOSE, actor, "k", payload, versions, writer))


@settings(max_examples=300, deadline=None)
@given(
    payload=PAYLOADS,
    actor=st.text(max_size=8),
    versions=st.dictionaries(st.text(max_size=4), JSON, max_size=3),
    writer=st.none() | st.text(max_size=8),
    edit=st.booleans(),
)
@example(payload={"\U0001f600": 1, "\uff61": 2}, actor="a", versions={}, writer=None, edit=False)
@example(payload={"x": 1.0}, actor="a", versions={"v": 2**60}, writer="w", edit=False)
def test_the_streaming_check_agrees_with_the_exact_path(
    payload: dict[str, Any], actor: str, versions: dict[str, Any], writer: str | None, edit: bool
) -> None:
    """`verify_chain`'s flat loop (its own copy of the fast layout) accepts exactly what the exact path accepts and
    gives the same leaf; an edited payload is refused."""
    prev = bytes(range(32))
    digest = _sealed_hash(1, actor, "k", payload, versions, prev, writer)
    stored = {**payload, "edited": True} if edit else payload
    check = trace._ChainCheck(collect_leaves=True, signed_roots={1: b"no root"})
    check.expected_prev = prev
    accepted = check.page([_row(1, actor, "k", stored, versions, prev, digest or bytes(32), writer)])
    if digest is None or edit:
        assert not accepted and check.problem is not None and check.problem[0] == 1
        return
    assert accepted, check.problem
    exact = canonical_bytes(event_body(1, TS, CLOSE, actor, "k", payload, versions, writer))
    assert check.leaves == [leaf_hash(exact)]
    assert check.merkle is not None and check.merkle.unsigned_at == 1  # the signed root was met and differs


@settings(max_examples=400, deadline=None)
@given(sealed=PAYLOADS, stored=PAYLOADS, actor=st.text(max_size=8))
@example(sealed={"a": 1}, stored={"a": 1.0}, actor="x")  # equal as JSON numbers: RFC 8785 writes both as 1
@example(sealed={"a": "1"}, stored={"a": 1}, actor="x")
def test_an_edited_payload_is_never_intact_whichever_path_reads_it(
    sealed: dict[str, Any], stored: dict[str, Any], actor: str
) -> None:
    prev = GENESIS_HASH
    digest = _sealed_hash(1, actor, "k", sealed, {}, prev)
    stored_hash = _sealed_hash(1, actor, "k", stored, {}, prev)
    if digest is None:
        return
    record = _record_from_row(_row(1, actor, "k", stored, {}, prev, digest), TextCaches())
    assert record.intact == (stored_hash == digest)


@settings(max_examples=400, deadline=None)
@given(
    payload=PAYLOADS,
    actor=st.text(max_size=12),
    kind=st.text(max_size=12),
    ts=st.text(max_size=12),
    writer=st.none() | st.text(max_size=12),
)
@example(payload={}, actor='alice","close_id":null,"kind":"x', kind="", ts="t", writer=None)
@example(payload={}, actor="back\\slash\n", kind='"', ts="\u0000", writer='x","actor":"carol')
def test_the_fast_bytes_are_a_faithful_serialisation_of_the_row(
    payload: dict[str, Any], actor: str, kind: str, ts: str, writer: str | None
) -> None:
    """What makes a hash match on the fast path sound: those bytes parse back to exactly the stored values, so
    no text can move across a field boundary, however a field is crafted."""
    versions = b'{"app":"1"}'
    fast = _row_canonical(9, ts, CLOSE, actor, kind, json.dumps(payload), versions, writer)
    if fast is None:
        return
    expected = {
        "actor": actor,
        "close_id": CLOSE,
        "kind": kind,
        "payload": payload,
        "seq": 9,
        "ts": ts,
        "version_set": {"app": "1"},
    }
    if writer is not None:
        expected["writer"] = writer
    assert orjson.loads(fast) == expected


TRICKY_PAYLOADS: list[dict[str, Any]] = [
    {"amount": "1234.50", "zero": 0, "negative": -17, "bool": False, "none": None},
    {"\U0001f600": "beyond the BMP", "\uff61": "after it in UTF-16 order", "a": [1, 2, 3]},
    {"tab\there": "line\nbreak", "quote": 'say "yes"', "backslash": "C:\\books\\1000", "nul_free": "\u0001\u001f"},
    {"nested": {"z": {"y": [{"x": None, "w": True}]}}, "safe_max": 2**53 - 1, "safe_min": -(2**53 - 1)},
    {"unicode": "Zürich · 東京 · \u2028 · \ufeff", "empty": {}, "empty_list": []},
]


async def test_real_jsonb_round_trip_verifies_and_gives_the_exact_leaves(conn: Any) -> None:
    for number, payload in enumerate(TRICKY_PAYLOADS):
        async with conn.transaction():
            await append_event(conn, actor=f'actor\t{number}\\"x"', kind=TraceKind.TOOL_CALL, payload=payload)
    await seal_pending(conn)
    result = await verify_chain(conn, collect_leaves=True)
    assert result.ok and result.size == len(TRICKY_PAYLOADS), result.problem
    exact = [leaf_hash(event.canonical()) async for event in iter_events(conn)]
    assert result.leaf_hashes == exact


@pytest.mark.parametrize(
    "edited",
    [
        '{"lines": 17.0, "account": "1000"}',  # equal as a JSON number, but floats have no canonical form
        '{"lines": 17, "account": "1000", "note": null}',
        '{"lines": "17", "account": "1000"}',
        '{"lines": 17, "account": "1000 "}',
    ],
)
async def test_an_edit_to_the_stored_json_is_caught_whichever_path_reads_it(conn: Any, edited: str) -> None:
    async with conn.transaction():
        await append_event(conn, actor="alice", kind=TraceKind.JOURNAL_POSTED, payload={"lines": 17, "account": "1000"})
    await seal_pending(conn)
    await conn.execute("ALTER TABLE trace_event DISABLE TRIGGER trace_event_append_only")
    await conn.execute("UPDATE trace_event SET payload = %s::jsonb", (edited,))
    result = await verify_chain(conn)
    assert not result.ok and result.first_bad_seq == 1
    assert result.problem and "does not match its hash" in result.problem


async def test_verification_reads_one_snapshot_while_sealing_goes_on(
    conn: Any, database: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Events sealed after the log was read but before the head is read must not look like a truncation."""
    for i in range(3):
        async with conn.transaction():
            await append_event(conn, actor="alice", kind=TraceKind.MODEL_STEP, payload={"i": i})
    await seal_pending(conn)
    real_iter_sealed = iter_sealed_rows

    async def read_then_let_another_process_seal(*args: Any, **kwargs: Any) -> Any:
        async for batch in real_iter_sealed(*args, **kwargs):
            yield batch
        async with await psycopg.AsyncConnection.connect(database.url, autocommit=True) as other:
            async with other.transaction():
                await append_event(other, actor="bob", kind=TraceKind.MODEL_STEP, payload={"late": True})
            await seal_pending(other)

    monkeypatch.setattr(trace, "iter_sealed_rows", read_then_let_another_process_seal)
    result = await verify_chain(conn)
    assert result.ok and result.size == 3, result.problem
    monkeypatch.undo()
    after = await verify_chain(conn)
    assert after.ok and after.size == 4
