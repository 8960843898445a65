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

The statements live in `countersign.store.outbox`; this module keeps the rules (the keys, the notice templates, the
claim's length, the budget and its backoff) and runs them in its caller's transaction.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from psycopg import AsyncConnection
from tenacity import RetryCallState, Retrying, wait_exponential, wait_random_exponential

from countersign.cards.targets import ChannelTarget as ChannelTarget
from countersign.states import ChatPlatform, OutboxKind, OutboxStatus
from countersign.store import outbox as store_outbox
from countersign.store.outbox import FailedDelivery as FailedDelivery
from countersign.store.outbox import OutboxMessage as OutboxMessage
from countersign.store.outbox import PostedCard as PostedCard
from countersign.store.outbox import mark_sent as mark_sent
from countersign.store.outbox import posted_message_id as posted_message_id
from countersign.store.outbox import redrive_dead_letters as redrive_dead_letters
from countersign.store.outbox import release_outbox_claims as release_outbox_claims

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
    # The payee's default notice (s. 110B) the CLI recorded for the payee: it belongs to no gate.
    "payee_default_notice": frozenset({"notice_id"}),
    # A direct message to a person an overdue gate was routed to, naming the routing row; only the database writes it,
    # as it routes the gate to that person's own identities (`route_gate_to`, the delegation migration).
    "gate_routed": frozenset({"routing_id"}),
}
# The templates only the database writes; `enqueue_notices` refuses them.
DATABASE_NOTICES = frozenset({"passkey_enrolled", "gate_routed"})


class NotAFact(ValueError):
    """A notice whose template or arguments are not in NOTICE_TEMPLATES."""


async def enqueue(
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
    """Insert once; returns the new id, or None when the same message was already enqueued."""
    return await store_outbox.insert_message(
        conn,
        dedupe_key=dedupe_key,
        platform=platform,
        channel=channel,
        kind=kind,
        close_id=close_id,
        gate_id=gate_id,
        payload=payload,
        template=template,
    )


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
    close_id: str | None,
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
    kind: OutboxKind,
    channels: tuple[ChannelTarget, ...],
    close_id: str | None,
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


async def enqueue_card_updates(conn: AsyncConnection[Any], gate_id: str | None = None) -> list[int]:
    """For every posted gate card whose gate has moved on since it was rendered, enqueue one update."""
    cards = await store_outbox.posted_cards(conn, gate_id)
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
    return await store_outbox.claim_due(conn, holder=holder, limit=limit, message_ids=message_ids, claim_s=claim_s)


async def renew_claim(conn: AsyncConnection[Any], message_id: int, *, holder: str, claim_s: float = CLAIM_S) -> bool:
    return await store_outbox.renew_claim(conn, message_id, holder=holder, claim_s=claim_s)


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
    status = await store_outbox.schedule_retry(
        conn,
        message.message_id,
        budget_s=budget_s,
        wait_s=wait_s,
        honour_s=honour_s,
        holder=holder,
        error=error[:1000],
        gave_up=f"retry budget of {budget_hours:g} h spent after {attempts} attempts: {error}"[:1000],
    )
    return status if status is not None else OutboxStatus.PENDING


async def mark_failed(conn: AsyncConnection[Any], message_id: int, *, error: str, holder: str | None = None) -> None:
    """Dead-letter a message at once (a permanent failure: a 4xx, no sender for its platform)."""
    await store_outbox.mark_failed(conn, message_id, error=error[:1000], holder=holder)


async def failed_deliveries(conn: AsyncConnection[Any], close_id: str) -> list[dict[str, Any]]:
    """The close's messages that gave up, as JSON-ready dicts (close status prints them)."""
    failed = await store_outbox.failed_deliveries(conn, close_id)
    return [{**asdict(row), "created_at": row.created_at.isoformat()} for row in failed]


@dataclass(frozen=True)
class OutboxSummary:
    """The outbox at a glance: messages by status and platform, how old the oldest pending one is (from its budget's
    start), and how many pending ones are past their budget (none while a deliverer runs)."""

    counts: dict[str, dict[str, int]]  # status -> platform -> messages
    oldest_pending_age_s: float | None
    past_budget: int
    budget_hours: float


async def outbox_summary(conn: AsyncConnection[Any], *, budget_hours: float = DEFAULT_BUDGET_HOURS) -> OutboxSummary:
    counts: dict[str, dict[str, int]] = {status.value: {} for status in OutboxStatus}
    for count in await store_outbox.message_counts(conn):
        counts.setdefault(count.status.value, {})[count.platform] = count.messages
    pending = await store_outbox.pending_age(conn, budget_seconds(budget_hours))
    return OutboxSummary(counts, pending.oldest_pending_age_s, pending.past_budget, budget_hours)
