"""The outbox: messages to chat platforms, written in the same transaction as the fact they announce.

A gate's card is enqueued once per configured channel (UNIQUE per gate, platform and channel); card updates are
enqueued under a key that includes the gate state they show (`countersign.store.gates.card_state`, the one definition
the
deliverer also stores as a card's rendered state), so a state is announced once.

A row carries facts, never text to post: the gate, the message kind and, for a notice, a template name from
NOTICE_TEMPLATES with its arguments (ids and numbers). The deliverer renders every message from the tables through
`countersign/cards/`; the database refuses a row with anything else (migration 0009).

Delivery (in `countersign/bot/`) claims due rows with a lease (`claimed_by`, `claimed_until`) in one short statement,
gives the
connection back, calls the platform, renews the claim while the call runs, and records the outcome in a new short
transaction. Any number of workers can deliver without sending twice, and none holds a connection or a row lock
while Slack or Teams answers.

A message that fails is retried for a time budget (COUNTERSIGN_OUTBOX_BUDGET_HOURS, from `budget_from`: its creation
or its last redrive), never for a number of attempts (ADR 0035). The waits are tenacity's exponential backoff with
equal jitter and a cap; a platform's Retry-After is honoured. The next attempt's time is in the row
(`next_attempt_at`), so a restart loses no schedule. Only an attempt that fails once the budget is spent dead-letters
the message (`failed`, `dead_lettered_at`); `redrive_dead_letters` puts dead letters back with a fresh budget, and
the database lets a row move only pending → sent | failed and failed → pending by a redrive (migration 0021).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import class_row, scalar_row
from psycopg.types.json import Jsonb
from tenacity import RetryCallState, Retrying, wait_exponential, wait_random_exponential

from countersign.cards.targets import ChannelTarget as ChannelTarget
from countersign.states import OutboxKind, OutboxStatus
from countersign.store.gates import card_state

DEFAULT_BUDGET_HOURS = 24.0  # COUNTERSIGN_OUTBOX_BUDGET_HOURS: how long a message is retried before it is dead-lettered
BACKOFF_BASE_S = 1.0  # the first wait's ceiling; each failure doubles it
BACKOFF_CAP_S = 300.0  # no wait is longer (five minutes), however long the outage
RETRY_AFTER_MAX_S = 3600.0  # a platform's Retry-After is honoured up to an hour
# Equal jitter: half the exponential wait fixed, the other half drawn at random, so workers that failed together do not
# come back together, and no wait is shorter than half its step.
BACKOFF = wait_exponential(multiplier=BACKOFF_BASE_S / 2, max=BACKOFF_CAP_S / 2) + wait_random_exponential(
    multiplier=BACKOFF_BASE_S / 2, max=BACKOFF_CAP_S / 2
)
CLAIM_S = 5.0  # a delivery's claim, renewed every CLAIM_S / 3 during the call; a dead deliverer's lapses within it

# Notice templates and the arguments each takes. The migrations' CHECK (`outbox_row_is_facts`) holds the same list.
NOTICE_TEMPLATES: dict[str, frozenset[str]] = {
    "gate_overdue": frozenset(),  # the gate's row says everything: task, role, due and expiry, approvals
    "checkpoint": frozenset({"tree_size"}),  # the signed checkpoint at that tree size, witnessed in the channel
    # A passkey enrolled for the person the notice goes to (a Slack user id), named by its credential id (a
    # base64url string). Only the database writes it, as the enrolment is redeemed (migration 0017): the engine
    # never enqueues it, and `enqueue_notices` takes integer arguments only.
    "passkey_enrolled": frozenset({"credential_id"}),
    # A pay-less notice (migration 0018) or a payment notice (0025) Countersign recorded: the deliverer posts its
    # document from the row.
    "pay_less_notice": frozenset({"notice_id"}),
    "payment_notice": frozenset({"notice_id"}),
}
# The templates only the database writes; `enqueue_notices` refuses them.
DATABASE_NOTICES = frozenset({"passkey_enrolled"})


class NotAFact(ValueError):
    """A notice whose template or arguments are not in NOTICE_TEMPLATES."""


@dataclass(frozen=True)
class OutboxMessage:
    message_id: int
    dedupe_key: str
    close_id: str | None
    gate_id: str | None
    platform: str
    channel: str
    kind: str
    payload: dict[str, Any]
    attempts: int
    template: str | None = None


async def enqueue(
    conn: AsyncConnection[Any],
    *,
    dedupe_key: str,
    platform: str,
    channel: str,
    kind: str,
    close_id: str | None = None,
    gate_id: str | None = None,
    payload: dict[str, Any] | None = None,
    template: str | None = None,
) -> int | None:
    """Insert once; returns the new id, or None when the same message was already enqueued."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute(
            "INSERT INTO outbox_message (dedupe_key, close_id, gate_id, platform, channel, kind, payload, template)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING RETURNING message_id",
            (dedupe_key, close_id, gate_id, platform, channel, kind, Jsonb(payload or {}), template),
        )
        message_id: int | None = await cur.fetchone()
    return message_id


