"""The outbox: messages to chat platforms, written in the same transaction as the fact they announce.

A gate's card is enqueued once per configured channel (UNIQUE per gate, platform and channel); card updates are
enqueued under a key that includes the gate state they show (`records.gates.card_state`, the one definition the
deliverer also stores as a card's rendered state), so a state is announced once.

A row carries facts, never text to post: the gate, the message kind and, for a notice, a template name from
NOTICE_TEMPLATES with its arguments (ids and numbers). The deliverer renders every message from the tables through
`cards/`; the database refuses a row with anything else (migration 0009).

Delivery (in `bot/`) claims due rows with a lease (`claimed_by`, `claimed_until`) in one short statement, gives the
connection back, calls the platform, renews the claim while the call runs, and records the outcome in a new short
transaction. Any number of workers can deliver without sending twice, and none holds a connection or a row lock
while Slack or Teams answers.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import class_row, scalar_row
from psycopg.types.json import Jsonb

from records.gates import card_state
from records.states import OutboxKind, OutboxStatus

MAX_ATTEMPTS = 8
MAX_BACKOFF_S = 300.0
CLAIM_S = 5.0  # a delivery's claim, renewed every CLAIM_S / 3 during the call; a dead deliverer's lapses within it

# Notice templates and the arguments each takes. The migrations' CHECK (`outbox_row_is_facts`) holds the same list.
NOTICE_TEMPLATES: dict[str, frozenset[str]] = {
    "gate_overdue": frozenset(),  # the gate's row says everything: task, role, due and expiry, approvals
    "checkpoint": frozenset({"tree_size"}),  # the signed checkpoint at that tree size, witnessed in the channel
    # A passkey enrolled for the person the notice goes to (a Slack user id), named by its credential id (a
    # base64url string). Only the database writes it, as the enrolment is redeemed (migration 0017): the engine
    # never enqueues it, and `enqueue_notices` takes integer arguments only.
    "passkey_enrolled": frozenset({"credential_id"}),
    # A pay-less notice Countersign recorded (migration 0018): the deliverer posts its document from the row.
    "pay_less_notice": frozenset({"notice_id"}),
}
# The templates only the database writes; `enqueue_notices` refuses them.
DATABASE_NOTICES = frozenset({"passkey_enrolled"})


class NotAFact(ValueError):
    """A notice whose template or arguments are not in NOTICE_TEMPLATES."""


@dataclass(frozen=True)
class ChannelTarget:
    platform: str  # "slack" | "teams"
    channel: str  # Slack channel id, or Teams conversation id


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


def backoff_s(attempts: int, retry_after_s: float | None) -> float:
    """Exponential backoff (1, 2, 4 … s, capped), or the platform's Retry-After when it gave one."""
    if retry_after_s is not None:
        return min(max(retry_after_s, 0.0), MAX_BACKOFF_S)
    return min(2.0**attempts, MAX_BACKOFF_S)


async def mark_retry(
    conn: AsyncConnection[Any],
    message: OutboxMessage,
    *,
    error: str,
    retry_after_s: float | None = None,
    holder: str | None = None,
) -> OutboxStatus:
    """Schedule another attempt, or give up after MAX_ATTEMPTS. Returns the new status."""
    attempts = message.attempts + 1
    if attempts >= MAX_ATTEMPTS:
        await mark_failed(conn, message.message_id, error=f"gave up after {attempts} attempts: {error}", holder=holder)
        return OutboxStatus.FAILED
    await conn.execute(
        "UPDATE outbox_message SET attempts = %s, last_error = %s, claimed_by = NULL, claimed_until = NULL,"
        " next_attempt_at = now() + make_interval(secs => %s)"
        " WHERE message_id = %s AND status = 'pending' AND (%s::text IS NULL OR claimed_by = %s)",
        (attempts, error[:1000], backoff_s(attempts - 1, retry_after_s), message.message_id, holder, holder),
    )
    return OutboxStatus.PENDING


async def mark_failed(conn: AsyncConnection[Any], message_id: int, *, error: str, holder: str | None = None) -> None:
    await conn.execute(
        "UPDATE outbox_message SET status = 'failed', attempts = attempts + 1, last_error = %s,"
        " claimed_by = NULL, claimed_until = NULL"
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
