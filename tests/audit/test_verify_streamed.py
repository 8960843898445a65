"""`trace verify` over a log longer than one streamed page: an edit to any hashed column, a gap or a swap is named
by its sequence number, by `verify_chain` and by `verify_log`, on whichever page it falls; and a verification that
stops at a bad event leaves the connection usable (the streamed statement is closed, not left running)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from countersign.audit.checkpoint import generate_signer
from countersign.audit.trace import append_event, register_close_versions, seal_pending, verify_chain
from countersign.audit.transparency_log import sign_log_checkpoint, verify_log
from countersign.states import TraceKind
from countersign.store.trace import STREAM_CHUNK_ROWS

EVENTS = 2 * STREAM_CHUNK_ROWS + 100  # three streamed pages
CLOSE_A, CLOSE_B = str(uuid.UUID(int=0xA)), str(uuid.UUID(int=0xB))
ORIGIN = "countersign.test/streamed-verify"


async def _log(conn: Any) -> None:
    await register_close_versions(conn, CLOSE_A, {"app": "1.0", "seed": 1})
    await register_close_versions(conn, CLOSE_B, {"app": "1.0", "seed": 2})
    async with conn.transaction():
        for i in range(EVENTS):
            await append_event(
                conn,
                actor="orchestrator",
                kind=TraceKind.MODEL_STEP,
                close_id=CLOSE_A if i % 2 else CLOSE_B,
                payload={"i": i, "note": "ok"},
            )
    await seal_pending(conn)
    await sign_log_checkpoint(conn, generate_signer(ORIGIN), ORIGIN, actor="test")  # seals checkpoint_signed too


async def _attack(conn: Any, *statements: str) -> None:
    await conn.execute("ALTER TABLE trace_event DISABLE TRIGGER USER")
    for statement in statements:
        await conn.execute(statement)
    await conn.execute("ALTER TABLE trace_event ENABLE TRIGGER USER")


ATTACKS = {
    "ts": ["UPDATE trace_event SET ts = '2020-01-01T00:00:00.000000Z' WHERE seq = {seq}"],
    "close_id": [
        f"UPDATE trace_event SET close_id = CASE WHEN close_id = '{CLOSE_A}' THEN '{CLOSE_B}'::uuid"
        f" ELSE '{CLOSE_A}'::uuid END WHERE seq = {{seq}}"
    ],
    "close_id null": ["UPDATE trace_event SET close_id = NULL WHERE seq = {seq}"],
    "actor": ["UPDATE trace_event SET actor = 'mallory' WHERE seq = {seq}"],
    "kind": ["UPDATE trace_event SET kind = 'tool_call' WHERE seq = {seq}"],
    "payload": ["""UPDATE trace_event SET payload = jsonb_set(payload, '{note}', '"ok "') WHERE seq = {seq}"""],
    "payload key": ["""UPDATE trace_event SET payload = payload || '{"extra": null}' WHERE seq = {seq}"""],
    "version_set": ["""UPDATE trace_event SET version_set = jsonb_set(version_set, '{seed}', '3') WHERE seq = {seq}"""],
    "writer": ["UPDATE trace_event SET writer = 'countersign_engine' WHERE seq = {seq}"],
    "writer null": ["UPDATE trace_event SET writer = NULL WHERE seq = {seq}"],
    "prev_hash": ["UPDATE trace_event SET prev_hash = decode(repeat('cd', 32), 'hex') WHERE seq = {seq}"],
    "hash": ["UPDATE trace_event SET hash = decode(repeat('ab', 32), 'hex') WHERE seq = {seq}"],
    "gap": ["DELETE FROM trace_event WHERE seq = {seq}"],
    "swap": [
        "UPDATE trace_event SET seq = 1000000 WHERE seq = {seq}",
        "UPDATE trace_event SET seq = {seq} WHERE seq = {seq} + 1",
        "UPDATE trace_event SET seq = {seq} + 1 WHERE seq = 1000000",
    ],
}  # fmt: skip  ({seq} is replaced by the event's sequence number)


@pytest.mark.parametrize("seq", [STREAM_CHUNK_ROWS + 77], ids=["second page"])
@pytest.mark.parametrize("field", list(ATTACKS))
async def test_an_edit_to_any_column_is_named_on_a_later_page(conn: Any, field: str, seq: int) -> None:
    await _log(conn)
    assert (await verify_chain(conn)).ok
    await _attack(conn, *(statement.replace("{seq}", str(seq)) for statement in ATTACKS[field]))
    chain = await verify_chain(conn)
    assert not chain.ok and chain.first_bad_seq == seq, (field, chain)
    logged = await verify_log(conn)
    assert not logged.chain.ok and logged.chain.first_bad_seq == seq, (field, logged.chain)


@pytest.mark.parametrize("seq", [1, STREAM_CHUNK_ROWS, STREAM_CHUNK_ROWS + 1, EVENTS])
async def test_the_first_bad_event_is_named_at_each_page_edge_and_the_connection_stays_usable(
    conn: Any, seq: int
) -> None:
    await _log(conn)
    await _attack(conn, f"UPDATE trace_event SET actor = 'mallory' WHERE seq = {seq}")
    for _ in range(2):  # the second run reuses the connection the first stopped reading from
        result = await verify_chain(conn)
        assert not result.ok and result.first_bad_seq == seq and result.size == seq - 1
    async with conn.transaction():
        # a verification inside the caller's transaction: stopping early leaves the transaction usable too
        assert (await verify_chain(conn)).first_bad_seq == seq
        assert (await (await conn.execute("SELECT count(*) FROM trace_event")).fetchone())[0] == EVENTS + 1


async def test_an_intact_log_over_several_pages_verifies_with_its_signed_root(conn: Any) -> None:
    await _log(conn)
    logged = await verify_log(conn)
    assert logged.chain.ok and logged.chain.size == EVENTS + 1  # and the checkpoint_signed event
    assert logged.chain.unsigned_at is None
