"""Delivering the outbox: post each gate card once per channel, update it in place as decisions arrive.

Rate limits (429), and a 503 that says when to come back, wait for Retry-After; server errors, network failures and
timeouts back off exponentially with jitter (`countersign/engine/outbox.py`), for a time budget in hours
(COUNTERSIGN_OUTBOX_BUDGET_HOURS) before the message is dead-lettered; anything else (a 4xx) is dead-lettered at once.
`close status` shows dead letters and `countersign outbox redrive` puts them back.

No connection is held while Slack or Teams answers. Each message is claimed in one short statement (a lease row,
`countersign/engine/outbox.py`), the connection goes back, what the message shows is read from the tables in a second
short step
and rendered through `countersign/cards/` (linking to the Close Board, whose address each sender holds), the platform
is called with
no connection held (every HTTP call has a `timeout_s`, and the whole message a deadline), and the outcome is recorded
with a third. Messages for different channels go out
concurrently, so a hung Slack does not hold up Teams.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, Protocol

import httpx
from opentelemetry import trace
from psycopg import AsyncConnection
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from countersign.bot.gate_cards import GateView, slack_gate_message, teams_gate_card
from countersign.bot.queries import enrolled_passkey_for_slack_user, gate_card, gate_view, load_gate
from countersign.cards import notices
from countersign.cards.links import gate_page_url
from countersign.drill_hooks.kill_points import KillPoint, kill_point
from countersign.engine.leases import Connect, connect_to, holder_id, renewing
from countersign.engine.outbox import (
    CLAIM_S,
    DEFAULT_BUDGET_HOURS,
    OutboxMessage,
    claim_due,
    mark_failed,
    mark_retry,
    mark_sent,
    posted_message_id,
    renew_claim,
)
from countersign.engine.runs import find_close_record
from countersign.services.default_notices import words_of
from countersign.states import IdentityChannel, OutboxKind, OutboxStatus
from countersign.store.delegations import identity_tenant, read_routing
from countersign.store.gates import read_gate
from countersign.store.payment_notices import read_payee_default_notice, read_payment_notice
from countersign.store.trace import checkpoint_note

log = logging.getLogger("countersign.delivery")
tracer = trace.get_tracer("countersign.delivery")  # a no-op unless the process installed a tracer provider

TIMEOUT_S = 10  # seconds, every HTTP call to Slack or Teams
MESSAGE_DEADLINE_S = 15.0  # one message's whole delivery (token, post); then it is retried later, like a 5xx
CHANNELS_AT_ONCE = 8  # channels delivered concurrently in one pass
INLINE_WAIT_S = 0.5  # how long a click's request waits for its card updates before answering anyway
INLINE_MAX_IN_FLIGHT = 64  # inline deliveries running at once in one server; beyond it the worker delivers


class DeliveryError(Exception):
    def __init__(self, reason: str, *, permanent: bool, retry_after_s: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.permanent = permanent
        self.retry_after_s = retry_after_s


class Sender(Protocol):
    board_url: str  # the Close Board's public base URL: the cards link to each gate's page
    locale: str | None  # COUNTERSIGN_LOCALE: how the cards write amounts (CLDR; None: en_GB)

    async def post(self, channel: str, card: Any) -> str: ...

    async def update(self, channel: str, message_id: str, card: Any) -> None: ...

    async def post_text(self, channel: str, text: str) -> str: ...

    async def post_direct(self, user: str, text: str, *, tenant: str) -> str:
        """A direct message to one person (their Slack user id, their Teams AAD object id in `tenant`)."""
        ...

    def render(self, card: Any) -> Any: ...


def _retry_after(headers: Any) -> float | None:
    """Retry-After in seconds, given as seconds or as an HTTP date (RFC 9110); None when absent or unreadable."""
    value = (headers.get("Retry-After") or headers.get("retry-after")) if headers else None
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(str(value))
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max((when - datetime.now(UTC)).total_seconds(), 0.0)


class SlackSender:
    def __init__(
        self, client: AsyncWebClient, *, board_url: str, locale: str | None, timeout_s: int = TIMEOUT_S
    ) -> None:
        client.timeout = timeout_s  # the SDK's default is 30 s; ours is explicit
        self.client = client
        self.board_url = board_url
        self.locale = locale

    def render(self, card: Any) -> dict[str, Any]:
        return slack_gate_message(card.card if isinstance(card, GateView) else card, locale=self.locale)

    async def post(self, channel: str, card: Any) -> str:
        message = self.render(card)
        response = await self._call(self.client.chat_postMessage, channel=channel, **message)
        return str(response["ts"])

    async def update(self, channel: str, message_id: str, card: Any) -> None:
        await self._call(self.client.chat_update, channel=channel, ts=message_id, **self.render(card))

    async def post_text(self, channel: str, text: str) -> str:
        response = await self._call(self.client.chat_postMessage, channel=channel, text=text)
        return str(response["ts"])

    async def post_direct(self, user: str, text: str, *, tenant: str) -> str:
        """conversations.open with the person's user id, then chat.postMessage into the direct message it returns."""
        opened = await self._call(self.client.conversations_open, users=user)
        channel = (opened.get("channel") or {}).get("id")
        if not channel:
            raise DeliveryError(f"slack conversations.open gave no channel for {user}", permanent=True)
        return await self.post_text(str(channel), text)

    async def _call(self, method: Any, **kwargs: Any) -> Any:
        try:
            return await method(**kwargs)
        except SlackApiError as exc:
            status = exc.response.status_code
            error = exc.response.get("error") if hasattr(exc.response, "get") else None
            reason = f"slack {status}: {error or exc}"
            if status == 429 or status >= 500:
                raise DeliveryError(reason, permanent=False, retry_after_s=_retry_after(exc.response.headers)) from exc
            raise DeliveryError(reason, permanent=True) from exc
        except (OSError, TimeoutError) as exc:
            raise DeliveryError(f"slack unreachable: {exc}", permanent=False) from exc


