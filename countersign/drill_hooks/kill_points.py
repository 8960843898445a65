"""Deterministic kill points for the restart drill. Inert unless the drill sets COUNTERSIGN_DRILL_KILL_AT.

It is a room of its own (`drill_hooks`), below every room that has a kill point; it touches no trace. When the named
point is reached in a process whose environment names it, the process SIGKILLs itself — once: the drill's marker file
makes the replacement process run through.
"""

from __future__ import annotations

import os
import signal
from enum import StrEnum

KILL_AT_ENV = "COUNTERSIGN_DRILL_KILL_AT"
MARKER_ENV = "COUNTERSIGN_DRILL_KILL_MARKER"


class KillPoint(StrEnum):
    """Where a drilled process may kill itself: the value is the name COUNTERSIGN_DRILL_KILL_AT and `--point` take."""

    DISPATCH_AFTER_CALL = "dispatch.after_call"
    TASK_AFTER_RESULT = "task.after_result"
    POSTING_MID = "posting.mid"
    GATES_BEFORE_APPLY = "gates.before_apply"
    CARD_BEFORE_POST = "card.before_post"
    TRACE_MID_SEAL = "trace.mid_seal"
    # inside an advance job: the run's tables moved, the job not yet finished (countersign/engine/jobs.py)
    JOB_AFTER_ADVANCE = "job.after_advance"


POINTS = tuple(KillPoint)


def kill_point(point: KillPoint) -> None:
    if os.environ.get(KILL_AT_ENV) != point:
        return
    marker = os.environ.get(MARKER_ENV)
    if marker:
        try:
            descriptor = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        except FileExistsError:
            return
        os.close(descriptor)
    os.kill(os.getpid(), signal.SIGKILL)
