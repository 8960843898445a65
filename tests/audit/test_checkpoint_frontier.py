"""Checkpoints signed from the stored Merkle frontier (migration 0023, ADR 0039): each extends the last, the stored
frontier and chain head cannot be changed by any role, and a frontier that does not fit makes signing refuse."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from countersign.audit.canonical import canonical_bytes
from countersign.audit.checkpoint import generate_signer
from countersign.audit.merkle import frontier_from_leaf_hashes, frontier_root, pack_frontier, verify_consistency
from countersign.audit.trace import GENESIS_HASH, append_event, chain_hash, iter_events, seal_pending, verify_chain
from countersign.audit.transparency_log import (
    LogInconsistent,
    latest_checkpoint,
    load_tree,
    sign_log_checkpoint,
    verify_log,
)
from countersign.bootstrap.database import Database
from countersign.states import TraceKind

ORIGIN = "countersign.test/close-trace"
SERVICE_ROLES = ("engine", "callbacks")
REFUSED = (psycopg.errors.InsufficientPrivilege,)


async def _log(conn: Any, n: int) -> None:
    for i in range(n):
        async with conn.transaction():
            await append_event(conn, actor="orchestrator", kind=TraceKind.MODEL_STEP, payload={"i": i})
    await seal_pending(conn)


def _as(database: Database, role: str) -> psycopg.Connection[Any]:
    url = database.engine_url if role == "engine" else database.callbacks_url
    return psycopg.connect(url, autocommit=True)


async def _unfrozen(conn: Any, *statements: str, params: tuple[Any, ...] = ()) -> None:
    """As a superuser would: the checkpoint table's triggers off, the statements run, the triggers back on."""
    await conn.execute("ALTER TABLE trace_checkpoint DISABLE TRIGGER USER")
    for statement in statements:
        await conn.execute(statement, params)
    for trigger in ("trace_checkpoint_append_only", "trace_checkpoint_no_truncate", "trace_checkpoint_admitted"):
        await conn.execute(f"ALTER TABLE trace_checkpoint ENABLE ALWAYS TRIGGER {trigger}")


async def test_sign_append_sign_again_extends_the_signed_tree_and_stores_its_frontier(conn: Any) -> None:
    signer = generate_signer(ORIGIN)
    await _log(conn, 5)
    first = await sign_log_checkpoint(conn, signer, ORIGIN, actor="test")
    await _log(conn, 11)
    second = await sign_log_checkpoint(conn, signer, ORIGIN, actor="test")
    assert first is not None and second is not None
    assert (first.tree_size, second.tree_size) == (5, 17)  # 5 + checkpoint_signed + 11
    tree = await load_tree(conn, size=second.tree_size)
    assert tree.root == second.root
    verify_consistency(5, 17, first.root, second.root, tree.consistency_proof(5))
    leaves = [tree.leaf(i) for i in range(tree.size)]
    stored = await latest_checkpoint(conn)
    assert stored is not None and stored.frontier == pack_frontier(frontier_from_leaf_hashes(leaves))
    head = await (await conn.execute("SELECT hash FROM trace_event WHERE seq = 17")).fetchone()
    assert stored.chain_head == bytes(head[0])
    assert await sign_log_checkpoint(conn, signer, ORIGIN, actor="test", min_new_events=2) is None  # only its event


@pytest.mark.parametrize("role", SERVICE_ROLES)
async def test_no_service_role_changes_or_removes_a_stored_frontier(conn: Any, database: Database, role: str) -> None:
    await _log(conn, 3)
    signed = await sign_log_checkpoint(conn, generate_signer(ORIGIN), ORIGIN, actor="test")
    assert signed is not None and signed.frontier is not None
    with _as(database, role) as attacker:
        for attack in (
            "UPDATE trace_checkpoint SET frontier = decode(repeat('ab', 64), 'hex')",
            "UPDATE trace_checkpoint SET chain_head = decode(repeat('ab', 32), 'hex')",
            "DELETE FROM trace_checkpoint",
            "TRUNCATE trace_checkpoint",
        ):
            with pytest.raises(REFUSED):
                attacker.execute(attack)
    stored = await latest_checkpoint(conn)
    assert stored is not None and stored.frontier == signed.frontier and stored.chain_head == signed.chain_head


async def test_not_even_the_owner_updates_a_frontier_with_the_triggers_on(conn: Any) -> None:
    await _log(conn, 3)
    await sign_log_checkpoint(conn, generate_signer(ORIGIN), ORIGIN, actor="test")
    with pytest.raises(REFUSED):
        await conn.execute("UPDATE trace_checkpoint SET frontier = frontier")


