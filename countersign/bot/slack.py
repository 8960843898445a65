"""Slack: one slack-bolt AsyncApp for events, slash commands and interactivity at `POST /slack/events`.

Approve and Reject open a modal asking for the reason (`views.open` with the click's trigger_id); its submission is
checked at once (the form is the clicker's, the gate still open, a rejection has a reason: the modal shows what is
wrong) and decided in a lazy listener, so a slow database never trips Slack's 3-second limit and an exception after
`ack()` cannot turn into a 404. The responder is checked with `users.info`, mapped to a principal through its Slack
identity, and handed to the decision use case every door shares (`countersign.services.decide.decide_gate`) with the
reason. A
gate that needs the person's own key is never decided here: its card links to the Close Board, and a click on an old
card's button is answered with where to sign it. Reads go through `countersign.services.reading`; this module runs no
query.

`/close` commands answer through the command's `response_url` (bolt's `respond()`), which works in any channel the
command was typed in, joined by the bot or not: refusals, usage and errors only to the caller (ephemeral); a status
card and a started close are shared with the channel (in_channel). Only the trace export uploads a file, which needs
the bot in the channel; when it is not, the caller is told so.
"""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import dataclass
from typing import Any

from slack_bolt.async_app import AsyncApp
from slack_bolt.context.respond.async_respond import AsyncRespond
from slack_bolt.response import BoltResponse
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from countersign.audit.export import FORMATS
from countersign.bot.answers import SERVICE_ERRORS, answer_for
from countersign.bot.command_words import first_words
from countersign.bot.gate_cards import PERIOD, status_card
from countersign.bot.slack_auth import single_flight_authorization
from countersign.bot.slack_forms import DecisionForm, ReasonRejected, parse_form, submitted_reason
from countersign.bot.wiring import ChatWiring, NoBooksLoaded, UnknownGate
from countersign.cards import slack as slack_cards
from countersign.cards.model import CardDataError, GateCard, TraceExportCard
from countersign.cards.payments import payments_card, slack_payments_message
from countersign.http_edge.storable import storable_text
from countersign.policy.command_roles import HELP, PAYMENTS, PAYMENTS_START, START, STATUS, TRACE_EXPORT
from countersign.services.decide import (
    Channel,
    DecisionConflict,
    DecisionRefused,
    GateNotFound,
    PlatformIdentity,
    decide_gate,
)
from countersign.services.exports import export_trace
from countersign.services.reading import (
    MAX_ID_CHARS,
    Caller,
    allowed_tenant,
    authorize_chat_command,
    close_to_export,
    is_close_id,
    read_close_status,
    read_payment_runs,
)
from countersign.states import Decision, GateStatus, RefusalCode

log = logging.getLogger("countersign.slack")

ACTIONS = {"gate_approve": Decision.APPROVE, "gate_reject": Decision.REJECT}
USAGE = (
    "Usage: `/close status [ENTITY]` · `/close payments [YYYY-MM]` · `/close payments start YYYY-MM` ·"
    " `/close start ENTITY YYYY-MM [synthetic]` ·"
    " `/close trace export json|csv [CLOSE_ID]` · `/close help`"
)
SYNTHETIC = "synthetic"  # `/close start E P synthetic`: no books loaded, start on synthetic ones (as the CLI's flag)


