"""The trace's statements (countersign.store.trace) against real PostgreSQL: sealed events read back typed, their kind
a `TraceKind`; a kind the Enum does not name is refused by name on read, while the verifier, which hashes the stored
word, still holds the chain; the head and the checkpoints read back as typed rows."""

from __future__ import annotations

from typing import Any

import pytest

from countersign.audit.checkpoint import generate_signer
from countersign.audit.trace import TraceEvent, append_event, iter_events, seal_pending, verify_chain
from countersign.audit.transparency_log import sign_log_checkpoint
from countersign.states import TraceKind
from countersign.store import trace as store


async def test_a_sealed_event_reads_back_with_its_kind_a_trace_kind(conn: Any) -> None:
    async with conn.transaction():
        await append_event(conn, actor="orchestrator", kind=TraceKind.MODEL_STEP, payload={"i": 1})
        await append_event(conn, actor="orchestrator", kind=TraceKind.TOOL_CALL, payload={"i": 2})
    await seal_pending(conn)
    events = [event async for event in iter_events(conn)]
    assert [type(event.kind) for event in events] == [TraceKind, TraceKind]
    assert [event.kind for event in events] == [TraceKind.MODEL_STEP, TraceKind.TOOL_CALL]
    assert all(type(event) is TraceEvent for event in events)
    rows = [row async for row in store.iter_events(conn, store.TraceEventRow, after_seq=1)]
    assert [(type(row), row.seq, row.kind) for row in rows] == [(store.TraceEventRow, 2, TraceKind.TOOL_CALL)]
    # the hashed content carries the stored word, a plain string, as it did before the kind was typed
    assert type(events[0].body()["kind"]) is str


async def test_a_kind_no_trace_kind_names_is_refused_by_name_and_the_chain_still_verifies(conn: Any) -> None:
    """The database admits any word as a kind (nothing but the writers' trigger looks at it): the typed read names
    the event and the word; the verifier and the sealer hash the stored word and are not stopped by it."""
    async with conn.transaction():
        await append_event(conn, actor="orchestrator", kind=TraceKind.MODEL_STEP, payload={})
        await append_event(conn, actor="orchestrator", kind="not_a_kind", payload={})  # type: ignore[arg-type]
    assert await seal_pending(conn) == 2
    assert (await verify_chain(conn)).ok
    with pytest.raises(store.UnknownTraceKind, match=r"trace event 2 has kind 'not_a_kind'") as refused:
        _ = [event async for event in iter_events(conn)]
    assert (refused.value.seq, refused.value.word) == (2, "not_a_kind")
    assert [event.seq async for event in iter_events(conn, upto_seq=1)] == [1]


async def test_the_head_and_the_checkpoints_read_back_typed(conn: Any) -> None:
    assert await store.read_head(conn) == store.TraceHead(0, bytes(32))
    assert await store.latest_checkpoint(conn) is None
    assert await store.signed_roots(conn) == {}
    async with conn.transaction():
        await append_event(conn, actor="orchestrator", kind=TraceKind.MODEL_STEP, payload={})
    signed = await sign_log_checkpoint(conn, generate_signer("test-key"), "countersign.test/log", actor="orchestrator")
    assert signed is not None
    head = await store.read_head(conn)
    assert head is not None and head.seq == 2  # the event and the checkpoint_signed event signing appended
    row = await store.latest_checkpoint(conn)
    assert row is not None
    assert (row.tree_size, bytes(row.root), row.key_name, row.note.encode()) == (
        signed.tree_size,
        signed.root,
        "test-key",
        signed.note,
    )
    assert await store.signed_roots(conn) == {signed.tree_size: signed.root}
    assert await store.checkpoint_note(conn, signed.tree_size) == signed.note.decode()
    assert await store.checkpoint_note(conn, signed.tree_size + 1) is None
    assert not await store.has_pending(conn)
