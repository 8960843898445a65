"""Idempotent dispatch to specialists.

A2A cannot carry idempotency (the server assigns task ids, and a finished task cannot be continued), so the key
travels in the message metadata and the guarantee lives in our own table: `dispatch.idempotency_key` is UNIQUE.
A repeated dispatch with a completed row returns the stored result and calls nobody. The statements live in
`countersign.store.dispatch`; this module keeps the rules (the keys, the lease, the backoff, the cap on failures)
and each transaction's boundary.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import orjson
from psycopg import AsyncConnection
from tenacity import RetryCallState, Retrying, wait_exponential, wait_random_exponential

from countersign.audit.trace import append_event
from countersign.drill_hooks.kill_points import KillPoint, kill_point
from countersign.engine.leases import Connect, connect_to, holder_id, renewing
from countersign.engine.supervisor import move_task
from countersign.states import DispatchStatus, TaskState, TraceKind
from countersign.store import dispatch as store_dispatch
from countersign.store.dispatch import CountedFailure as CountedFailure
from countersign.store.dispatch import DeadLetter as DeadLetter
from countersign.store.dispatch import DispatchState as DispatchState
from countersign.store.dispatch import dispatch_in_flight as dispatch_in_flight
from countersign.store.dispatch import release_dispatch_leases as release_dispatch_leases

SpecialistCall = Callable[[str, dict[str, Any], str], Awaitable[dict[str, Any]]]


def input_digest(payload: Mapping[str, Any]) -> str:
    return hashlib.sha256(orjson.dumps(payload, option=orjson.OPT_SORT_KEYS)).hexdigest()


def dispatch_key(close_id: str, task: str, attempt: int, digest: str) -> str:
    return hashlib.sha256(f"dispatch:v1:{close_id}:{task}:{attempt}:{digest}".encode()).hexdigest()


class DispatchConflict(Exception):
    def __init__(self, idempotency_key: str, stored_digest: str, new_digest: str) -> None:
        super().__init__(
            f"dispatch key {idempotency_key} was used for input {stored_digest[:12]}…,"
            f" refusing input {new_digest[:12]}…"
        )
        self.idempotency_key = idempotency_key


class DispatchFailed(Exception):
    """The specialist failed; the dispatch will be retried after a backoff."""

    def __init__(self, specialist: str, task: str, reason: str, failures: int = 1) -> None:
        super().__init__(f"{specialist} failed on {task} ({failures} of {MAX_DISPATCH_FAILURES}): {reason}")
        self.specialist = specialist
        self.task = task
        self.reason = reason
        self.failures = failures


class DispatchBackingOff(Exception):
    """A failed dispatch whose next attempt is not due yet: nothing was called."""

    def __init__(self, task: str, retry_in_s: float) -> None:
        super().__init__(f"{task}: next attempt in {retry_in_s:.1f}s")
        self.task = task
        self.retry_in_s = retry_in_s


class DispatchDeadLettered(Exception):
    """The dispatch failed MAX_DISPATCH_FAILURES times; it waits for a person to replay it."""

    def __init__(self, dispatch_id: int, task: str, reason: str) -> None:
        super().__init__(
            f"dispatch {dispatch_id} for {task} dead-lettered after {MAX_DISPATCH_FAILURES} failures: {reason}"
        )
        self.dispatch_id = dispatch_id
        self.task = task
        self.reason = reason


MAX_DISPATCH_FAILURES = 3  # then the dispatch is dead-lettered and its task escalates to a person (ADR 0035)
RETRY_BASE_S = 2.0  # the first wait's ceiling; each failure multiplies it by RETRY_GROWTH
RETRY_GROWTH = 4.0
RETRY_CAP_S = 60.0
# tenacity's exponential backoff with equal jitter: before the 2nd attempt 1–2 s, before the 3rd 4–8 s (the old fixed
# 1 s / 4 s are the floors), never above RETRY_CAP_S; workers whose calls failed together come back apart.
RETRY_BACKOFF = wait_exponential(
    multiplier=RETRY_BASE_S / 2, exp_base=RETRY_GROWTH, max=RETRY_CAP_S / 2
) + wait_random_exponential(multiplier=RETRY_BASE_S / 2, exp_base=RETRY_GROWTH, max=RETRY_CAP_S / 2)


def retry_backoff_s(failures: int) -> float:
    """The wait after a dispatch's `failures`-th failure before it may be called again."""
    state = RetryCallState(Retrying(), None, (), {})
    state.attempt_number = max(failures, 1)
    return float(RETRY_BACKOFF(state))


