"""Deterministic kill points for the restart drill. Inert unless the drill sets COUNTERSIGN_DRILL_KILL_AT.

It lives in `audit` only because every package may import `audit`; it touches no trace. When the named point is
reached in a process whose environment names it, the process SIGKILLs itself — once: the drill's marker file makes
the replacement process run through.
"""

from __future__ import annotations

import os
import signal

KILL_AT_ENV = "COUNTERSIGN_DRILL_KILL_AT"
MARKER_ENV = "COUNTERSIGN_DRILL_KILL_MARKER"
POINTS = (
    "dispatch.after_call",
    "task.after_result",
    "posting.mid",
    "gates.before_apply",
    "card.before_post",
    "trace.mid_seal",
    # inside an advance job: the run's tables moved, the job not yet finished (countersign/engine/jobs.py)
    "job.after_advance",
)


def kill_point(name: str) -> None:
    if os.environ.get(KILL_AT_ENV) != name:
        return
    marker = os.environ.get(MARKER_ENV)
    if marker:
        try:
            descriptor = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        except FileExistsError:
            return
        os.close(descriptor)
    os.kill(os.getpid(), signal.SIGKILL)