async def test_the_engine_role_cannot_insert_a_checkpoint_whose_frontier_does_not_fit(
    conn: Any, database: Database
) -> None:
    await _log(conn, 3)  # frontier of 3 leaves: two hashes
    leaves = (await load_tree(conn)).leaf
    frontier = [bytes(32), leaves(2)]
    head = await (await conn.execute("SELECT hash FROM trace_event WHERE seq = 3")).fetchone()
    assert head is not None
    insert = (
        "INSERT INTO trace_checkpoint (tree_size, root, origin, key_name, note, frontier, chain_head)"
        " VALUES (3, %s, 'o', 'k', 'n', %s, %s)"
    )
    with _as(database, "engine") as engine:
        with pytest.raises(psycopg.errors.CheckViolation, match="does not hash to the root"):
            engine.execute(insert, (bytes(32), pack_frontier(frontier), head[0]))
        with pytest.raises(psycopg.errors.CheckViolation, match="chain head is not the hash of event 3"):
            engine.execute(insert, (frontier_root(frontier), pack_frontier(frontier), bytes(32)))
        with pytest.raises(psycopg.errors.CheckViolation, match="carries its Merkle frontier"):
            engine.execute(insert.replace("%s, %s)", "NULL, %s)"), (frontier_root(frontier), head[0]))
        # the negative control: the same row with a frontier that folds to its root and the real head is admitted
        engine.execute(insert, (frontier_root(frontier), pack_frontier(frontier), head[0]))
    with _as(database, "callbacks") as callbacks, pytest.raises(REFUSED):
        callbacks.execute(insert, (frontier_root(frontier), pack_frontier(frontier), head[0]))


async def test_a_wrong_stored_frontier_makes_signing_refuse(conn: Any) -> None:
    signer = generate_signer(ORIGIN)
    await _log(conn, 6)  # frontier of 6 leaves: 4 + 2
    signed = await sign_log_checkpoint(conn, signer, ORIGIN, actor="test")
    assert signed is not None and signed.frontier is not None
    await _log(conn, 2)
    wrong = signed.frontier[:32] + bytes(32)
    await _unfrozen(conn, "UPDATE trace_checkpoint SET frontier = %s", params=(wrong,))
    with pytest.raises(LogInconsistent, match="stored frontier does not hash to the signed root"):
        await sign_log_checkpoint(conn, signer, ORIGIN, actor="test")
    with pytest.raises(psycopg.errors.CheckViolation, match="trace_checkpoint_frontier_fits"):  # the wrong shape
        await _unfrozen(conn, "UPDATE trace_checkpoint SET frontier = %s", params=(signed.frontier[:32],))
    await _unfrozen(conn, "UPDATE trace_checkpoint SET frontier = %s", params=(signed.frontier,))
    assert await sign_log_checkpoint(conn, signer, ORIGIN, actor="test") is not None  # the negative control


async def test_a_stored_chain_head_the_new_events_do_not_link_to_makes_signing_refuse(conn: Any) -> None:
    signer = generate_signer(ORIGIN)
    await _log(conn, 4)
    await sign_log_checkpoint(conn, signer, ORIGIN, actor="test")
    await _log(conn, 2)
    await _unfrozen(conn, "UPDATE trace_checkpoint SET chain_head = decode(repeat('cd', 32), 'hex')")
    with pytest.raises(LogInconsistent, match="event 5 since the signed tree: prev_hash does not link"):
        await sign_log_checkpoint(conn, signer, ORIGIN, actor="test")


async def test_a_row_that_disagrees_with_its_signed_note_makes_signing_refuse(conn: Any) -> None:
    signer = generate_signer(ORIGIN)
    await _log(conn, 4)
    signed = await sign_log_checkpoint(conn, signer, ORIGIN, actor="test")
    assert signed is not None
    other = frontier_from_leaf_hashes([bytes(32)] * 4)  # a frontier that folds to the row's (forged) root
    await _unfrozen(
        conn, "UPDATE trace_checkpoint SET root = %s, frontier = %s", params=(frontier_root(other), other[0])
    )
    with pytest.raises(LogInconsistent, match="does not match its signed note"):
        await sign_log_checkpoint(conn, signer, ORIGIN, actor="test")


async def test_a_checkpoint_signed_before_0023_is_read_once_in_full_then_carried_on(conn: Any) -> None:
    signer = generate_signer(ORIGIN)
    await _log(conn, 7)
    legacy = await sign_log_checkpoint(conn, signer, ORIGIN, actor="test")
    assert legacy is not None
    await _unfrozen(conn, "UPDATE trace_checkpoint SET frontier = NULL, chain_head = NULL")
    await _log(conn, 3)
    signed = await sign_log_checkpoint(conn, signer, ORIGIN, actor="test")
    assert signed is not None and signed.tree_size == 11  # 7, the first checkpoint's event, 3
    tree = await load_tree(conn, size=signed.tree_size)
    assert signed.root == tree.root
    assert signed.frontier == pack_frontier(frontier_from_leaf_hashes([tree.leaf(i) for i in range(tree.size)]))


