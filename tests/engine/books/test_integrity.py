"""The drills' exactly-once counts: what they read, and that an unfinished close fails them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.integrity import PostingCounts, closed_count, exactly_once_checks, posting_counts, server_identity
from tests.support import start_default_close


async def test_the_server_names_itself_postgresql(conn: Any) -> None:
    server = await server_identity(conn)
    assert server.version.startswith("PostgreSQL ") and " on " not in server.version
    assert server.database


async def test_a_close_that_has_not_run_fails_the_exactly_once_checks(
    conn: Any, runtime: Any, default_books: Path
) -> None:
    close_id = await start_default_close(conn, runtime, default_books)

    checks = {check.label: check for check in await exactly_once_checks(conn, close_id)}

    assert checks["accrual journals"].value == 0 and not checks["accrual journals"].holds
    assert checks["period_closed events"].value == 0 and not checks["period_closed events"].holds
    assert checks["gate_opened events per gate"].holds  # no gate opened yet, and no event says one did
    assert await posting_counts(conn, close_id) == PostingCounts(0, 0, 0, 0)
    assert await closed_count(conn, [close_id]) == 0
