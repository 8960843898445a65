"""Trace exports an auditor can read: JSON or CSV, the same bytes whichever door they come out of."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable
from typing import Any

from countersign.audit.trace import TraceEvent

CSV_COLUMNS = ("seq", "ts", "close_id", "actor", "writer", "kind", "payload", "version_set", "prev_hash", "hash")
FORMATS = ("json", "csv")


def event_record(event: TraceEvent) -> dict[str, Any]:
    return {
        "seq": event.seq,
        "ts": event.ts,
        "close_id": event.close_id,
        "actor": event.actor,
        "writer": event.writer,
        "kind": event.kind,
        "payload": dict(event.payload),
        "version_set": dict(event.version_set),
        "prev_hash": event.prev_hash.hex(),
        "hash": event.hash.hex(),
    }


def export_events(events: Iterable[TraceEvent], fmt: str) -> bytes:
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, not {fmt!r}")
    records = [event_record(e) for e in events]
    if fmt == "json":
        return (json.dumps(records, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for r in records:
        writer.writerow(
            [
                r["seq"],
                r["ts"],
                r["close_id"],
                r["actor"],
                r["writer"] or "",
                r["kind"],
                json.dumps(r["payload"], sort_keys=True, ensure_ascii=False),
                json.dumps(r["version_set"], sort_keys=True, ensure_ascii=False),
                r["prev_hash"],
                r["hash"],
            ]
        )
    return buffer.getvalue().encode("utf-8")
