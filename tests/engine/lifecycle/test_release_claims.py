"""A stopping process ends its own outbox claims and dispatch leases at once, and nobody else's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from countersign.engine.dispatch import release_dispatch_leases
from countersign.engine.outbox import claim_due, enqueue, release_outbox_claims
from tests.support import count, start_default_close

OURS = "host-a:101:"
THEIRS = "host-a:1010:"  # shares our prefix's characters but is another process


async def test_a_released_outbox_claim_is_due_again_for_another_holder(conn: Any) -> None:
    for n in (1, 2):
        await enqueue(
            conn,
            dedupe_key=f"m{n}",
            platform="slack",
            channel="C1",
            kind="notice",
            template="checkpoint",
            payload={"tree_size": n},
        )
    (first,) = await claim_due(conn, holder=OURS + "x1", limit=1, claim_s=60)
    (_theirs,) = await claim_due(conn, holder=THEIRS + "x2", limit=1, claim_s=60)

    assert await release_outbox_claims(conn, OURS) == 1

    retaken = await claim_due(conn, holder="host-b:7:y", claim_s=60)
    assert [m.message_id for m in retaken] == [first.message_id]  # theirs is still held


async def test_a_released_dispatch_lease_ends_now(conn: Any, runtime: Any, default_books: Path) -> None:
    close_id = await start_default_close(conn, runtime, default_books)
    for key, holder in (("k-ours", OURS + "x1"), ("k-theirs", THEIRS + "x2")):
        await conn.execute(
            "INSERT INTO dispatch (idempotency_key, close_id, task, attempt, specialist, input_digest, leased_by,"
            " lease_until) VALUES (%s, %s, 'accruals', 1, 'accruals', 'd', %s, now() + interval '1 minute')",
            (key, close_id, holder),
        )

    assert await release_dispatch_leases(conn, OURS) == 1

    live = "SELECT count(*) FROM dispatch WHERE idempotency_key = %s AND lease_until > now()"
    assert (await count(conn, live, "k-ours"), await count(conn, live, "k-theirs")) == (0, 1)
