"""Exporting a close's trace from any door: the one use case Slack, Teams and the CLI call.

The export is itself a trace event (`trace_exported`: who, which close, the format, the SHA-256 and size of the
bytes), recorded before the bytes are handed back, so no door can hand out a trace the trace does not know of.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection

from audit.export import FORMATS, export_events
from audit.trace import iter_events
from callbacks.callers import record_trace_exported
from callbacks.decision_writer import Seal


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
    """The close's sealed events as `fmt` (audit.export.FORMATS), recorded as exported by `requested_by` through
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