@dataclass(frozen=True)
class DispatchOutcome:
    idempotency_key: str
    result: dict[str, Any]
    reused: bool


AGENT_PRINCIPALS = {
    "reconciliation": "reconciliation-agent",
    "accruals": "accruals-agent",
    "variance": "variance-agent",
    "extraction": "extraction-agent",
    "adjudication": "adjudication-agent",
}


class DispatchInFlight(Exception):
    """Another worker holds the dispatch's lease and is calling the specialist now: nothing was called."""

    def __init__(self, task: str, holder: str) -> None:
        super().__init__(f"{task}: another worker ({holder}) is calling the specialist")
        self.task = task
        self.holder = holder


# A claim on a dispatch lasts LEASE_S and is renewed every LEASE_S / 3 while the call runs, so a live caller keeps it
# through a call of any (bounded) length and a dead caller's claim passes to another worker within LEASE_S.
LEASE_S = 15.0
WAIT_POLL_S = 0.1  # how often a duplicate caller looks for the holder's result
MAX_WAIT_S = 600.0  # a duplicate caller waits at most this long for a holder that keeps renewing


async def dispatch_once(
    db: AsyncConnection[Any] | Connect,
    call: SpecialistCall,
    *,
    close_id: str,
    task: str,
    attempt: int,
    specialist: str,
    payload: dict[str, Any],
    actor: str,
    wait: bool = True,
    lease_s: float = LEASE_S,
    key: str | None = None,
) -> DispatchOutcome:
    """Call the specialist once per key, holding no connection and no lock while it works.

    The key is `dispatch_key(close_id, task, attempt, digest)` unless the caller names one (a page of a larger
    request keys each page itself); either way a stored request hash that differs from this payload's is a conflict.

    `db` is a way to connect (each step takes a connection for one short transaction and gives it back) or a
    connection the caller keeps (used the same way; the caller holds it, we hold nothing on it during the call).
    The call is claimed with a lease row (`leased_by`, `lease_until`). A duplicate that finds a live lease waits for
    the holder's result when `wait` is true, or raises DispatchInFlight.
    """
    connect = connect_to(db)
    digest = input_digest(payload)
    key = key or dispatch_key(close_id, task, attempt, digest)
    holder = holder_id()
    waited_s = 0.0
    while True:
        async with connect() as conn:
            claim = await _claim(conn, key, close_id, task, attempt, specialist, digest, actor, holder, lease_s)
        if isinstance(claim, DispatchOutcome):
            return claim
        if claim is None:
            break
        if not wait or waited_s >= MAX_WAIT_S:
            raise DispatchInFlight(task, claim)
        await asyncio.sleep(WAIT_POLL_S)
        waited_s += WAIT_POLL_S
    return await _call_and_record(connect, call, key, holder, close_id, task, specialist, payload, actor, lease_s)