async def test_a_legacy_checkpoint_whose_events_were_edited_makes_the_full_read_refuse(conn: Any) -> None:
    signer = generate_signer(ORIGIN)
    await _log(conn, 5)
    await sign_log_checkpoint(conn, signer, ORIGIN, actor="test")
    await _unfrozen(conn, "UPDATE trace_checkpoint SET frontier = NULL, chain_head = NULL")
    await conn.execute("ALTER TABLE trace_event DISABLE TRIGGER USER")
    await conn.execute("UPDATE trace_event SET payload = '{\"i\": 99}' WHERE seq = 2")
    await conn.execute("ALTER TABLE trace_event ENABLE ALWAYS TRIGGER trace_event_append_only")
    await _log(conn, 1)
    with pytest.raises(LogInconsistent, match="event 2: content"):
        await sign_log_checkpoint(conn, signer, ORIGIN, actor="test")


async def _rechain_with_edit(conn: Any, seq: int, payload: dict[str, Any]) -> None:
    """The careful attacker: edit one event and recompute every hash after it, so the chain itself verifies."""
    events = [e async for e in iter_events(conn)]
    await conn.execute("ALTER TABLE trace_event DISABLE TRIGGER USER")
    prev = GENESIS_HASH
    for event in events:
        body = event.body()
        if event.seq == seq:
            body["payload"] = payload
            await conn.execute("UPDATE trace_event SET payload = %s WHERE seq = %s", (Jsonb(payload), seq))
        digest = chain_hash(prev, canonical_bytes(body))
        await conn.execute("UPDATE trace_event SET prev_hash = %s, hash = %s WHERE seq = %s", (prev, digest, event.seq))
        prev = digest
    await conn.execute("UPDATE trace_head SET hash = %s", (prev,))
    await conn.execute("ALTER TABLE trace_event ENABLE ALWAYS TRIGGER trace_event_append_only")
    await conn.execute("ALTER TABLE trace_event ENABLE ALWAYS TRIGGER trace_event_no_truncate")


async def test_trace_verify_holds_the_log_to_every_signed_root_and_names_the_first_it_no_longer_gives(
    conn: Any,
) -> None:
    signer = generate_signer(ORIGIN)
    await _log(conn, 5)
    await sign_log_checkpoint(conn, signer, ORIGIN, actor="test")  # tree size 5
    await _log(conn, 3)
    second = await sign_log_checkpoint(conn, signer, ORIGIN, actor="test")  # tree size 9
    assert second is not None
    verdict = await verify_log(conn)
    assert verdict.chain.ok and verdict.checkpoints == 2 and verdict.chain.root == (await load_tree(conn)).root
    await _rechain_with_edit(conn, 7, {"i": 99})  # after the first checkpoint, before the second
    assert (await verify_chain(conn)).ok  # the chain alone no longer tells
    with pytest.raises(LogInconsistent, match="checkpoint at tree size 9: the first events no longer hash"):
        await verify_log(conn)
    await _rechain_with_edit(conn, 2, {"i": 98})  # now before both: the first signed root is named
    with pytest.raises(LogInconsistent, match="checkpoint at tree size 5: the first events no longer hash"):
        await verify_log(conn)
    # the signer, which reads only what came after tree size 9, sees the rewritten chain at the head it stored
    await _log(conn, 1)
    with pytest.raises(LogInconsistent, match="event 10 since the signed tree: prev_hash does not link"):
        await sign_log_checkpoint(conn, signer, ORIGIN, actor="test")


async def test_trace_verify_names_a_log_shorter_than_its_last_checkpoint(conn: Any) -> None:
    signer = generate_signer(ORIGIN)
    await _log(conn, 6)
    await sign_log_checkpoint(conn, signer, ORIGIN, actor="test")
    await conn.execute("ALTER TABLE trace_event DISABLE TRIGGER USER")
    await conn.execute("DELETE FROM trace_event WHERE seq > 4")
    await conn.execute("UPDATE trace_head SET seq = 4, hash = (SELECT hash FROM trace_event WHERE seq = 4)")
    assert (await verify_chain(conn)).ok
    with pytest.raises(LogInconsistent, match="holds 4 events, fewer than the 6 signed"):
        await verify_log(conn)