def build_slack_app(*, token: str, signing_secret: str, api_url: str | None, wiring: ChatWiring) -> AsyncApp:
    client = AsyncWebClient(token=token, base_url=api_url) if api_url else AsyncWebClient(token=token)
    # Signatures are checked in front of bolt (countersign/bot/slack_signature.py), so bolt's own check is off.
    app = AsyncApp(
        token=token,
        signing_secret=signing_secret,
        client=client,
        process_before_response=False,
        request_verification_enabled=False,
    )
    replaced = single_flight_authorization(app)
    assert replaced == 1, "bolt's single-workspace authorization was not found; check the bolt version"

    @app.middleware
    async def only_allowed_workspaces(body: dict[str, Any], next: Any) -> Any:
        """Refuse a workspace that is not on COUNTERSIGN_SLACK_TEAM_IDS before anything touches the database."""
        if not isinstance(body, dict):
            return BoltResponse(status=400, body="malformed Slack request")
        if allowed_tenant(wiring.slack_team_ids, _team_of(body)):
            return await next()
        log.info("refused a Slack request from a workspace that is not allow-listed")
        if isinstance(body.get("command"), str):  # a slash command's answer is shown to the caller only
            refusal = {"response_type": "ephemeral", "text": "Refused: this Slack workspace is not allowed."}
            return BoltResponse(status=200, body=json.dumps(refusal), headers={"content-type": "application/json"})
        return BoltResponse(status=403, body="this Slack workspace is not allowed")

    @app.middleware
    async def drop_event_retries(body: dict[str, Any], next: Any) -> Any:
        event_id = body.get("event_id")
        if event_id is not None and not (
            isinstance(event_id, str) and len(event_id) <= MAX_ID_CHARS and storable_text(event_id)
        ):
            return BoltResponse(status=400, body="event_id must be a short string")
        if event_id and not await wiring.first_slack_event(event_id):
            return BoltResponse(status=200, body="")
        return await next()

    async def ack_only(ack: Any) -> None:
        await ack()

    async def open_form(body: dict[str, Any], action: dict[str, Any], client: AsyncWebClient) -> None:
        try:
            await _open_form(body, action, client, wiring)
        except Exception:  # after ack() nobody awaits this task: log loudly rather than lose it
            log.exception("opening a Slack decision form failed")
            raise

    for action_id in ACTIONS:
        app.action(action_id)(ack=ack_only, lazy=[open_form])
    for action_id in slack_cards.LINK_ACTION_IDS:  # a link button still tells the app it was clicked
        app.action(action_id)(ack_only)

    async def check_form(ack: Any, body: dict[str, Any]) -> None:
        checked = await _checked_submission(body, wiring, gate_read=True)
        if isinstance(checked, str):  # shown under the reason box; nothing is recorded
            await ack(response_action="errors", errors={slack_cards.REASON_BLOCK_ID: checked})
            return
        await ack()

    async def decide(body: dict[str, Any], client: AsyncWebClient) -> None:
        try:
            # The form's own checks again; the gate's state is the decision writer's to judge (and trace) now.
            checked = await _checked_submission(body, wiring, gate_read=False)
            if not isinstance(checked, str):
                await _decide(checked, client, wiring)
        except Exception:  # after ack() nobody awaits this task: log loudly rather than lose it
            log.exception("deciding a Slack decision form failed")
            raise

    app.view(slack_cards.DECISION_VIEW_ID)(ack=check_form, lazy=[decide])

    async def run_command(command: dict[str, Any], client: AsyncWebClient, respond: AsyncRespond | None) -> None:
        try:
            await _command(command, client, respond, wiring)
        except Exception:
            log.exception("running a Slack /close command failed")
            raise

    app.command("/close")(ack=ack_only, lazy=[run_command])

    @app.event("app_mention")
    async def on_mention(body: dict[str, Any], event: dict[str, Any], client: AsyncWebClient) -> None:
        text = event.get("text")
        words = text.split() if isinstance(text, str) and storable_text(text) else []
        if "status" not in words:
            return
        channel, user, team = str(event.get("channel") or ""), str(event.get("user") or ""), _team_of(body)
        if not channel or not storable_text(channel):
            return
        try:
            caller = await _authorize(wiring, team, user, STATUS)
        except SERVICE_ERRORS as refused:
            await _ephemeral(client, channel, user, answer_for(refused, STATUS))
            return
        await _post_status(client, wiring, caller, channel, user)

    return app


