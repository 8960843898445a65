"""Tampering the way an attacker with superuser rights would: triggers disabled, rows edited. All detected."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from countersign.audit.bundle import BundleInvalid, build_bundle, verify_bundle
from countersign.audit.checkpoint import encode_verifier_key, generate_signer
from countersign.audit.merkle import verify_consistency, verify_inclusion
from countersign.audit.trace import append_event, iter_events, seal_pending, verify_chain
from countersign.audit.transparency_log import (
    LogInconsistent,
    check_against_latest_checkpoint,
    latest_checkpoint,
    load_tree,
    sign_log_checkpoint,
)
from countersign.states import TraceKind

ORIGIN = "countersign.test/close-trace"


async def _log(conn: Any, n: int, close_id: str | None = None) -> None:
    for i in range(n):
        async with conn.transaction():
            await append_event(
                conn, actor="orchestrator", kind=TraceKind.MODEL_STEP, close_id=close_id, payload={"i": i}
            )
    await seal_pending(conn)


async def _attack(conn: Any, *statements: str) -> None:
    await conn.execute("ALTER TABLE trace_event DISABLE TRIGGER USER")
    for statement in statements:
        await conn.execute(statement)
    for trigger in ("trace_event_append_only", "trace_event_no_truncate"):
        await conn.execute(f"ALTER TABLE trace_event ENABLE ALWAYS TRIGGER {trigger}")


@pytest.mark.parametrize(
    ("attack", "first_bad"),
    [
        (["UPDATE trace_event SET payload = '{\"i\": 42}' WHERE seq = 4"], 4),
        (["UPDATE trace_event SET ts = '2020-01-01T00:00:00.000000Z' WHERE seq = 6"], 6),
        (["UPDATE trace_event SET hash = decode(repeat('ab', 32), 'hex') WHERE seq = 5"], 5),
        (
            [
                "UPDATE trace_event SET seq = 1000003 WHERE seq = 3",
                "UPDATE trace_event SET seq = 3 WHERE seq = 4",
                "UPDATE trace_event SET seq = 4 WHERE seq = 1000003",
            ],
            3,
        ),
    ],
    ids=["payload", "timestamp", "hash", "reorder"],
)
async def test_edits_are_detected_and_the_first_bad_seq_named(conn: Any, attack: list[str], first_bad: int) -> None:
    await _log(conn, 8)
    assert (await verify_chain(conn)).ok
    await _attack(conn, *attack)
    result = await verify_chain(conn)
    assert not result.ok
    assert result.first_bad_seq == first_bad


async def test_deleting_the_newest_events_is_caught_by_the_signed_checkpoint(conn: Any) -> None:
    signer = generate_signer(ORIGIN)
    await _log(conn, 10)
    signed = await sign_log_checkpoint(conn, signer, ORIGIN, actor="test")
    assert signed is not None and signed.tree_size == 10
    # A careful attacker drops the checkpoint event and the last three events and rewinds the head, so the chain
    # itself still verifies...
    await _attack(
        conn,
        "DELETE FROM trace_event WHERE seq > 8",
        "UPDATE trace_head SET seq = 8, hash = (SELECT hash FROM trace_event WHERE seq = 8)",
    )
    assert (await verify_chain(conn)).ok
    # ...but not against what was signed.
    with pytest.raises(LogInconsistent, match="fewer than the 10 signed"):
        await check_against_latest_checkpoint(conn)


async def test_the_log_never_signs_a_checkpoint_over_an_edited_event_since_the_last(conn: Any) -> None:
    signer = generate_signer(ORIGIN)
    await _log(conn, 6)
    first = await sign_log_checkpoint(conn, signer, ORIGIN, actor="test")
    assert first is not None and first.tree_size == 6
    await _log(conn, 3)  # seq 7 is the checkpoint_signed event; 8, 9 and 10 are new
    await _attack(conn, "UPDATE trace_event SET payload = '{\"i\": 99}' WHERE seq = 9")
    with pytest.raises(LogInconsistent, match="event 9 since the signed tree: content"):
        await sign_log_checkpoint(conn, signer, ORIGIN, actor="test")
    latest = await latest_checkpoint(conn)
    assert latest is not None and latest.tree_size == first.tree_size


async def test_an_edit_before_the_last_checkpoint_is_for_trace_verify_not_the_signer(conn: Any) -> None:
    """By design (ADR 0039) the signer reads only the events since the last checkpoint: an edit before it goes
    unnoticed when signing, and `trace verify` (the chain, and the full tree against the checkpoint) names it."""
    signer = generate_signer(ORIGIN)
    await _log(conn, 6)
    first = await sign_log_checkpoint(conn, signer, ORIGIN, actor="test")
    assert first is not None
    await _attack(conn, "UPDATE trace_event SET payload = '{\"i\": 99}' WHERE seq = 2")
    await _log(conn, 2)
    second = await sign_log_checkpoint(conn, signer, ORIGIN, actor="test")
    assert second is not None and second.tree_size == 9  # 6, the first checkpoint_signed event, 2 more
    result = await verify_chain(conn)
    assert not result.ok and result.first_bad_seq == 2
    with pytest.raises(LogInconsistent, match="no longer hash to the signed root"):
        await check_against_latest_checkpoint(conn)


async def test_checkpoints_are_append_only(conn: Any) -> None:
    await _log(conn, 3)
    await sign_log_checkpoint(conn, generate_signer(ORIGIN), ORIGIN, actor="test")
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        await conn.execute("DELETE FROM trace_checkpoint")


async def test_proofs_from_the_database_verify(conn: Any) -> None:
    await _log(conn, 37)
    tree = await load_tree(conn)
    old = await load_tree(conn, size=20)
    for index in (0, 17, 36):
        verify_inclusion(tree.leaf(index), index, tree.size, tree.inclusion_proof(index), tree.root)
    verify_consistency(20, tree.size, old.root, tree.root, tree.consistency_proof(20))


async def _bundle(conn: Any) -> tuple[bytes, str]:
    signer = generate_signer(ORIGIN)
    close = "00000000-0000-0000-0000-00000000c105"
    await _log(conn, 4)
    await _log(conn, 5, close_id=close)
    await _log(conn, 3)
    stored = await sign_log_checkpoint(conn, signer, ORIGIN, actor="test")
    assert stored is not None
    tree = await load_tree(conn, size=stored.tree_size)
    events = [e async for e in iter_events(conn, close_id=close)]
    key = encode_verifier_key(signer.verifier())
    return build_bundle(close_id=close, events=events, tree=tree, checkpoint_note=stored.note, verifier_key=key), key


async def test_a_bundle_verifies_offline_and_any_changed_byte_fails_with_a_reason(conn: Any) -> None:
    data, key = await _bundle(conn)
    report = verify_bundle(data, pinned_key=key)
    assert report.events == 5 and report.tree_size == 12
    failures = set()
    for position in range(0, len(data), max(1, len(data) // 97)):
        tampered = bytearray(data)
        tampered[position] ^= 0x01
        with pytest.raises(BundleInvalid) as invalid:
            verify_bundle(bytes(tampered), pinned_key=key)
        failures.add(invalid.value.reason.split(":")[0])
    assert failures  # each changed byte produced a reason


async def test_a_bundle_resigned_by_another_key_fails_when_the_key_is_pinned(conn: Any) -> None:
    data, _ = await _bundle(conn)
    other = encode_verifier_key(generate_signer(ORIGIN).verifier())
    with pytest.raises(BundleInvalid, match="not the key you pinned"):
        verify_bundle(data, pinned_key=other)


async def test_a_rebuilt_bundle_with_an_edited_event_fails_on_the_proof(conn: Any) -> None:
    import hashlib
    import io
    import json
    import zipfile

    from countersign.audit.bundle import FILES, _archive

    data, key = await _bundle(conn)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        files = {name: archive.read(name) for name in FILES}
    files["events.jsonl"] = files["events.jsonl"].replace(b'"i": 2', b'"i": 7', 1)
    manifest = json.loads(files["manifest.json"])
    manifest["sha256"]["events.jsonl"] = hashlib.sha256(files["events.jsonl"]).hexdigest()
    files["manifest.json"] = (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()
    with pytest.raises(BundleInvalid, match="does not match its chain hash"):
        verify_bundle(_archive(files), pinned_key=key)
