"""The outbox table: messages to chat platforms, their claims, their outcomes, their dead letters and redrives.

Reads and writes `outbox_message`; reads `gate_state` (the state a posted card's gate is in now). Called by
countersign/engine/outbox.py (which owns the rules: the dedupe keys, the notice templates, the claim's length, the
retry budget and its backoff), through it by countersign/delivery/worker.py and countersign/engine/shutdown.py, and
by countersign/engine/jobs.py (when delivery is next due). Every function runs on the caller's connection, in the
caller's transaction; a claim is a column (`claimed_by`, `claimed_until`), so no row stays locked after it returns.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import class_row, scalar_row
from psycopg.types.json import Jsonb

from countersign.states import ChatPlatform, GateStatus, OutboxKind, OutboxStatus
from countersign.store.gates import card_state


@dataclass(frozen=True)
class OutboxMessage:
    message_id: int
    dedupe_key: str
    close_id: str | None
    gate_id: str | None
    platform: ChatPlatform
    channel: str
    kind: OutboxKind
    payload: dict[str, Any]
    attempts: int
    template: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", OutboxKind(self.kind))  # the column's word, as its Enum
        object.__setattr__(self, "platform", ChatPlatform(self.platform))


async def insert_message(
    conn: AsyncConnection[Any],
    *,
    dedupe_key: str,
    platform: ChatPlatform,
    channel: str,
    kind: OutboxKind,
    close_id: str | None = None,
    gate_id: str | None = None,
    payload: dict[str, Any] | None = None,
    template: str | None = None,
) -> int | None:
    """Insert once; returns the new id, or None when a message under the same key was already enqueued."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute(
            "INSERT INTO outbox_message (dedupe_key, close_id, gate_id, platform, channel, kind, payload, template)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING RETURNING message_id",
            (dedupe_key, close_id, gate_id, platform, channel, kind, Jsonb(payload or {}), template),
        )
        message_id: int | None = await cur.fetchone()
    return message_id


@dataclass(frozen=True)
class PostedCard:
    """A gate card posted to one channel, the state its gate is in now, and the state the channel last showed."""

    gate_id: str
    close_id: str | None
    platform: ChatPlatform
    channel: str
    status: GateStatus
    approvals: int
    rejections: int
    last_rendered: str | None

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", GateStatus(self.status))  # the view's word, as its Enum
        object.__setattr__(self, "platform", ChatPlatform(self.platform))

    @property
    def state(self) -> str:
        return card_state(self.status, self.approvals, self.rejections)


POSTED_CARDS = (
    "SELECT o.gate_id::text AS gate_id, o.close_id::text AS close_id, o.platform, o.channel,"
    "       s.status, s.approvals::int AS approvals, s.rejections::int AS rejections,"
    "       (SELECT u.rendered_state FROM outbox_message u"
    "         WHERE u.gate_id = o.gate_id AND u.platform = o.platform AND u.channel = o.channel"
    "           AND u.kind IN ('gate_card', 'card_update') AND u.status = 'sent'"
    "         ORDER BY u.sent_at DESC LIMIT 1) AS last_rendered"
    "  FROM outbox_message o JOIN gate_state s USING (gate_id)"
    " WHERE o.kind = 'gate_card' AND o.status = 'sent'"
)
POSTED_CARDS_OF_GATE = POSTED_CARDS + " AND o.gate_id = %s::uuid"
"""One gate's posted cards: its own statement, so a prepared (generic) plan still finds them by the gate's index, and
each card's last render by `outbox_message_renders` (migration `outbox_renders_index`), not by scanning the outbox."""


async def posted_cards(conn: AsyncConnection[Any], gate_id: str | None = None) -> list[PostedCard]:
    """Every gate card posted (of one gate, or of all), with its gate's state now and the last state rendered."""
    async with conn.cursor(row_factory=class_row(PostedCard)) as cur:
        if gate_id is None:
            await cur.execute(POSTED_CARDS)
        else:
            await cur.execute(POSTED_CARDS_OF_GATE, (gate_id,))
        return await cur.fetchall()


CLAIM_COLUMNS = (
    "message_id, dedupe_key, close_id::text AS close_id, gate_id::text AS gate_id, platform, channel, kind, payload,"
    " attempts, template"
)


