"""Slack: one slack-bolt AsyncApp for events, slash commands and interactivity at `POST /slack/events`.

Buttons are acknowledged at once and decided in a lazy listener, so a slow database never trips Slack's 3-second
limit and an exception after `ack()` cannot turn into a 404. The responder is checked with `users.info`, mapped to a
principal through its Slack identity, and handed to the same decision module as the signed callback.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from typing import Any

from slack_bolt.async_app import AsyncApp
from slack_bolt.response import BoltResponse
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from audit.export import FORMATS, export_events
from audit.trace import iter_events
from callbacks.decisions import (
    DecisionConflict,
    DecisionRefused,
    DecisionRequest,
    GateNotFound,
    record_decision,
    refuse,
)
from callbacks.http import storable_text
from callbacks.principals import resolve_identity
from cards import slack as slack_cards
from cards.model import TraceExportCard
from engine.closes import CloseNotFound, close_status, latest_close_id
from engine.outbox import enqueue_card_updates

from .gate_cards import status_card
from .services import START_ROLES, ChatServices

log = logging.getLogger("countersign.slack")

ACTIONS = {"gate_approve": "approve", "gate_reject": "reject"}
USAGE = (
    "Usage: `/close status [ENTITY]` · `/close start ENTITY YYYY-MM` · `/close trace export json|csv [CLOSE_ID]` ·"
    " `/close help`"
)


def build_slack_app(*, token: str, signing_secret: str, api_url: str | None, services: ChatServices) -> AsyncApp:
    client = AsyncWebClient(token=token, base_url=api_url) if api_url else AsyncWebClient(token=token)
    # Signatures are checked in front of bolt (bot/slack_signature.py), so bolt's own check is off.
    app = AsyncApp(
        token=token,
        signing_secret=signing_secret,
        client=client,
        process_before_response=False,
        request_verification_enabled=False,
    )

    @app.middleware
    async def drop_event_retries(body: dict[str, Any], next: Any) -> Any:
        event_id = body.get("event_id") if isinstance(body, dict) else None
        if event_id:
            async with services.connect_engine() as conn:
                cur = await conn.execute(
                    "INSERT INTO slack_event_seen (event_id) VALUES (%s) ON CONFLICT DO NOTHING RETURNING event_id",
                    (event_id,),
                )
                first_time = await cur.fetchone() is not None
            if not first_time:
                return BoltResponse(status=200, body="")
        return await next()

    async def ack_only(ack: Any) -> None:
        await ack()

    async def decide(body: dict[str, Any], action: dict[str, Any], client: AsyncWebClient) -> None:
        try:
            await _decide(body, action, client, services)
        except Exception:  # after ack() nobody awaits this task: log loudly rather than lose it
            log.exception("deciding a Slack button click failed")
            raise

    for action_id in ACTIONS:
        app.action(action_id)(ack=ack_only, lazy=[decide])

    async def run_command(command: dict[str, Any], client: AsyncWebClient) -> None:
        try:
            await _command(command, client, services)
        except Exception:
            log.exception("running a Slack /close command failed")
            raise

    app.command("/close")(ack=ack_only, lazy=[run_command])

    @app.event("app_mention")
    async def on_mention(event: dict[str, Any], client: AsyncWebClient) -> None:
        text = str(event.get("text", ""))
        words = text.split()
        if "status" in words:
            await _post_status(client, services, str(event.get("channel")), None, str(event.get("user")))

    return app


async def _ephemeral(client: AsyncWebClient, channel: str, user: str, text: str) -> None:
    try:
        await client.chat_postEphemeral(channel=channel, user=user, text=text)
    except SlackApiError as exc:
        log.warning("could not send an ephemeral message: %s", exc)


def _field(body: dict[str, Any], outer: str, inner: str) -> str:
    value = body.get(outer)
    return str(value.get(inner) or "") if isinstance(value, dict) else ""


async def _decide(body: dict[str, Any], action: dict[str, Any], client: AsyncWebClient, services: ChatServices) -> None:
    user = _field(body, "user", "id")
    team = _field(body, "team", "id") or _field(body, "user", "team_id")
    channel = _field(body, "container", "channel_id") or _field(body, "channel", "id")
    if not (user and team and channel and storable_text(user + team + channel)):
        log.warning("ignoring a Slack action without a user, team and channel")
        return
    decision = ACTIONS[str(action.get("action_id"))]
    gate_id = str(action.get("value", ""))
    try:
        gate_id = str(uuid.UUID(gate_id))
    except ValueError:
        await _ephemeral(client, channel, user, "This button does not carry a valid gate id.")
        return
    request = DecisionRequest(
        gate_id=gate_id,
        principal=f"slack:{team}:{user}",
        decision=decision,
        reason=f"{decision} via Slack",
        nonce=f"slack:{team}:{user}:{gate_id}:{action.get('action_ts')}",
        channel="slack",
        proof={"kind": "slack", "tenant": team, "external_id": user},
    )
    try:
        info = await client.users_info(user=user)
    except SlackApiError as exc:
        await _ephemeral(client, channel, user, f"Could not check your Slack account ({exc.response.get('error')}).")
        return
    profile = info.get("user") or {}
    async with services.connect_callbacks() as conn:
        try:
            if profile.get("is_bot") or profile.get("is_app_user") or profile.get("deleted"):
                raise await refuse(
                    conn,
                    request,
                    "machine_principal",
                    "Slack says this user is a bot, an app or deactivated",
                    seal=services.seal,
                )
            principal = await resolve_identity(conn, "slack", user, team)
            if principal is not None:
                request = dataclasses.replace(request, principal=principal.principal_id)
            outcome = await record_decision(conn, request, seal=services.seal)
        except DecisionRefused as refused:
            await _ephemeral(client, channel, user, slack_cards.refusal_text(refused.code, str(refused)))
            return
        except DecisionConflict as conflict:
            await _ephemeral(client, channel, user, slack_cards.refusal_text("conflict", str(conflict)))
            return
        except GateNotFound:
            await _ephemeral(client, channel, user, "This card's gate no longer exists.")
            return
    if outcome.recorded:
        async with services.connect_engine() as conn:
            message_ids = await enqueue_card_updates(conn, gate_id)
        await services.deliver(message_ids)


async def _principal_for(services: ChatServices, command: dict[str, Any]) -> Any:
    async with services.connect_engine() as conn:
        return await resolve_identity(conn, "slack", str(command.get("user_id")), str(command.get("team_id")))


async def _command(command: dict[str, Any], client: AsyncWebClient, services: ChatServices) -> None:
    channel = str(command.get("channel_id"))
    user = str(command.get("user_id"))
    text = str(command.get("text", ""))
    words = text.split() if storable_text(text) else ["help"]
    verb = words[0].lower() if words else "help"
    if verb == "status" and len(words) <= 2:
        await _post_status(client, services, channel, words[1] if len(words) == 2 else None, user)
    elif verb == "start" and len(words) == 3:
        await _start(client, services, channel, user, command, words[1], words[2])
    elif verb == "trace" and len(words) in (3, 4) and words[1].lower() == "export" and words[2].lower() in FORMATS:
        await _export(client, services, channel, user, words[2].lower(), words[3] if len(words) == 4 else None)
    else:
        await _ephemeral(client, channel, user, USAGE)


async def _resolve_close(services: ChatServices, entity_or_close: str | None) -> str | None:
    async with services.connect_engine() as conn:
        if entity_or_close is None:
            return await latest_close_id(conn)
        try:
            uuid.UUID(entity_or_close)
            return entity_or_close
        except ValueError:
            return await latest_close_id(conn, entity_or_close)


async def _post_status(
    client: AsyncWebClient, services: ChatServices, channel: str, entity: str | None, user: str
) -> None:
    close_id = await _resolve_close(services, entity)
    if close_id is None:
        await _ephemeral(client, channel, user, f"No close found{' for ' + entity if entity else ''}.")
        return
    async with services.connect_engine() as conn:
        try:
            status = await close_status(conn, close_id)
        except CloseNotFound as exc:
            await _ephemeral(client, channel, user, str(exc))
            return
    await client.chat_postMessage(channel=channel, **slack_cards.status_message(status_card(status)))


async def _start(
    client: AsyncWebClient,
    services: ChatServices,
    channel: str,
    user: str,
    command: dict[str, Any],
    entity: str,
    period: str,
) -> None:
    principal = await _principal_for(services, command)
    if principal is None or not principal.is_human or not START_ROLES & set(principal.roles):
        await _ephemeral(
            client, channel, user, f"Starting a close needs one of the roles {', '.join(sorted(START_ROLES))}."
        )
        return
    try:
        close_id = await services.start_close(entity, period, principal.principal_id)
    except Exception as exc:  # the composition root raises user errors with a clear message
        await _ephemeral(client, channel, user, f"Could not start the close: {exc}")
        return
    await client.chat_postMessage(
        channel=channel, text=f"{principal.display_name} started the close for {entity} {period} ({close_id})."
    )


async def _export(
    client: AsyncWebClient, services: ChatServices, channel: str, user: str, fmt: str, close: str | None
) -> None:
    close_id = await _resolve_close(services, close)
    if close_id is None:
        await _ephemeral(client, channel, user, "No close to export.")
        return
    async with services.connect_engine() as conn:
        try:
            status = await close_status(conn, close_id)
        except CloseNotFound as exc:
            await _ephemeral(client, channel, user, str(exc))
            return
        events = [e async for e in iter_events(conn, close_id=close_id)]
    data = export_events(events, fmt)
    filename = f"countersign-trace-{status['entity']}-{status['period']}-{close_id[:8]}.{fmt}"
    summary = TraceExportCard(
        close_id=close_id,
        entity=status["entity"],
        period=status["period"],
        format=fmt,
        events=len(events),
        first_seq=events[0].seq if events else 0,
        last_seq=events[-1].seq if events else 0,
        head_hash_hex=events[-1].hash.hex() if events else "",
        filename=filename,
    )
    message = slack_cards.trace_export_message(summary)
    await client.files_upload_v2(
        channel=channel, filename=filename, content=data, title=filename, initial_comment=message["text"]
    )