async def enqueue_gate_cards(
    conn: AsyncConnection[Any], *, close_id: str, gate_id: str, channels: tuple[ChannelTarget, ...]
) -> None:
    await _enqueue_per_channel(
        conn,
        key=f"gate_card:{gate_id}",
        kind=OutboxKind.GATE_CARD,
        channels=channels,
        close_id=close_id,
        gate_id=gate_id,
    )


async def enqueue_notices(
    conn: AsyncConnection[Any],
    *,
    key: str,
    template: str,
    close_id: str,
    channels: tuple[ChannelTarget, ...],
    gate_id: str | None = None,
    args: dict[str, int] | None = None,
) -> None:
    """A notice once per channel, as a template name and its arguments; `key` names the fact, so announcing it twice
    sends nothing more. The deliverer renders the text from the tables when it posts."""
    args = dict(args or {})
    if template in DATABASE_NOTICES:
        raise NotAFact(f"notice {template!r} is written only by the database, never enqueued")
    allowed = NOTICE_TEMPLATES.get(template)
    if allowed is None:
        raise NotAFact(f"unknown notice template {template!r}; known: {', '.join(sorted(NOTICE_TEMPLATES))}")
    if set(args) != allowed or not all(type(v) is int for v in args.values()):
        raise NotAFact(f"notice {template!r} takes the integer arguments {sorted(allowed)}, got {sorted(args)}")
    await _enqueue_per_channel(
        conn,
        key=key,
        kind=OutboxKind.NOTICE,
        channels=channels,
        close_id=close_id,
        gate_id=gate_id,
        payload=args,
        template=template,
    )


async def _enqueue_per_channel(
    conn: AsyncConnection[Any],
    *,
    key: str,
    kind: str,
    channels: tuple[ChannelTarget, ...],
    close_id: str,
    gate_id: str | None,
    payload: dict[str, Any] | None = None,
    template: str | None = None,
) -> None:
    for target in channels:
        await enqueue(
            conn,
            dedupe_key=f"{key}:{target.platform}:{target.channel}",
            platform=target.platform,
            channel=target.channel,
            kind=kind,
            close_id=close_id,
            gate_id=gate_id,
            payload=payload,
            template=template,
        )


@dataclass(frozen=True)
class PostedCard:
    """A gate card posted to one channel, the state its gate is in now, and the state the channel last showed."""

    gate_id: str
    close_id: str | None
    platform: str
    channel: str
    status: str
    approvals: int
    rejections: int
    last_rendered: str | None

    @property
    def state(self) -> str:
        return card_state(self.status, self.approvals, self.rejections)