async def _authorize(wiring: ChatWiring, team: str, user: str, command: str) -> Caller:
    """The caller, when it may run `command`; a refusal is traced before `Forbidden` is raised."""
    async with wiring.connect_callbacks() as conn:
        return await authorize_chat_command(
            conn, wiring.policy, platform="slack", tenant=team, user=user, command=command, seal=wiring.seal
        )


async def _ephemeral(client: AsyncWebClient, channel: str, user: str, text: str) -> None:
    try:
        await client.chat_postEphemeral(channel=channel, user=user, text=text)
    except SlackApiError as exc:
        log.warning("could not send an ephemeral message: %s", exc)


def _team_of(body: dict[str, Any]) -> str:
    """The workspace a request comes from: `team_id` (commands, events), `team.id` or `user.team_id` (actions)."""
    team = body.get("team_id")
    if isinstance(team, str) and team:
        return team
    return _field(body, "team", "id") or _field(body, "user", "team_id")


def _field(body: dict[str, Any], outer: str, inner: str) -> str:
    value = body.get(outer)
    return str(value.get(inner) or "") if isinstance(value, dict) else ""


async def _open_form(body: dict[str, Any], action: dict[str, Any], client: AsyncWebClient, wiring: ChatWiring) -> None:
    """Approve or Reject was clicked: open the decision form, or say why there is nothing to decide here."""
    user = _field(body, "user", "id")
    team = _field(body, "team", "id") or _field(body, "user", "team_id")
    channel = _field(body, "container", "channel_id") or _field(body, "channel", "id")
    if not (user and team and channel and storable_text(user + team + channel)):
        log.warning("ignoring a Slack action without a user, team and channel")
        return
    if max(len(user), len(team), len(channel)) > MAX_ID_CHARS:
        await _ephemeral(client, channel, user, "This click carries ids that are not valid.")
        return
    action_ts = str(action.get("action_ts"))
    if len(action_ts) > MAX_ID_CHARS or not storable_text(action_ts):
        await _ephemeral(client, channel, user, "This click carries an action timestamp that is not valid.")
        return
    decision = ACTIONS[str(action.get("action_id"))]
    try:
        gate_id = str(uuid.UUID(str(action.get("value", ""))))
    except ValueError:
        await _ephemeral(client, channel, user, "This button does not carry a valid gate id.")
        return
    try:
        card = await wiring.gate_card(gate_id)
    except UnknownGate:
        await _ephemeral(client, channel, user, "This card's gate no longer exists.")
        return
    closed = _not_decidable_here(card)
    if closed is not None:
        await _ephemeral(client, channel, user, closed)
        return
    trigger_id = body.get("trigger_id")
    if not isinstance(trigger_id, str) or not trigger_id:
        await _ephemeral(client, channel, user, "This click carries no trigger to open the decision form with.")
        return
    form = DecisionForm(gate_id, decision, user, team, channel)
    try:
        await client.views_open(
            trigger_id=trigger_id, view=slack_cards.decision_modal(card, decision.value, form.metadata())
        )
    except SlackApiError as exc:
        await _ephemeral(client, channel, user, f"Could not open the decision form ({exc.response.get('error')}).")


def _not_decidable_here(card: GateCard) -> str | None:
    """Why this gate cannot be decided from Slack now (the words for the person), or None when it can."""
    if card.needs_person_key:
        return slack_cards.person_key_text(card)
    if card.status != GateStatus.OPEN:
        return f"This gate is already {card.status}, so there is nothing left to decide."
    return None


@dataclass(frozen=True)
class _Submission:
    form: DecisionForm
    reason: str
    view_id: str


