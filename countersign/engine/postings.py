"""Idempotent journal postings.

A posting carries a deterministic key. The database holds the key UNIQUE and a hash of the request beside it:
the same key with the same request returns the journal already posted; the same key with a different request
is a conflict, raised loudly. Balance and closed periods are enforced by triggers, not here. The SQL lives in
`countersign.store.journals`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

import orjson
from psycopg import AsyncConnection, errors

from countersign.audit.trace import append_event
from countersign.drill_hooks.kill_points import KillPoint, kill_point
from countersign.states import TraceKind
from countersign.store import journals
from countersign.store.journals import JournalLine as JournalLine
from countersign.store.journals import StoredJournalKey as StoredJournalKey


@dataclass(frozen=True)
class JournalRequest:
    idempotency_key: str
    entity: str
    period: str
    journal_date: date
    memo: str
    lines: Sequence[JournalLine]
    source_close: str | None = None
    source_task: str | None = None

    def request_hash(self) -> str:
        body = {
            "entity": self.entity,
            "period": self.period,
            "journal_date": self.journal_date.isoformat(),
            "memo": self.memo,
            "lines": [[line.account, str(line.amount), line.description] for line in self.lines],
            "source_close": self.source_close,
            "source_task": self.source_task,
        }
        return hashlib.sha256(orjson.dumps(body, option=orjson.OPT_SORT_KEYS)).hexdigest()


@dataclass(frozen=True)
class PostedJournal:
    journal_id: int
    idempotency_key: str
    created: bool


class PostingConflict(Exception):
    """The key was used before for a different journal."""

    def __init__(self, idempotency_key: str, journal_id: int) -> None:
        super().__init__(
            f"idempotency key {idempotency_key!r} already posted journal {journal_id} with a different payload;"
            " refusing to post a changed journal under an old key"
        )
        self.idempotency_key = idempotency_key
        self.journal_id = journal_id


class PostingRefused(Exception):
    """The database refused the journal (unbalanced, closed period, ...)."""

    def __init__(self, idempotency_key: str, reason: str) -> None:
        super().__init__(f"journal {idempotency_key!r} refused: {reason}")
        self.idempotency_key = idempotency_key
        self.reason = reason


async def _existing(conn: AsyncConnection[Any], request: JournalRequest) -> PostedJournal | None:
    stored = await journals.journal_key(conn, request.idempotency_key)
    if stored is None:
        return None
    if stored.request_hash != request.request_hash():
        raise PostingConflict(request.idempotency_key, stored.journal_id)
    return PostedJournal(stored.journal_id, request.idempotency_key, created=False)


async def post_journal(conn: AsyncConnection[Any], request: JournalRequest, *, posted_by: str) -> PostedJournal:
    """Post once. Runs in its own transaction (a savepoint when the caller already holds one)."""
    found = await _existing(conn, request)
    if found is not None:
        return found
    try:
        async with conn.transaction():
            inserted = await journals.insert_journal(
                conn,
                journals.NewJournal(
                    idempotency_key=request.idempotency_key,
                    request_hash=request.request_hash(),
                    entity=request.entity,
                    period=request.period,
                    journal_date=request.journal_date,
                    memo=request.memo,
                    source_close=request.source_close,
                    source_task=request.source_task,
                    posted_by=posted_by,
                ),
            )
            if inserted is None:  # a concurrent poster won the key between our read and our insert
                raced = await _existing(conn, request)
                assert raced is not None
                return raced
            journal_id = inserted
            await journals.insert_journal_lines(conn, journal_id, request.lines)
            kill_point(KillPoint.POSTING_MID)
            # Check the deferred balance trigger now, inside this savepoint, so a bad journal fails here.
            await journals.check_journal_balanced(conn)
            await append_event(
                conn,
                actor=posted_by,
                kind=TraceKind.JOURNAL_POSTED,
                close_id=request.source_close,
                payload={
                    "journal_id": journal_id,
                    "idempotency_key": request.idempotency_key,
                    "memo": request.memo,
                    "task": request.source_task,
                    "lines": [
                        {"account": line.account, "amount": str(line.amount), "description": line.description}
                        for line in request.lines
                    ],
                },
            )
    except (errors.CheckViolation, errors.RaiseException, errors.ForeignKeyViolation) as exc:
        message = exc.diag.message_primary or str(exc)
        raise PostingRefused(request.idempotency_key, message) from exc
    return PostedJournal(journal_id, request.idempotency_key, created=True)
