"""Delivering the outbox: post each gate card once per channel, update it in place as decisions arrive.

Rate limits (429) wait for Retry-After; server errors and network failures back off exponentially; anything else is
a permanent failure that `close status` shows. Messages are claimed with SKIP LOCKED, so workers never double-send.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx
from psycopg import AsyncConnection
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from audit.killpoints import kill_point
from engine.outbox import OutboxMessage, claim_due, mark_failed, mark_retry, mark_sent, posted_message_id

from .gate_cards import card_state, load_gate_card, slack_gate_message, teams_gate_card

TIMEOUT_S = 10.0


class DeliveryError(Exception):
    def __init__(self, reason: str, *, permanent: bool, retry_after_s: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.permanent = permanent
        self.retry_after_s = retry_after_s


class Sender(Protocol):
    async def post(self, channel: str, card: Any) -> str: ...

    async def update(self, channel: str, message_id: str, card: Any) -> None: ...

    async def post_text(self, channel: str, text: str) -> str: ...

    def render(self, card: Any) -> Any: ...


def _retry_after(headers: Any) -> float | None:
    value = headers.get("Retry-After") or headers.get("retry-after") if headers else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


class SlackSender:
    def __init__(self, client: AsyncWebClient) -> None:
        self.client = client

    def render(self, card: Any) -> dict[str, Any]:
        return slack_gate_message(card)

    async def post(self, channel: str, card: Any) -> str:
        message = self.render(card)
        response = await self._call(self.client.chat_postMessage, channel=channel, **message)
        return str(response["ts"])

    async def update(self, channel: str, message_id: str, card: Any) -> None:
        await self._call(self.client.chat_update, channel=channel, ts=message_id, **self.render(card))

    async def post_text(self, channel: str, text: str) -> str:
        response = await self._call(self.client.chat_postMessage, channel=channel, text=text)
        return str(response["ts"])

    async def _call(self, method: Any, **kwargs: Any) -> Any:
        try:
            return await method(**kwargs)
        except SlackApiError as exc:
            status = exc.response.status_code
            error = exc.response.get("error") if hasattr(exc.response, "get") else None
            reason = f"slack {status}: {error or exc}"
            if status == 429:
                raise DeliveryError(reason, permanent=False, retry_after_s=_retry_after(exc.response.headers)) from exc
            raise DeliveryError(reason, permanent=status < 500) from exc
        except (OSError, TimeoutError) as exc:
            raise DeliveryError(f"slack unreachable: {exc}", permanent=False) from exc


@dataclass
class TeamsSender:
    """A minimal Bot Framework connector client over httpx (the SDK's uses requests, which tests cannot fake)."""

    app_id: str
    app_password: str
    service_url: str
    token_url: str = "https://login.microsoftonline.com/botframework.com/oauth2/v2.0/token"
    http: httpx.AsyncClient = field(default_factory=lambda: httpx.AsyncClient(timeout=TIMEOUT_S))
    _token: str | None = None
    _token_expires_at: float = 0.0

    def render(self, card: Any) -> dict[str, Any]:
        return teams_gate_card(card)

    async def _bearer(self) -> str:
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
        if response.status_code >= 400:
            raise DeliveryError(
                f"teams {response.status_code}: {response.text[:200]}", permanent=response.status_code < 500
            )
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
    conn: AsyncConnection[Any],
    senders: dict[str, Sender],
    *,
    limit: int = 50,
    message_ids: list[int] | None = None,
) -> DeliveryReport:
    """Send what is due (or exactly `message_ids`). `conn` must be in autocommit mode."""
    report = DeliveryReport()
    targets: list[int | None] = list(message_ids) if message_ids else [None]
    for target in targets:
        async with conn.transaction():
            for message in await claim_due(conn, limit=limit, message_id=target):
                await _deliver_one(conn, senders, message, report)
    return report


async def _deliver_one(
    conn: AsyncConnection[Any], senders: dict[str, Sender], message: OutboxMessage, report: DeliveryReport
) -> None:
    sender = senders.get(message.platform)
    if sender is None:
        await mark_failed(conn, message.message_id, error=f"no {message.platform} sender configured")
        report.failed += 1
        return
    try:
        if message.kind == "notice":
            notice_id = await sender.post_text(message.channel, str(message.payload.get("text", "")))
            await mark_sent(conn, message.message_id, platform_message_id=notice_id, rendered_state=None)
            report.sent += 1
            return
        if message.gate_id is None:
            raise DeliveryError(f"{message.kind} without a gate is not supported", permanent=True)
        card = await load_gate_card(conn, message.gate_id)
        platform_id: str | None
        if message.kind == "gate_card":
            kill_point("card.before_post")
            platform_id = await sender.post(message.channel, card)
        elif message.kind == "card_update":
            platform_id = await posted_message_id(conn, message.gate_id, message.platform, message.channel)
            if platform_id is None:
                raise DeliveryError("the card to update has not been posted yet", permanent=False)
            await sender.update(message.channel, platform_id, card)
        else:
            raise DeliveryError(f"unknown outbox kind {message.kind!r}", permanent=True)
    except DeliveryError as exc:
        if exc.permanent:
            await mark_failed(conn, message.message_id, error=exc.reason)
            report.failed += 1
        else:
            status = await mark_retry(conn, message, error=exc.reason, retry_after_s=exc.retry_after_s)
            report.failed += status == "failed"
            report.retried += status == "pending"
        report.errors.append(f"{message.platform} {message.kind} {message.message_id}: {exc.reason}")
        return
    await mark_sent(conn, message.message_id, platform_message_id=platform_id, rendered_state=card_state(card))
    report.sent += 1