async def _checked_submission(body: dict[str, Any], wiring: ChatWiring, *, gate_read: bool) -> _Submission | str:
    """A submitted decision form, checked again from the start (its metadata is a claim, not a fact), or the words
    saying why it cannot be recorded. With `gate_read`, also whether the gate can still be decided here (the modal
    then says why not); the decision writer checks the same and traces a refusal."""
    raw_view = body.get("view")
    view: dict[str, Any] = raw_view if isinstance(raw_view, dict) else {}
    form = parse_form(view.get("private_metadata"))
    if form is None:
        return "This form is not one Countersign opened. Click the card's button again."
    if _field(body, "user", "id") != form.user or _team_of(body) != form.team:
        return "This form was opened by someone else: open your own from the card."
    view_id = view.get("id")
    if not isinstance(view_id, str) or not view_id or len(view_id) > MAX_ID_CHARS or not storable_text(view_id):
        return "This form carries no valid id. Click the card's button again."
    try:
        reason = submitted_reason(view)
    except ReasonRejected as exc:
        return str(exc)
    if form.decision is Decision.REJECT and not reason:
        return "Say why you reject this gate: a rejection needs a reason."
    if not gate_read:
        return _Submission(form, reason, view_id)
    try:
        card = await wiring.gate_card(form.gate_id)
    except UnknownGate:
        return "This gate no longer exists."
    closed = _not_decidable_here(card)
    if closed is not None:
        return closed
    return _Submission(form, reason, view_id)


async def _decide(submission: _Submission, client: AsyncWebClient, wiring: ChatWiring) -> None:
    form = submission.form
    user, team, channel, gate_id = form.user, form.team, form.channel, form.gate_id
    try:
        info = await client.users_info(user=user)
    except SlackApiError as exc:
        await _ephemeral(client, channel, user, f"Could not check your Slack account ({exc.response.get('error')}).")
        return
    profile = info.get("user") or {}
    machine = profile.get("is_bot") or profile.get("is_app_user") or profile.get("deleted")
    identity = PlatformIdentity(
        channel=Channel.SLACK,
        external_id=user,
        tenant=team,
        machine="Slack says this user is a bot, an app or deactivated" if machine else None,
    )
    async with wiring.connect_callbacks() as conn:
        try:
            decided = await decide_gate(
                conn,
                identity,
                gate_id=gate_id,
                decision=form.decision,
                reason=submission.reason,
                nonce=f"slack:{team}:{user}:{gate_id}:{submission.view_id}",  # one form, one decision
                on_recorded=wiring.on_recorded,
                seal=wiring.seal,
            )
        except DecisionRefused as refused:
            await _ephemeral(client, channel, user, await _refusal_text(wiring, gate_id, refused))
            return
        except DecisionConflict as conflict:
            await _ephemeral(client, channel, user, slack_cards.refusal_text(RefusalCode.CONFLICT, str(conflict)))
            return
        except GateNotFound:
            await _ephemeral(client, channel, user, "This card's gate no longer exists.")
            return
    if decided.message_ids:
        await wiring.deliver(list(decided.message_ids))


async def _refusal_text(wiring: ChatWiring, gate_id: str, refused: DecisionRefused) -> str:
    """The refusal in words; a gate that needs the person's own key says where to sign it."""
    if refused.code == RefusalCode.NEEDS_PERSON_KEY:
        try:
            return slack_cards.person_key_text(await wiring.gate_card(gate_id))
        except UnknownGate:
            pass
    return slack_cards.refusal_text(refused.code, str(refused))


def _command_name(words: list[str]) -> str:
    verb, first, second, third = first_words(words)
    verb = verb.lower() or HELP
    if verb == "status" and len(words) <= 2:
        return STATUS
    if verb == "payments" and len(words) == 3 and first.lower() == "start" and PERIOD.fullmatch(second):
        return PAYMENTS_START
    if verb == "payments" and (len(words) == 1 or (len(words) == 2 and PERIOD.fullmatch(first))):
        return PAYMENTS
    if verb == "start" and (len(words) == 3 or (len(words) == 4 and third.lower() == SYNTHETIC)):
        return START
    if verb == "trace" and len(words) in (3, 4) and first.lower() == "export" and second.lower() in FORMATS:
        return TRACE_EXPORT
    return HELP