async def enqueue_card_updates(conn: AsyncConnection[Any], gate_id: str | None = None) -> list[int]:
    """For every posted gate card whose gate has moved on since it was rendered, enqueue one update."""
    async with conn.cursor(row_factory=class_row(PostedCard)) as cur:
        await cur.execute(
            "SELECT o.gate_id::text AS gate_id, o.close_id::text AS close_id, o.platform, o.channel,"
            "       s.status, s.approvals::int AS approvals, s.rejections::int AS rejections,"
            "       (SELECT u.rendered_state FROM outbox_message u"
            "         WHERE u.gate_id = o.gate_id AND u.platform = o.platform AND u.channel = o.channel"
            "           AND u.kind IN ('gate_card', 'card_update') AND u.status = 'sent'"
            "         ORDER BY u.sent_at DESC LIMIT 1) AS last_rendered"
            "  FROM outbox_message o JOIN gate_state s USING (gate_id)"
            " WHERE o.kind = 'gate_card' AND o.status = 'sent' AND (%s::uuid IS NULL OR o.gate_id = %s::uuid)",
            (gate_id, gate_id),
        )
        cards = await cur.fetchall()
    created = []
    for card in cards:
        state = card.state
        if state == card.last_rendered:
            continue
        new_id = await enqueue(
            conn,
            dedupe_key=f"card_update:{card.gate_id}:{card.platform}:{card.channel}:{state}",
            platform=card.platform,
            channel=card.channel,
            kind=OutboxKind.CARD_UPDATE,
            close_id=card.close_id,
            gate_id=card.gate_id,
            payload={"state": state},
        )
        if new_id is not None:
            created.append(new_id)
    return created


CLAIM_COLUMNS = (
    "message_id, dedupe_key, close_id::text AS close_id, gate_id::text AS gate_id, platform, channel, kind, payload,"
    " attempts, template"
)


async def claim_due(
    conn: AsyncConnection[Any],
    *,
    holder: str,
    limit: int = 50,
    message_ids: list[int] | None = None,
    claim_s: float = CLAIM_S,
) -> list[OutboxMessage]:
    """Claim due messages (or due ones among `message_ids`) for `holder` until now + `claim_s`, in one statement.

    Nothing stays locked after it returns: the claim is a column, so the caller can give its connection back.
    """
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


async def renew_claim(conn: AsyncConnection[Any], message_id: int, *, holder: str, claim_s: float = CLAIM_S) -> bool:
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
    await conn.execute(
        "UPDATE outbox_message SET status = 'sent', sent_at = now(), attempts = attempts + 1,"
        " platform_message_id = %s, rendered_state = %s, last_error = NULL, claimed_by = NULL, claimed_until = NULL"
        " WHERE message_id = %s AND status = 'pending' AND (%s::text IS NULL OR claimed_by = %s)",
        (platform_message_id, rendered_state, message_id, holder, holder),
    )


def backoff_s(failures: int) -> float:
    """The wait after the `failures`-th failed attempt of a budget: tenacity's exponential backoff (0.5–1 s, 1–2 s,
    2–4 s … up to 150–300 s) with equal jitter."""
    state = RetryCallState(Retrying(), None, (), {})
    state.attempt_number = max(failures, 1)
    return float(BACKOFF(state))


def budget_seconds(budget_hours: float) -> float:
    if not budget_hours > 0:
        raise ValueError(f"an outbox budget is a positive number of hours, not {budget_hours!r}")
    return budget_hours * 3600.0


async def mark_retry(
    conn: AsyncConnection[Any],
    message: OutboxMessage,
    *,
    error: str,
    retry_after_s: float | None = None,
    holder: str | None = None,
    budget_hours: float = DEFAULT_BUDGET_HOURS,
) -> OutboxStatus:
    """Schedule the next attempt (at a platform's Retry-After, else after `backoff_s`), or dead-letter the message
    when this failure came once its budget was spent. Returns the new status.

    The next attempt is never later than the budget's end (the last one falls on it), unless a Retry-After asks for
    later: that is honoured, and the attempt after it is the last.
    """
    attempts = message.attempts + 1
    honour_s = 0.0 if retry_after_s is None else min(max(retry_after_s, 0.0), RETRY_AFTER_MAX_S)
    wait_s = backoff_s(attempts) if retry_after_s is None else honour_s
    budget_s = budget_seconds(budget_hours)
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
                "id": message.message_id,
                "budget": budget_s,
                "wait": wait_s,
                "honour": honour_s,
                "holder": holder,
                "error": error[:1000],
                "gave_up": f"retry budget of {budget_hours:g} h spent after {attempts} attempts: {error}"[:1000],
            },
        )
        status: str | None = await cur.fetchone()
    return OutboxStatus(status) if status is not None else OutboxStatus.PENDING


