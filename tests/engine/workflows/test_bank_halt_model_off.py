"""The bank halt keeps its own reason on the attempt after an approved model-off escalation (docs/adr/0036).

With no recorded responses, a bank reconciliation that halts also misses its explanation's recording, and the
narration's `no_recorded_response` names the escalation. Approving it re-runs the task with `model_off`: the books
still do not reconcile, so it halts again, now as the anomaly it is (`anomaly_over_tolerance`), with the
deterministic explanation flagged and no model asked.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from countersign.audit.trace import iter_events
from countersign.bootstrap.runtime import engine_context
from countersign.bootstrap.settings import PROJECT_ROOT, Settings
from countersign.engine.orchestrator import advance
from countersign.engine.runs import task_rows
from countersign.specialists.narration import MODEL_OFF_FIELD
from tests.engine.workflow_support import approve_open_gates
from tests.support import start_default_close

BANK = "bank_reconciliation"


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """The shipped config, but an empty cassette folder: every model request misses its recording."""
    empty = tmp_path / "no-cassettes"
    empty.mkdir()
    return Settings(
        database_url=None,
        state_dir=tmp_path / "state",
        config_dir=PROJECT_ROOT / "config",
        callback_secret="test-callback-secret",
        cassette_dir=empty,
    )


@pytest_asyncio.fixture
async def replay_ctx(runtime: Any) -> AsyncIterator[Any]:
    async with engine_context(runtime) as ctx:
        yield ctx


async def _dispatched(conn: Any, close_id: str) -> list[tuple[int, Any, Any, Any]]:
    async with conn.cursor() as cur:
        await cur.execute(
            "SELECT attempt, result->>'escalation', result->'explanation_flags',"
            " jsonb_array_length(result->'model_steps')"
            " FROM dispatch WHERE close_id = %s AND task = %s ORDER BY attempt",
            (close_id, BANK),
        )
        return list(await cur.fetchall())


async def test_an_approved_no_recorded_response_bank_halt_halts_again_as_the_anomaly(
    conn: Any, runtime: Any, replay_ctx: Any, api: Any, default_books: Path
) -> None:
    close_id = await start_default_close(conn, runtime, default_books)
    await advance(conn, close_id, replay_ctx)
    first = (await task_rows(conn, close_id))[BANK]
    assert (first.status, first.attempt, first.escalation) == ("halted", 1, "no_recorded_response")

    await approve_open_gates(api, conn, close_id, tasks={BANK})  # the feed is not corrected
    await advance(conn, close_id, replay_ctx)

    second = (await task_rows(conn, close_id))[BANK]
    assert (second.status, second.attempt, second.escalation) == ("halted", 2, "anomaly_over_tolerance")
    dispatched = await _dispatched(conn, close_id)
    assert [row[:3] for row in dispatched] == [
        (1, "no_recorded_response", ["no_recorded_response_escalation"]),
        (2, None, ["no_recorded_response_fallback"]),
    ]
    assert dispatched[1][3] == 0  # attempt 2 asked no model
    started = [
        (e.payload["attempt"], e.payload.get(MODEL_OFF_FIELD))
        async for e in iter_events(conn, close_id=close_id)
        if e.kind == "task_started" and e.payload.get("task") == BANK
    ]
    assert started == [(1, None), (2, "no_recorded_response")]