async def _tell(respond: AsyncRespond | None, text: str) -> None:
    """An answer only the caller sees, through the command's response_url."""
    await _answer(respond, text=text, response_type="ephemeral")


async def _answer(respond: AsyncRespond | None, **message: Any) -> None:
    if respond is None:  # bolt builds no respond() for a command without a response_url
        log.warning("a Slack command without a response_url cannot be answered")
        return
    try:
        answered = await respond(**message)
    except Exception as exc:  # aiohttp: Slack unreachable; nobody awaits this task, the caller sees no answer
        log.warning("could not answer a Slack command through its response_url: %s", exc)
        return
    if answered.status_code != 200:
        log.warning("Slack refused a response_url answer: %s %s", answered.status_code, answered.body[:200])


async def _command(
    command: dict[str, Any], client: AsyncWebClient, respond: AsyncRespond | None, wiring: ChatWiring
) -> None:
    channel = str(command.get("channel_id") or "")
    user = str(command.get("user_id") or "")
    team = str(command.get("team_id") or "")
    text = str(command.get("text", ""))
    words = text.split() if storable_text(text) else ["help"]
    name = _command_name(words)
    if not channel or not storable_text(channel):
        log.warning("ignoring a Slack command without a channel")
        return
    # Nothing is posted and nothing is read for the caller until the caller is known to be entitled.
    try:
        principal = await _authorize(wiring, team, user, name)
    except SERVICE_ERRORS as refused:
        await _tell(respond, answer_for(refused, name))
        return
    _verb, first, second, third = first_words(words)
    if name == STATUS:
        await _respond_status(respond, wiring, principal, first or None)
    elif name == PAYMENTS:
        await _respond_payments(respond, wiring, principal, first or None)
    elif name == PAYMENTS_START:
        await _start_payments(respond, wiring, principal.principal_id, principal.display_name, second)
    elif name == START:
        synthetic = len(words) == 4
        await _start(respond, wiring, principal.principal_id, principal.display_name, first, second, synthetic)
    elif name == TRACE_EXPORT:
        await _export(client, respond, wiring, channel, principal, second.lower(), third or None)
    else:
        await _tell(respond, USAGE)


def _close_named(word: str | None) -> tuple[str | None, str | None]:
    """(close id, entity) for `/close status X`: X is a close id, or an entity whose latest close is meant; no X,
    the latest close of all."""
    if word is not None and is_close_id(word):
        return word, None
    return None, word


async def _status_message(wiring: ChatWiring, caller: Caller, entity: str | None) -> dict[str, Any] | str:
    """The status card's message, or the text saying why there is none."""
    close_id, entity = _close_named(entity)
    try:
        async with wiring.connect_engine() as conn:
            status = await read_close_status(conn, wiring.policy, caller, close_id, entity=entity, command=STATUS)
    except SERVICE_ERRORS as exc:
        return answer_for(exc, STATUS)
    return dict(slack_cards.status_message(status_card(status)))


async def _post_status(client: AsyncWebClient, wiring: ChatWiring, caller: Caller, channel: str, user: str) -> None:
    """`@countersign status` (an event: no response_url; the bot was mentioned, so it is in the channel)."""
    message = await _status_message(wiring, caller, None)
    if isinstance(message, str):
        await _ephemeral(client, channel, user, message)
        return
    await client.chat_postMessage(channel=channel, **message)


async def _respond_status(respond: AsyncRespond | None, wiring: ChatWiring, caller: Caller, entity: str | None) -> None:
    message = await _status_message(wiring, caller, entity)
    if isinstance(message, str):
        await _tell(respond, message)
        return
    await _answer(respond, response_type="in_channel", **message)