async def claim_due(
    conn: AsyncConnection[Any], *, holder: str, limit: int, message_ids: list[int] | None, claim_s: float
) -> list[OutboxMessage]:
    """Claim due messages (or due ones among `message_ids`), at most `limit`, for `holder` until now + `claim_s`, in
    one statement (rows another transaction holds are skipped); returns them in id order."""
    async with conn.cursor(row_factory=class_row(OutboxMessage)) as cur:
        await cur.execute(
            f"UPDATE outbox_message SET claimed_by = %s, claimed_until = now() + make_interval(secs => %s)"
            f" WHERE message_id IN (SELECT message_id FROM outbox_message"
            f"   WHERE status = 'pending' AND next_attempt_at <= now()"
            f"     AND (claimed_until IS NULL OR claimed_until < now())"
            f"     AND (%s::bigint[] IS NULL OR message_id = ANY(%s::bigint[]))"
            f"   ORDER BY message_id LIMIT %s FOR UPDATE SKIP LOCKED)"
            f" RETURNING {CLAIM_COLUMNS}",
            (holder, claim_s, message_ids, message_ids, limit),
        )
        return sorted(await cur.fetchall(), key=lambda m: m.message_id)


async def renew_claim(conn: AsyncConnection[Any], message_id: int, *, holder: str, claim_s: float) -> bool:
    """Extend `holder`'s claim of a pending message to `claim_s` from now; False when the claim is not theirs."""
    async with conn.cursor() as cur:
        await cur.execute(
            "UPDATE outbox_message SET claimed_until = now() + make_interval(secs => %s)"
            " WHERE message_id = %s AND claimed_by = %s AND status = 'pending' RETURNING message_id",
            (claim_s, message_id, holder),
        )
        return await cur.fetchone() is not None


async def mark_sent(
    conn: AsyncConnection[Any],
    message_id: int,
    *,
    platform_message_id: str | None,
    rendered_state: str | None,
    holder: str | None = None,
) -> None:
    """Record a pending message as sent (only under `holder`'s claim, when one is named) and end its claim."""
    await conn.execute(
        "UPDATE outbox_message SET status = 'sent', sent_at = now(), attempts = attempts + 1,"
        " platform_message_id = %s, rendered_state = %s, last_error = NULL, claimed_by = NULL, claimed_until = NULL"
        " WHERE message_id = %s AND status = 'pending' AND (%s::text IS NULL OR claimed_by = %s)",
        (platform_message_id, rendered_state, message_id, holder, holder),
    )