async def _claim(
    conn: AsyncConnection[Any],
    key: str,
    close_id: str,
    task: str,
    attempt: int,
    specialist: str,
    digest: str,
    actor: str,
    holder: str,
    lease_s: float,
) -> DispatchOutcome | str | None:
    """One short transaction: the stored result, or the live lease's holder (str), or None when the call is ours."""
    async with conn.transaction():
        await store_dispatch.insert_dispatch(
            conn, key, close_id=close_id, task=task, attempt=attempt, specialist=specialist, digest=digest
        )
        row = await store_dispatch.lock_dispatch(conn, key)
        assert row is not None
        if row.input_digest != digest:
            raise DispatchConflict(key, row.input_digest, digest)
        if row.status == DispatchStatus.DEAD:
            raise DispatchDeadLettered(row.dispatch_id, task, str(row.error))
        if row.status == DispatchStatus.COMPLETED:
            await append_event(
                conn,
                actor=actor,
                close_id=close_id,
                kind=TraceKind.DISPATCH_REUSED,
                payload={"task": task, "specialist": specialist, "idempotency_key": key},
            )
            return DispatchOutcome(key, dict(row.result or {}), reused=True)
        if row.lease_live:
            return str(row.leased_by)
        if row.status == DispatchStatus.FAILED and row.retry_in_s is not None and row.retry_in_s > 0:
            raise DispatchBackingOff(task, row.retry_in_s)
        await store_dispatch.lease_dispatch(conn, key, holder=holder, lease_s=lease_s)
        await append_event(
            conn,
            actor=actor,
            close_id=close_id,
            kind=TraceKind.DISPATCHED,
            payload={
                "task": task,
                "attempt": attempt,
                "to": AGENT_PRINCIPALS.get(specialist, specialist),
                "specialist": specialist,
                "idempotency_key": key,
                "input_digest": digest,
            },
        )
    return None


async def _renew_lease(connect: Connect, key: str, holder: str, lease_s: float) -> bool:
    async with connect() as conn:
        return await store_dispatch.renew_dispatch_lease(conn, key, holder=holder, lease_s=lease_s)


async def _call_and_record(
    connect: Connect,
    call: SpecialistCall,
    key: str,
    holder: str,
    close_id: str,
    task: str,
    specialist: str,
    payload: dict[str, Any],
    actor: str,
    lease_s: float,
) -> DispatchOutcome:
    try:
        async with renewing(lambda: _renew_lease(connect, key, holder, lease_s), every_s=lease_s / 3):
            result = await call(specialist, payload, key)
        kill_point(KillPoint.DISPATCH_AFTER_CALL)
    except Exception as exc:
        raise await _record_failure(connect, key, holder, close_id, task, specialist, actor, exc) from exc
    async with connect() as conn, conn.transaction():
        # Ours if the row is not completed yet: our lease, or a lease that passed to a worker still calling (both
        # asked the same question under the same key). A second result for a completed dispatch changes nothing.
        if not await store_dispatch.complete_dispatch(conn, key, result):
            stored = await store_dispatch.dispatch_result(conn, key)
            assert stored is not None
            return DispatchOutcome(key, dict(stored), reused=True)
        await append_event(
            conn,
            actor=AGENT_PRINCIPALS.get(specialist, specialist),
            close_id=close_id,
            kind=TraceKind.SPECIALIST_RESULT,
            payload={"task": task, "to": actor, "idempotency_key": key, "summary": summarise(result)},
        )
    return DispatchOutcome(key, result, reused=False)