async def _respond_payments(
    respond: AsyncRespond | None, wiring: ChatWiring, caller: Caller, period: str | None
) -> None:
    """`/close payments [YYYY-MM]`: one line per payment run, shared with the channel like a close's status."""
    try:
        async with wiring.connect_engine() as conn:
            runs = await read_payment_runs(conn, wiring.policy, caller, period)
        message = slack_payments_message(payments_card(runs, period), locale=wiring.locale)
    except SERVICE_ERRORS as exc:
        await _tell(respond, answer_for(exc, PAYMENTS))
        return
    except CardDataError as exc:
        await _tell(respond, f"Cannot show the payment runs: {exc}")
        return
    await _answer(respond, response_type="in_channel", **message)


async def _start(
    respond: AsyncRespond | None,
    wiring: ChatWiring,
    principal_id: str,
    display_name: str,
    entity: str,
    period: str,
    synthetic: bool,
) -> None:
    try:
        close_id = await wiring.start_close(entity, period, principal_id, synthetic)
    except Exception as exc:  # the composition root raises user errors with a clear message
        text = f"Could not start the close: {exc}"
        if isinstance(exc, NoBooksLoaded):
            text = (
                f"Could not start the close: {entity} {period} has no loaded books. Load them with the CLI"
                f" (`countersign close start --books DIR`), or run `/close start {entity} {period} synthetic`"
                " to start on synthetic books."
            )
        await _tell(respond, text)
        return
    books = " on synthetic books" if synthetic else ""
    await _answer(
        respond,
        response_type="in_channel",
        text=f"{display_name} started the close for {entity} {period}{books} ({close_id}).",
    )


async def _start_payments(
    respond: AsyncRespond | None, wiring: ChatWiring, principal_id: str, display_name: str, period: str
) -> None:
    """`/close payments start YYYY-MM`: the month's payment runs, announced in the channel like a started close."""
    try:
        started = await wiring.start_payment_runs(period, principal_id)
    except Exception as exc:  # the use case raises user errors with a clear message (no month loaded, started)
        await _tell(respond, f"Could not start the payment runs: {exc}")
        return
    await _answer(
        respond,
        response_type="in_channel",
        text=f"{display_name} started {len(started.close_ids)} payment runs for {started.period} (construction set"
        f" {started.set_id}). `/close payments {started.period}` shows them.",
    )


async def _export(
    client: AsyncWebClient,
    respond: AsyncRespond | None,
    wiring: ChatWiring,
    channel: str,
    caller: Caller,
    fmt: str,
    close: str | None,
) -> None:
    close_id, entity = _close_named(close)
    try:
        async with wiring.connect_engine() as conn:
            status = await close_to_export(conn, wiring.policy, caller, close_id, entity=entity)
    except SERVICE_ERRORS as exc:
        await _tell(respond, answer_for(exc, TRACE_EXPORT))
        return
    close_id = status["close_id"]
    # The export is itself a trace event, recorded before the file leaves: who, which close, what bytes.
    async with wiring.connect_callbacks() as conn:
        exported = await export_trace(
            conn, close_id=close_id, fmt=fmt, requested_by=caller.principal_id, platform="slack", seal=wiring.seal
        )
    filename = f"countersign-trace-{status['entity']}-{status['period']}-{close_id[:8]}.{fmt}"
    summary = TraceExportCard(
        close_id=close_id,
        entity=status["entity"],
        period=status["period"],
        format=fmt,
        events=exported.events,
        first_seq=exported.first_seq,
        last_seq=exported.last_seq,
        head_hash_hex=exported.head_hash_hex,
        filename=filename,
    )
    message = slack_cards.trace_export_message(summary)
    try:
        await client.files_upload_v2(
            channel=channel, filename=filename, content=exported.data, title=filename, initial_comment=message["text"]
        )
    except SlackApiError as exc:  # a file needs the bot in the channel (response_url carries no files)
        error = exc.response.get("error")
        hint = (
            " Invite the app to this channel, or export from a channel it is in." if error == "not_in_channel" else ""
        )
        await _tell(respond, f"Could not upload the trace export ({error}).{hint}")