async def mark_failed(conn: AsyncConnection[Any], message_id: int, *, error: str, holder: str | None = None) -> None:
    """Dead-letter a message at once (a permanent failure: a 4xx, no sender for its platform)."""
    await conn.execute(
        "UPDATE public.outbox_message SET status = 'failed', dead_lettered_at = now(), attempts = attempts + 1,"
        " last_error = %s, claimed_by = NULL, claimed_until = NULL"
        " WHERE message_id = %s AND status = 'pending' AND (%s::text IS NULL OR claimed_by = %s)",
        (error[:1000], message_id, holder, holder),
    )


async def posted_message_id(conn: AsyncConnection[Any], gate_id: str, platform: str, channel: str) -> str | None:
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
    platform: str
    channel: str
    kind: str
    gate_id: str | None
    attempts: int
    error: str | None
    created_at: datetime


async def failed_deliveries(conn: AsyncConnection[Any], close_id: str) -> list[dict[str, Any]]:
    """The close's messages that gave up, as JSON-ready dicts (close status prints them)."""
    async with conn.cursor(row_factory=class_row(FailedDelivery)) as cur:
        await cur.execute(
            "SELECT message_id, platform, channel, kind, gate_id::text AS gate_id, attempts, last_error AS error,"
            " created_at FROM outbox_message WHERE close_id = %s AND status = 'failed' ORDER BY message_id",
            (close_id,),
        )
        failed = await cur.fetchall()
    return [{**asdict(row), "created_at": row.created_at.isoformat()} for row in failed]


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
    platform: str | None = None,
    since: datetime | None = None,
) -> list[int]:
    """Put dead-lettered messages (optionally of one gate, one platform, dead-lettered at or after `since`) back to
    pending with a fresh budget, due now; returns their ids. A second call finds nothing more to redrive.

    The deliverer renders a redriven message from the tables as they are when it posts, so a card for a gate decided
    meanwhile shows its decision; a sent message is never redriven (the database refuses it, migration 0021).
    """
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
class OutboxSummary:
    """The outbox at a glance: messages by status and platform, how old the oldest pending one is (from its budget's
    start), and how many pending ones are past their budget (none while a deliverer runs)."""

    counts: dict[str, dict[str, int]]  # status -> platform -> messages
    oldest_pending_age_s: float | None
    past_budget: int
    budget_hours: float


async def outbox_summary(conn: AsyncConnection[Any], *, budget_hours: float = DEFAULT_BUDGET_HOURS) -> OutboxSummary:
    async with conn.cursor() as cur:
        await cur.execute(
            "SELECT status, platform, count(*)::int FROM public.outbox_message GROUP BY status, platform"
            " ORDER BY status, platform"
        )
        counts: dict[str, dict[str, int]] = {status.value: {} for status in OutboxStatus}
        for status, platform, n in await cur.fetchall():
            counts.setdefault(status, {})[platform] = n
        await cur.execute(
            "SELECT extract(epoch FROM now() - min(budget_from))::float8,"
            " count(*) FILTER (WHERE now() >= budget_from + make_interval(secs => %s))::int"
            " FROM public.outbox_message WHERE status = 'pending'",
            (budget_seconds(budget_hours),),
        )
        row = await cur.fetchone()
    assert row is not None
    return OutboxSummary(counts, row[0], row[1], budget_hours)