@dataclass
class TeamsSender:
    """A minimal Bot Framework connector client over httpx (the SDK's uses requests, which tests cannot fake)."""

    app_id: str
    app_password: str | None
    service_url: str
    board_url: str = field(kw_only=True)  # COUNTERSIGN_BOARD_URL: the cards link to each gate's page
    locale: str | None = field(kw_only=True)  # COUNTERSIGN_LOCALE: how the cards write amounts (CLDR; None: en_GB)
    token_url: str | None = None  # TEAMS_TOKEN_URL, a test override: a plain client-credentials POST, no msal
    app_type: str = "MultiTenant"  # TEAMS_APP_TYPE: MultiTenant | SingleTenant | UserAssignedMSI
    tenant_id: str | None = None  # TEAMS_APP_TENANT_ID
    http: httpx.AsyncClient = field(default_factory=lambda: httpx.AsyncClient(timeout=TIMEOUT_S))
    _token: str | None = None
    _token_expires_at: float = 0.0
    _tokens: Any = None

    def render(self, card: Any) -> dict[str, Any]:
        return teams_gate_card(card if isinstance(card, GateView) else GateView(card), locale=self.locale)

    async def _bearer(self) -> str:
        if (
            self.token_url is None
        ):  # msal, per bot type (countersign/bot/teams_tokens.py); it caches and refreshes tokens
            from countersign.bot.teams_tokens import BotFrameworkTokens, TokenUnavailable

            if self._tokens is None:
                self._tokens = BotFrameworkTokens(self.app_id, self.app_password, self.app_type, self.tenant_id)
            try:
                return str(await self._tokens.token())
            except TokenUnavailable as exc:
                raise DeliveryError(f"teams token: {exc}", permanent=False) from exc
            except Exception as exc:  # msal and its HTTP client raise many types (authority metadata, JSON, network)
                raise DeliveryError(f"teams token: {type(exc).__name__}: {exc}", permanent=False) from exc
        if self._token is None or time.monotonic() > self._token_expires_at:
            response = await self._send(
                "POST",
                self.token_url,
                data={
                    "grant_type": "client_credentials",
                    "client_id": self.app_id,
                    "client_secret": self.app_password,
                    "scope": "https://api.botframework.com/.default",
                },
            )
            body = response.json()
            self._token = str(body["access_token"])
            self._token_expires_at = time.monotonic() + float(body.get("expires_in", 3600)) - 60
        return self._token

    async def _send(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        try:
            response = await self.http.request(method, url, **kwargs)
        except httpx.HTTPError as exc:
            raise DeliveryError(f"teams unreachable: {exc}", permanent=False) from exc
        if response.status_code == 429:
            raise DeliveryError("teams 429", permanent=False, retry_after_s=_retry_after(response.headers))
        if response.status_code >= 500:
            raise DeliveryError(
                f"teams {response.status_code}: {response.text[:200]}",
                permanent=False,
                retry_after_s=_retry_after(response.headers),
            )
        if response.status_code >= 400:
            raise DeliveryError(f"teams {response.status_code}: {response.text[:200]}", permanent=True)
        return response

    def _activity(self, card: Any) -> dict[str, Any]:
        content = self.render(card)
        return {
            "type": "message",
            "attachments": [{"contentType": "application/vnd.microsoft.card.adaptive", "content": content}],
        }

    async def send_activity(self, service_url: str, conversation: str, activity: dict[str, Any]) -> str:
        """Post an activity to a conversation (a reply when `activity` carries replyToId)."""
        base = f"{(service_url or self.service_url).rstrip('/')}/v3/conversations/{conversation}/activities"
        url = f"{base}/{activity['replyToId']}" if activity.get("replyToId") else base
        headers = {"Authorization": f"Bearer {await self._bearer()}"}
        response = await self._send("POST", url, json=activity, headers=headers)
        return str(response.json().get("id", ""))

    async def post(self, channel: str, card: Any) -> str:
        return await self.send_activity(self.service_url, channel, self._activity(card))

    async def post_text(self, channel: str, text: str) -> str:
        return await self.send_activity(self.service_url, channel, {"type": "message", "text": text})

    async def post_direct(self, user: str, text: str, *, tenant: str) -> str:
        """A proactive 1:1: create the personal conversation with the person (Bot Framework connector
        `POST /v3/conversations`, isGroup false, the tenant named), then send the activity into it."""
        url = f"{self.service_url.rstrip('/')}/v3/conversations"
        body = {
            "bot": {"id": f"28:{self.app_id}"},
            "isGroup": False,
            "members": [{"id": user}],
            "tenantId": tenant,
            "channelData": {"tenant": {"id": tenant}},
        }
        headers = {"Authorization": f"Bearer {await self._bearer()}"}
        response = await self._send("POST", url, json=body, headers=headers)
        try:
            conversation = response.json().get("id")
        except ValueError as exc:
            raise DeliveryError(f"teams answered the conversation create with no JSON: {exc}", permanent=False) from exc
        if not conversation:
            raise DeliveryError(f"teams gave no conversation id for {user}", permanent=True)
        return await self.send_activity(self.service_url, str(conversation), {"type": "message", "text": text})

    async def update(self, channel: str, message_id: str, card: Any) -> None:
        url = f"{self.service_url.rstrip('/')}/v3/conversations/{channel}/activities/{message_id}"
        headers = {"Authorization": f"Bearer {await self._bearer()}"}
        await self._send("PUT", url, json={**self._activity(card), "id": message_id}, headers=headers)


@dataclass
class DeliveryReport:
    sent: int = 0
    retried: int = 0
    failed: int = 0
    errors: list[str] = field(default_factory=list)


async def deliver_due(
    db: AsyncConnection[Any] | Connect,
    senders: dict[str, Sender],
    *,
    limit: int = 50,
    message_ids: list[int] | None = None,
    deadline_s: float = MESSAGE_DEADLINE_S,
    budget_hours: float = DEFAULT_BUDGET_HOURS,
) -> DeliveryReport:
    """Send what is due (or the due ones among `message_ids`).

    `db` is a way to connect (a pool's `connection`; each step borrows a connection for one statement or two) or an
    autocommit connection the caller keeps (then channels go one after another on it). A message that fails is
    retried until `budget_hours` (COUNTERSIGN_OUTBOX_BUDGET_HOURS) after its budget started, then dead-lettered.
    """
    connect = connect_to(db)
    holder = holder_id()
    async with connect() as conn:
        messages = await claim_due(conn, holder=holder, limit=limit, message_ids=message_ids or None)
    report = DeliveryReport()
    by_channel: dict[tuple[str, str], list[OutboxMessage]] = {}
    for message in messages:  # in message order within a channel: a card goes out before its updates
        by_channel.setdefault((message.platform, message.channel), []).append(message)
    gate = asyncio.Semaphore(1 if isinstance(db, AsyncConnection) else CHANNELS_AT_ONCE)

    async def channel(queue: list[OutboxMessage]) -> None:
        async with gate:
            for message in queue:
                attributes = {"countersign.platform": message.platform, "countersign.outbox_kind": message.kind}
                with tracer.start_as_current_span("outbox.deliver", attributes=attributes):
                    await _deliver_one(connect, senders, message, holder, report, deadline_s, budget_hours)

    await asyncio.gather(*(channel(queue) for queue in by_channel.values()))
    return report


class InlineDelivery:
    """A click's card updates, delivered at once but never at the click's expense.

    The delivery runs as a background task; the request waits for it at most `wait_s`, so a hung Slack neither
    holds the answer to Slack's or Teams' click nor a database connection (deliver_due holds none during the call).
    What is not delivered by the message deadline goes back to the outbox, and the worker retries it.
    """

    def __init__(
        self,
        connect: Connect,
        senders: dict[str, Sender],
        *,
        wait_s: float = INLINE_WAIT_S,
        max_in_flight: int = INLINE_MAX_IN_FLIGHT,
        budget_hours: float = DEFAULT_BUDGET_HOURS,
    ) -> None:
        self.connect = connect
        self.senders = senders
        self.budget_hours = budget_hours
        self.wait_s = wait_s
        self.max_in_flight = max_in_flight
        self.in_flight: set[asyncio.Task[DeliveryReport]] = set()

    async def __call__(self, message_ids: list[int]) -> None:
        if not message_ids or len(self.in_flight) >= self.max_in_flight:
            return  # nothing to send, or too much already: the worker's next pass sends it
        task = asyncio.create_task(
            deliver_due(self.connect, self.senders, message_ids=message_ids, budget_hours=self.budget_hours)
        )
        self.in_flight.add(task)
        task.add_done_callback(self._finished)
        await asyncio.wait({task}, timeout=self.wait_s)

    def _finished(self, task: asyncio.Task[DeliveryReport]) -> None:
        self.in_flight.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("delivering a click's card updates failed", exc_info=task.exception())

    async def aclose(self, wait_s: float = 0.0) -> None:
        """Let in-flight deliveries finish for up to `wait_s` (a graceful stop), then cancel the rest: the worker
        delivers what they claimed once the claims are released or expire."""
        if self.in_flight and wait_s > 0:
            await asyncio.wait(set(self.in_flight), timeout=wait_s)
        for task in list(self.in_flight):
            task.cancel()
        await asyncio.gather(*self.in_flight, return_exceptions=True)


@dataclass(frozen=True)
class _Rendered:
    """What one message needs from the tables, read before the call so no connection is held during it."""

    card: Any = None
    text: str | None = None
    platform_message_id: str | None = None
    state: str | None = (
        None  # the card's state key (`countersign.store.gates.card_state`), stored once the card is sent
    )
    direct_tenant: str | None = None  # a direct message to one person: the tenant of the identity it goes to


async def _read(
    conn: AsyncConnection[Any], message: OutboxMessage, board_url: str, locale: str | None = None
) -> _Rendered:
    if message.kind == OutboxKind.NOTICE and message.template == "gate_routed":
        text, tenant = await _gate_routed_text(conn, message, board_url)
        return _Rendered(text=text, direct_tenant=tenant)
    if message.kind == OutboxKind.NOTICE:
        return _Rendered(text=await notice_text(conn, message, board_url, locale))
    if message.gate_id is None:
        raise DeliveryError(f"{message.kind} without a gate is not supported", permanent=True)
    gate = await load_gate(conn, message.gate_id)
    # Teams cards name who may decide (their cards refresh by themselves); Slack's show everyone the same.
    if message.platform == "teams":
        view = await gate_view(conn, gate, board_url)
    else:
        view = GateView(gate_card(gate, board_url))
    if message.kind == OutboxKind.GATE_CARD:
        return _Rendered(card=view, state=gate.card_state)
    if message.kind == OutboxKind.CARD_UPDATE:
        posted = await posted_message_id(conn, message.gate_id, message.platform, message.channel)
        if posted is None:
            raise DeliveryError("the card to update has not been posted yet", permanent=False)
        return _Rendered(card=view, platform_message_id=posted, state=gate.card_state)
    raise DeliveryError(f"unknown outbox kind {message.kind!r}", permanent=True)


async def notice_text(
    conn: AsyncConnection[Any], message: OutboxMessage, board_url: str, locale: str | None = None
) -> str:
    """A notice's words, rendered by `countersign/cards/notices.py` from the rows its template names (never from the
    outbox)."""
    if message.template == "passkey_enrolled":
        return await _passkey_enrolled_text(conn, message, board_url)
    if message.template == "gate_overdue" and message.gate_id is not None:
        gate = await read_gate(conn, message.gate_id)
        if gate is None:
            raise DeliveryError(f"notice for unknown gate {message.gate_id}", permanent=True)
        return notices.overdue_reminder_for(gate)
    if message.template in ("pay_less_notice", "payment_notice"):
        notice = await read_payment_notice(conn, int(message.payload["notice_id"]))
        if notice is None:
            raise DeliveryError(f"no payment notice {message.payload['notice_id']}", permanent=True)
        return notices.notice_post(
            notice.kind,
            certificate_id=notice.certificate_id,
            currency=notice.currency,
            notified_sum=notice.notified_sum,
            sum_to_pay=notice.sum_to_pay,
            deadline=notice.deadline,
            served_in_time=notice.served_in_time,
            sha256=notice.sha256,
            document=notice.document,
            locale=locale,
        )
    if message.template == "payee_default_notice":
        default = await read_payee_default_notice(conn, int(message.payload["notice_id"]))
        if default is None:
            raise DeliveryError(f"no default notice {message.payload['notice_id']}", permanent=True)
        return words_of(default, locale, platform=message.platform)
    if message.template == "checkpoint":
        note = await checkpoint_note(conn, int(message.payload["tree_size"]))
        if note is None:
            raise DeliveryError(f"no signed checkpoint at tree size {message.payload['tree_size']}", permanent=True)
        close = await find_close_record(conn, message.close_id) if message.close_id else None
        return notices.checkpoint_notice(
            note=note, entity=close.entity if close else None, period=close.period if close else None
        )
    raise DeliveryError(f"unknown notice template {message.template!r}", permanent=True)


async def _passkey_enrolled_text(conn: AsyncConnection[Any], message: OutboxMessage, board_url: str) -> str:
    """The person's direct message about a passkey enrolled for them: sent only to that person's own Slack user."""
    if message.platform != "slack":
        raise DeliveryError("passkey enrolments are announced on Slack only", permanent=True)
    credential_id = str(message.payload.get("credential_id", ""))
    passkey = await enrolled_passkey_for_slack_user(conn, credential_id, message.channel)
    if passkey is None:
        raise DeliveryError(
            f"no passkey {credential_id} of the person whose Slack user is {message.channel}", permanent=True
        )
    return notices.passkey_enrolled_notice(label=passkey.label, created_at=passkey.created_at, board_url=board_url)


async def _gate_routed_text(conn: AsyncConnection[Any], message: OutboxMessage, board_url: str) -> tuple[str, str]:
    """The direct message to a person an overdue gate was routed to, and the tenant of the identity it goes to: sent
    only to an identity of the person the routing row names."""
    routing = await read_routing(conn, int(message.payload.get("routing_id", 0)))
    if routing is None or routing.gate_id != message.gate_id:
        raise DeliveryError(f"no routing {message.payload.get('routing_id')} of gate {message.gate_id}", permanent=True)
    tenant = await identity_tenant(conn, routing.routed_to, IdentityChannel(message.platform), message.channel)
    if tenant is None:
        raise DeliveryError(
            f"{message.platform} {message.channel} is not an identity of {routing.routed_to}", permanent=True
        )
    gate = await read_gate(conn, routing.gate_id)
    if gate is None:
        raise DeliveryError(f"notice for unknown gate {routing.gate_id}", permanent=True)
    text = notices.gate_routed_notice(
        platform=message.platform,
        task_title=gate.title or gate.task,
        entity=gate.entity,
        period=gate.period,
        due_at=gate.due_at,
        away_name=routing.away_name,
        away_until=routing.away_until,
        gate_url=gate_page_url(board_url, gate.gate_id),
    )
    return text, tenant


async def _send(sender: Sender, message: OutboxMessage, rendered: _Rendered) -> str | None:
    if message.kind == OutboxKind.NOTICE and rendered.direct_tenant is not None:
        assert rendered.text is not None
        return await sender.post_direct(message.channel, rendered.text, tenant=rendered.direct_tenant)
    if message.kind == OutboxKind.NOTICE:
        assert rendered.text is not None
        return await sender.post_text(message.channel, rendered.text)
    if message.kind == OutboxKind.GATE_CARD:
        kill_point(KillPoint.CARD_BEFORE_POST)
        return await sender.post(message.channel, rendered.card)
    assert rendered.platform_message_id is not None
    await sender.update(message.channel, rendered.platform_message_id, rendered.card)
    return rendered.platform_message_id


async def _deliver_one(
    connect: Connect,
    senders: dict[str, Sender],
    message: OutboxMessage,
    holder: str,
    report: DeliveryReport,
    deadline_s: float,
    budget_hours: float,
) -> None:
    sender = senders.get(message.platform)
    if sender is None:
        async with connect() as conn:
            await mark_failed(conn, message.message_id, error=f"no {message.platform} sender configured", holder=holder)
        report.failed += 1
        return
    renew: Callable[[], Awaitable[bool]] = lambda: _renew(connect, message.message_id, holder)  # noqa: E731
    try:
        async with connect() as conn:
            rendered = await _read(conn, message, sender.board_url, sender.locale)
        # No connection from here until the platform has answered (or the deadline passed).
        async with renewing(renew, every_s=CLAIM_S / 3):
            try:
                async with asyncio.timeout(deadline_s):
                    platform_id = await _send(sender, message, rendered)
            except TimeoutError as exc:
                raise DeliveryError(f"{message.platform}: no answer within {deadline_s} s", permanent=False) from exc
    except Exception as exc:
        if not isinstance(exc, DeliveryError):  # a fault of ours: retried like a 5xx and shown, not the loop's end
            log.exception("delivering outbox message %s failed", message.message_id)
            exc = DeliveryError(f"{type(exc).__name__}: {exc}", permanent=False)
        async with connect() as conn:
            if exc.permanent:
                await mark_failed(conn, message.message_id, error=exc.reason, holder=holder)
                report.failed += 1
            else:
                status = await mark_retry(
                    conn,
                    message,
                    error=exc.reason,
                    retry_after_s=exc.retry_after_s,
                    holder=holder,
                    budget_hours=budget_hours,
                )
                report.failed += status is OutboxStatus.FAILED
                report.retried += status is OutboxStatus.PENDING
        report.errors.append(f"{message.platform} {message.kind} {message.message_id}: {exc.reason}")
        return
    async with connect() as conn:
        await mark_sent(
            conn,
            message.message_id,
            platform_message_id=platform_id,
            rendered_state=rendered.state,
            holder=holder,
        )
    report.sent += 1


async def _renew(connect: Connect, message_id: int, holder: str) -> bool:
    async with connect() as conn:
        return await renew_claim(conn, message_id, holder=holder)
