"""Exporting a close's trace from any door: the one use case Slack, Teams and the CLI call; and an evidence bundle.

The export is itself a trace event (`trace_exported`: who, which close, the format, the SHA-256 and size of the
bytes), recorded before the bytes are handed back, so no door can hand out a trace the trace does not know of.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection

from countersign.audit.bundle import build_bundle
from countersign.audit.checkpoint import NoteSigner, encode_verifier_key
from countersign.audit.decision_proofs import (
    ED25519,
    PASSKEY,
    DecisionKey,
    GateEvidence,
    ed25519_key_text,
    passkey_key_text,
)
from countersign.audit.export import FORMATS, export_events
from countersign.audit.trace import iter_events, seal_pending
from countersign.audit.transparency_log import latest_checkpoint, load_tree, sign_log_checkpoint
from countersign.callbacks.callers import record_trace_exported
from countersign.callbacks.decision_writer import Seal
from countersign.engine.runs import load_close
from countersign.store.decision_keys import DecisionKeyRow, read_decision_keys
from countersign.store.gates import GateFacts, read_gates_of_close

BUNDLE = (
    "bundle"  # the export format that is a zip an auditor verifies offline, beside countersign.audit.export.FORMATS
)


class UnknownExportFormat(ValueError):
    def __init__(self, fmt: str) -> None:
        super().__init__(f"format must be one of {', '.join(FORMATS)}, not {fmt!r}")
        self.fmt = fmt


@dataclass(frozen=True)
class ExportedTrace:
    close_id: str
    fmt: str
    data: bytes
    events: int
    first_seq: int  # 0 when the close has no sealed events
    last_seq: int
    head_hash_hex: str  # the last exported event's hash; "" when there is none


async def export_trace(
    conn: AsyncConnection[Any],
    *,
    close_id: str,
    fmt: str,
    requested_by: str,
    platform: str,
    seal: Seal | None = None,
) -> ExportedTrace:
    """The close's sealed events as `fmt` (countersign.audit.export.FORMATS), recorded as exported by `requested_by`
    through
    `platform` ("slack", "teams", "cli") before they are returned. The caller checks the close exists."""
    if fmt not in FORMATS:
        raise UnknownExportFormat(fmt)
    events = [e async for e in iter_events(conn, close_id=close_id)]
    data = export_events(events, fmt)
    await record_trace_exported(
        conn, principal_id=requested_by, close_id=close_id, fmt=fmt, data=data, platform=platform, seal=seal
    )
    return ExportedTrace(
        close_id=close_id,
        fmt=fmt,
        data=data,
        events=len(events),
        first_seq=events[0].seq if events else 0,
        last_seq=events[-1].seq if events else 0,
        head_hash_hex=events[-1].hash.hex() if events else "",
    )


RoleConnect = Callable[[str], AbstractAsyncContextManager[AsyncConnection[Any]]]  # "engine" / "owner" -> connection


@dataclass(frozen=True)
class ExportedBundle:
    close_id: str
    data: bytes  # the zip file an auditor verifies offline (countersign.audit.bundle.verify_bundle)
    events: int


async def export_bundle(
    connect: RoleConnect, *, close_id: str, signer: NoteSigner, origin: str, requested_by: str, platform: str
) -> ExportedBundle:
    """An evidence bundle of the close: its sealed events, the log tree and a checkpoint `signer` signs now, and the
    key to verify it. Then the export is recorded as a trace event, as the owner (the engine role may not write it)."""
    async with connect("engine") as conn:
        await load_close(conn, close_id)
        await seal_pending(conn)
        await sign_log_checkpoint(conn, signer, origin, actor=requested_by)
        latest = await latest_checkpoint(conn)
        assert latest is not None
        tree = await load_tree(conn, size=latest.tree_size)
        events = [e async for e in iter_events(conn, close_id=close_id, upto_seq=latest.tree_size)]
        gates = await _gate_evidence(conn, close_id)
        data = build_bundle(
            close_id=close_id,
            events=events,
            tree=tree,
            checkpoint_note=latest.note,
            verifier_key=encode_verifier_key(signer.verifier()),
            gates=gates,
        )
    async with connect("owner") as conn:
        await record_trace_exported(
            conn, principal_id=requested_by, close_id=close_id, fmt=BUNDLE, data=data, platform=platform
        )
    return ExportedBundle(close_id=close_id, data=data, events=len(events))


async def _gate_evidence(conn: AsyncConnection[Any], close_id: str) -> list[GateEvidence]:
    """decisions.json's gates: every gate of the close with its signed facts and the keys of its person's-key
    decisions (a decision whose key the database no longer holds is left out; the bundle then names it)."""
    keys: dict[str, list[DecisionKey]] = {}
    for row in await read_decision_keys(conn, close_id):
        key = _decision_key(row)
        if key is not None:
            keys.setdefault(row.gate_id, []).append(key)
    return [
        GateEvidence(_facts_json(gate.facts), tuple(keys.get(gate.gate_id, ())))
        for gate in await read_gates_of_close(conn, close_id)
    ]


def _facts_json(facts: GateFacts) -> dict[str, Any]:
    fields = facts.digest_fields()
    amount = fields["amount"]
    return {**fields, "amount": None if amount is None else format(amount, "f"), "summary_json": facts.summary_json}


def _decision_key(row: DecisionKeyRow) -> DecisionKey | None:
    signed_under = (row.principal_id, *row.logins)
    if row.channel == "board":
        if row.passkey_public_key is None or row.credential_id is None:
            return None
        return DecisionKey(
            row.decision_id,
            row.principal_id,
            signed_under,
            PASSKEY,
            passkey_key_text(row.passkey_public_key),
            row.credential_id,
        )
    if row.public_key is None:
        return None
    return DecisionKey(row.decision_id, row.principal_id, signed_under, ED25519, ed25519_key_text(row.public_key))