async def _record_failure(
    connect: Connect,
    key: str,
    holder: str,
    close_id: str,
    task: str,
    specialist: str,
    actor: str,
    exc: Exception,
) -> DispatchFailed | DispatchDeadLettered:
    """Count the failure (only while the lease is still ours); returns the DispatchFailed or DispatchDeadLettered to
    raise."""
    reason = f"{type(exc).__name__}: {exc}"[:2000]
    waits = [retry_backoff_s(failures) for failures in range(1, MAX_DISPATCH_FAILURES)]  # drawn now, one per count
    async with connect() as conn, conn.transaction():
        counted = await store_dispatch.count_dispatch_failure(
            conn, key, holder=holder, reason=reason, waits=waits, max_failures=MAX_DISPATCH_FAILURES
        )
        if counted is None:  # the lease passed to another worker, whose outcome counts: report ours, record nothing
            return DispatchFailed(specialist, task, f"{reason} (lease lost; not counted)")
        dispatch_id, failures = counted.dispatch_id, counted.failures
        dead = counted.status == DispatchStatus.DEAD
        await append_event(
            conn,
            actor=AGENT_PRINCIPALS.get(specialist, specialist),
            close_id=close_id,
            kind=TraceKind.DISPATCH_DEAD_LETTERED if dead else TraceKind.DISPATCH_FAILED,
            payload={
                "task": task,
                "specialist": specialist,
                "idempotency_key": key,
                "failures": failures,
                "error": reason[:500],
                "to": actor,
            },
        )
    if dead:
        return DispatchDeadLettered(dispatch_id, task, reason)
    return DispatchFailed(specialist, task, reason, failures)


def summarise(result: Mapping[str, Any]) -> dict[str, Any]:
    """A short, trace-sized view of a specialist result (the full result is in the dispatch row)."""
    keep = ("kind", "halted", "halt_reason", "total", "receipts", "difference", "within_tolerance")
    certificate_keys = ("suspected_injection", "injection_fields", "source", "flags", "citations")
    summary = {key: result[key] for key in (*keep, *certificate_keys) if key in result}
    if "accounts" in result:
        summary["accounts"] = [
            {k: a.get(k) for k in ("account", "bank_lines", "matched", "unmatched_share", "halt")}
            for a in result["accounts"]
        ]
    if "flagged" in result:
        summary["flagged"] = len(result["flagged"])
    return summary


async def dead_letters(conn: AsyncConnection[Any], close_id: str) -> list[dict[str, Any]]:
    """The close's dead-lettered dispatches of its tasks' current attempts, as JSON-ready dicts (close status prints
    them). A dead letter whose task a person has since re-run (a later attempt) waits for nobody and is left out."""
    dead = await store_dispatch.dead_letters(conn, close_id)
    return [
        {**asdict(row), "dead_lettered_at": row.dead_lettered_at.isoformat() if row.dead_lettered_at else None}
        for row in dead
    ]


class NotDeadLettered(LookupError):
    def __init__(self, dispatch_id: int) -> None:
        super().__init__(f"dispatch {dispatch_id} is not dead-lettered (or does not exist)")
        self.dispatch_id = dispatch_id


class NotReplayable(Exception):
    def __init__(self, dispatch_id: int, task: str) -> None:
        super().__init__(
            f"dispatch {dispatch_id}: task {task} has not failed, so nothing is replayed; a dead letter halts its task"
            " behind an escalation gate, and a person approving that gate re-runs it with fresh attempts"
        )
        self.dispatch_id = dispatch_id
        self.task = task


async def replay_dead_letter(conn: AsyncConnection[Any], dispatch_id: int, *, actor: str) -> tuple[str, str]:
    """Give a dead-lettered dispatch three fresh attempts and put its failed task back in the queue.

    Since escalations are typed (issue 11) a dead letter halts its task behind an escalation gate instead of failing
    it, and approving that gate re-runs the task with a fresh dispatch: only a task that failed is replayed here.
    """
    async with conn.transaction():
        row = await store_dispatch.revive_dead_letter(conn, dispatch_id)
        if row is None:
            raise NotDeadLettered(dispatch_id)
        close_id, task = row
        if not await move_task(
            conn,
            close_id,
            task,
            TaskState.PENDING,
            expect=(TaskState.FAILED,),
            reason=f"replayed dispatch {dispatch_id}",
        ):
            raise NotReplayable(dispatch_id, task)
        await append_event(
            conn,
            actor=actor,
            close_id=close_id,
            kind=TraceKind.DISPATCH_REPLAYED,
            payload={"dispatch_id": dispatch_id, "task": task, "to": "orchestrator"},
        )
    return close_id, task