async def schedule_retry(
    conn: AsyncConnection[Any],
    message_id: int,
    *,
    budget_s: float,
    wait_s: float,
    honour_s: float,
    holder: str | None,
    error: str,
    gave_up: str,
) -> OutboxStatus | None:
    """Count a failed attempt of a pending message (under `holder`'s claim, when one is named) and end its claim.

    Once `budget_s` from its budget's start has passed the message is dead-lettered with `gave_up` as its error;
    otherwise it stays pending with `error`, next due `wait_s` from now but no later than the budget's end, unless
    `honour_s` from now is later still. Returns the new status, or None when no such message was pending."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute(
            "UPDATE public.outbox_message SET attempts = attempts + 1, claimed_by = NULL, claimed_until = NULL,"
            " status = CASE WHEN now() >= budget_from + make_interval(secs => %(budget)s) THEN 'failed'"
            "   ELSE 'pending' END,"
            " dead_lettered_at = CASE WHEN now() >= budget_from + make_interval(secs => %(budget)s) THEN now() END,"
            " last_error = CASE WHEN now() >= budget_from + make_interval(secs => %(budget)s) THEN %(gave_up)s"
            "   ELSE %(error)s END,"
            " next_attempt_at = least(now() + make_interval(secs => %(wait)s),"
            "   greatest(budget_from + make_interval(secs => %(budget)s), now() + make_interval(secs => %(honour)s)))"
            " WHERE message_id = %(id)s AND status = 'pending'"
            "   AND (%(holder)s::text IS NULL OR claimed_by = %(holder)s)"
            " RETURNING status",
            {
                "id": message_id,
                "budget": budget_s,
                "wait": wait_s,
                "honour": honour_s,
                "holder": holder,
                "error": error,
                "gave_up": gave_up,
            },
        )
        status: str | None = await cur.fetchone()
    return OutboxStatus(status) if status is not None else None


async def mark_failed(conn: AsyncConnection[Any], message_id: int, *, error: str, holder: str | None = None) -> None:
    """Dead-letter a pending message at once (under `holder`'s claim, when one is named) and end its claim."""
    await conn.execute(
        "UPDATE public.outbox_message SET status = 'failed', dead_lettered_at = now(), attempts = attempts + 1,"
        " last_error = %s, claimed_by = NULL, claimed_until = NULL"
        " WHERE message_id = %s AND status = 'pending' AND (%s::text IS NULL OR claimed_by = %s)",
        (error, message_id, holder, holder),
    )


async def posted_message_id(
    conn: AsyncConnection[Any], gate_id: str, platform: ChatPlatform, channel: str
) -> str | None:
    """The platform's id of the gate card posted to this channel, or None when none was (or the platform gave none)."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute(
            "SELECT platform_message_id FROM outbox_message WHERE kind = 'gate_card' AND status = 'sent'"
            " AND gate_id = %s AND platform = %s AND channel = %s",
            (gate_id, platform, channel),
        )
        platform_message_id: str | None = await cur.fetchone()
    return platform_message_id or None


@dataclass(frozen=True)
class FailedDelivery:
    message_id: int
    platform: ChatPlatform
    channel: str
    kind: OutboxKind
    gate_id: str | None
    attempts: int
    error: str | None
    created_at: datetime

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", OutboxKind(self.kind))  # the column's word, as its Enum
        object.__setattr__(self, "platform", ChatPlatform(self.platform))


async def failed_deliveries(conn: AsyncConnection[Any], close_id: str) -> list[FailedDelivery]:
    """The close's dead-lettered messages, in id order."""
    async with conn.cursor(row_factory=class_row(FailedDelivery)) as cur:
        await cur.execute(
            "SELECT message_id, platform, channel, kind, gate_id::text AS gate_id, attempts, last_error AS error,"
            " created_at FROM outbox_message WHERE close_id = %s AND status = 'failed' ORDER BY message_id",
            (close_id,),
        )
        return await cur.fetchall()


async def release_outbox_claims(conn: AsyncConnection[Any], holder_prefix: str) -> int:
    """End now every live claim whose holder id starts with `holder_prefix` (a stopping process's); returns how many."""
    async with conn.cursor() as cur:
        await cur.execute(
            "UPDATE outbox_message SET claimed_until = now()"
            " WHERE left(claimed_by, length(%(p)s)) = %(p)s AND claimed_until > now()",
            {"p": holder_prefix},
        )
        return max(cur.rowcount, 0)


async def redrive_dead_letters(
    conn: AsyncConnection[Any],
    *,
    gate_id: str | None = None,
    platform: ChatPlatform | None = None,
    since: datetime | None = None,
) -> list[int]:
    """Put dead-lettered messages (optionally of one gate, one platform, dead-lettered at or after `since`) back to
    pending with a fresh budget, due now; returns their ids in order. A sent message is never redriven (the database
    refuses it, migration 0021)."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute(
            "UPDATE public.outbox_message SET status = 'pending', dead_lettered_at = NULL, redrives = redrives + 1,"
            " attempts = 0, budget_from = greatest(now(), budget_from + interval '1 microsecond'),"
            " next_attempt_at = now(), claimed_by = NULL, claimed_until = NULL"
            " WHERE status = 'failed' AND (%(gate)s::uuid IS NULL OR gate_id = %(gate)s::uuid)"
            "   AND (%(platform)s::text IS NULL OR platform = %(platform)s)"
            "   AND (%(since)s::timestamptz IS NULL OR dead_lettered_at >= %(since)s)"
            " RETURNING message_id",
            {"gate": gate_id, "platform": platform, "since": since},
        )
        redriven: list[int] = await cur.fetchall()
    return sorted(redriven)


@dataclass(frozen=True)
class MessageCount:
    """How many messages of one platform are in one status."""

    status: OutboxStatus
    platform: ChatPlatform
    messages: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", OutboxStatus(self.status))  # the column's word, as its Enum
        object.__setattr__(self, "platform", ChatPlatform(self.platform))


async def message_counts(conn: AsyncConnection[Any]) -> list[MessageCount]:
    """Messages by status and platform (only the pairs that have any), in that order."""
    async with conn.cursor(row_factory=class_row(MessageCount)) as cur:
        await cur.execute(
            "SELECT status, platform, count(*)::int AS messages FROM public.outbox_message GROUP BY status, platform"
            " ORDER BY status, platform"
        )
        return await cur.fetchall()


@dataclass(frozen=True)
class PendingAge:
    """How long ago the oldest pending message's budget started (None when none is pending), and how many pending
    messages are past a budget."""

    oldest_pending_age_s: float | None
    past_budget: int


async def pending_age(conn: AsyncConnection[Any], budget_s: float) -> PendingAge:
    async with conn.cursor(row_factory=class_row(PendingAge)) as cur:
        await cur.execute(
            "SELECT extract(epoch FROM now() - min(budget_from))::float8 AS oldest_pending_age_s,"
            " count(*) FILTER (WHERE now() >= budget_from + make_interval(secs => %s))::int AS past_budget"
            " FROM public.outbox_message WHERE status = 'pending'",
            (budget_s,),
        )
        row = await cur.fetchone()
    assert row is not None  # an aggregate returns its one row
    return row


async def next_pending_due_at(conn: AsyncConnection[Any]) -> datetime | None:
    """When the next pending message is due (its claim ended, a second from now at the soonest), if one waits."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute(
            "SELECT min(greatest(next_attempt_at, coalesce(claimed_until, next_attempt_at),"
            " now() + interval '1 second')) FROM outbox_message WHERE status = 'pending'"
        )
        due: datetime | None = await cur.fetchone()
    return due
