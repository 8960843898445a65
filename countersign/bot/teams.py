"""Teams: the Bot Framework protocol at `POST /api/messages`, kept thin.

botbuilder authenticates the incoming JWT (issuer, audience = our app id, keys from the OpenID metadata, channel
endorsement, service URL claim); every failure, whatever the SDK raises, is a 401. The turn itself is handled here:
an `adaptiveCard/action` invoke decides through the decision use case every door shares
(`countersign.services.decide`), with the
reason typed into the card (a rejection without one is answered with the card again, asking for it, and nothing is
recorded), and answers with the updated card as that person sees it; the `refresh` invoke answers with the card as the
person asking sees it ("Waiting on you", "You approved"). A gate that needs the person's own key is never decided here:
its card links to the Close Board, and a click on an old card's button is answered with where to sign it. A message
`close status` or `close trace export csv|json` is answered in the conversation. Reads go through
`countersign.services.reading`;
this module runs no query. Outbound calls use our own small connector (countersign/delivery/worker.py `TeamsSender`), so
the eventual
move to the Microsoft 365 Agents SDK stays small.
"""

from __future__ import annotations

import base64
import dataclasses
import logging
import uuid
from typing import Any, Protocol

import jwt
from botbuilder.schema import Activity
from botframework.connector.auth import (
    AuthenticationConstants,
    BotFrameworkAuthentication,
    BotFrameworkAuthenticationFactory,
    ClaimsIdentity,
    JwtTokenExtractor,
    ManagedIdentityServiceClientCredentialsFactory,
    PasswordServiceClientCredentialFactory,
)
from botframework.connector.auth.verify_options import VerifyOptions
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from countersign.audit.export import FORMATS
from countersign.bot.answers import SERVICE_ERRORS, answer_for
from countersign.bot.command_words import first_words
from countersign.bot.gate_cards import PERIOD, GateView, status_card, teams_gate_card
from countersign.bot.wiring import ChatWiring, UnknownGate
from countersign.cards import teams as teams_cards
from countersign.cards.model import REASON_MAX_CHARS, CardDataError, Viewer
from countersign.cards.payments import payments_card, teams_payments_card
from countersign.cards.refusals import REASON_NEEDED, person_key_needed
from countersign.http_edge.storable import storable_text
from countersign.policy.command_roles import HELP, PAYMENTS, PAYMENTS_START, STATUS, TRACE_EXPORT
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
    read_close_status,
    read_payment_runs,
)
from countersign.states import Decision, ErrorCode, RefusalCode, ViewerState

log = logging.getLogger("countersign.teams")

BOT_FRAMEWORK_ISSUER = "https://api.botframework.com"
VERBS = {"gate.approve": Decision.APPROVE, "gate.reject": Decision.REJECT}
MAX_BODY_BYTES = 256 * 1024


class TeamsConfigError(RuntimeError):
    pass


class ActivitySender(Protocol):
    """Replies into a conversation (countersign/delivery/worker.py `TeamsSender`)."""

    async def send_activity(self, service_url: str, conversation: str, activity: dict[str, Any]) -> str: ...


def tenant_issuers(tenant_id: str) -> list[str]:
    """The Entra ID issuers of a tenant's tokens (v1 and v2), as the Bot Framework lists them."""
    return [
        AuthenticationConstants.VALID_TOKEN_ISSUER_URL_TEMPLATE_V1.format(tenant_id),
        AuthenticationConstants.VALID_TOKEN_ISSUER_URL_TEMPLATE_V2.format(tenant_id),
    ]


def tenant_metadata_url(tenant_id: str) -> str:
    return f"https://login.microsoftonline.com/{tenant_id}/v2.0/.well-known/openid-configuration"


class TeamsAuthentication:
    """Who may call `/api/messages`: the Bot Framework channel's tokens always (the SDK checks them: issuer, audience,
    keys, endorsement, serviceurl); for a SingleTenant or UserAssignedMSI bot also tokens its own tenant issued,
    checked against that tenant's keys with the audience equal to our app id and, when present, the serviceurl claim
    equal to the activity's. Any other issuer is refused before a signature is even looked at."""

    def __init__(
        self,
        channel: BotFrameworkAuthentication,
        *,
        app_id: str,
        tenant_id: str | None = None,
        tenant_openid_metadata_url: str | None = None,
    ) -> None:
        self.channel = channel
        self.app_id = app_id
        self.issuers = tenant_issuers(tenant_id) if tenant_id else []
        self.tenant_tokens = (
            JwtTokenExtractor(
                VerifyOptions(issuer=self.issuers, audience=None, clock_tolerance=5 * 60, ignore_expiration=False),
                metadata_url=tenant_openid_metadata_url or tenant_metadata_url(str(tenant_id)),
                allowed_algorithms=AuthenticationConstants.ALLOWED_SIGNING_ALGORITHMS,
            )
            if tenant_id
            else None
        )

    async def authenticate_request(self, activity: Activity, auth_header: str) -> ClaimsIdentity:
        scheme, _, token = auth_header.partition(" ")
        if self.tenant_tokens is None or _unverified_issuer(token) not in self.issuers:
            result = await self.channel.authenticate_request(activity, auth_header)
            return result.claims_identity
        identity = await self.tenant_tokens.get_identity(scheme, token, channel_id="")
        if identity is None or not identity.is_authenticated:
            raise PermissionError("tenant token not authenticated")
        if identity.get_claim_value(AuthenticationConstants.AUDIENCE_CLAIM) != self.app_id:
            raise PermissionError("tenant token is for another audience")
        service_url = identity.get_claim_value(AuthenticationConstants.SERVICE_URL_CLAIM)
        if service_url is not None and service_url != activity.service_url:
            raise PermissionError("tenant token's serviceurl claim does not match the activity")
        return identity


def _unverified_issuer(token: str) -> str | None:
    try:
        issuer = jwt.decode(token, options={"verify_signature": False}).get("iss")
    except jwt.PyJWTError:
        return None
    return issuer if isinstance(issuer, str) else None


def build_authentication(
    app_id: str,
    app_password: str | None,
    openid_metadata_url: str | None,
    *,
    app_type: str = "MultiTenant",
    tenant_id: str | None = None,
    tenant_openid_metadata_url: str | None = None,
) -> TeamsAuthentication:
    if not app_id:
        # An empty app id makes the SDK skip authentication entirely.
        raise TeamsConfigError("TEAMS_APP_ID is empty: refusing to start Teams without authentication")
    if app_type != "MultiTenant" and not tenant_id:
        raise TeamsConfigError(f"TEAMS_APP_TENANT_ID is required for TEAMS_APP_TYPE={app_type}")
    # Inbound checks need only the app id; the credentials factory is the SDK's per bot type.
    credentials = (
        ManagedIdentityServiceClientCredentialsFactory(app_id)
        if app_type == "UserAssignedMSI"
        else PasswordServiceClientCredentialFactory(
            app_id, app_password, tenant_id if app_type == "SingleTenant" else None
        )
    )
    channel = BotFrameworkAuthenticationFactory.create(
        channel_service=None,
        to_bot_from_channel_open_id_metadata_url=openid_metadata_url,
        to_bot_from_channel_token_issuer=BOT_FRAMEWORK_ISSUER,
        credential_factory=credentials,
    )
    return TeamsAuthentication(
        channel,
        app_id=app_id,
        tenant_id=tenant_id if app_type != "MultiTenant" else None,
        tenant_openid_metadata_url=tenant_openid_metadata_url,
    )


def clear_metadata_cache() -> None:
    """The SDK caches OpenID metadata per URL for the life of the process; tests with fresh keys clear it."""
    JwtTokenExtractor.metadataCache = {}


class TeamsAdapter:
    def __init__(self, *, app_id: str, auth: TeamsAuthentication, sender: ActivitySender, wiring: ChatWiring):
        self.app_id = app_id
        self.auth = auth
        self.sender = sender
        self.wiring = wiring

    async def handle(self, request: Request) -> Response:
        raw = await request.body()
        if len(raw) > MAX_BODY_BYTES:
            return JSONResponse({"error": ErrorCode.BODY_TOO_LARGE}, status_code=413)
        try:
            body = await request.json()
            activity = Activity().deserialize(body)
        except Exception:
            return JSONResponse({"error": ErrorCode.INVALID_ACTIVITY}, status_code=400)
        try:
            await self.auth.authenticate_request(activity, request.headers.get("Authorization", ""))
        except Exception as exc:  # the SDK raises many types for a bad token; every one of them is a 401
            log.info("teams authentication failed: %s: %s", type(exc).__name__, exc)
            return JSONResponse({"error": ErrorCode.UNAUTHORIZED}, status_code=401)
        # Only allow-listed tenants, checked before anything touches the database.
        if not allowed_tenant(self.wiring.teams_tenant_ids, self._tenant(activity)):
            log.info("refused a Teams activity from a tenant that is not allow-listed")
            if activity.type == "invoke":
                refusal = teams_cards.error_card("Refused", "This Microsoft 365 tenant is not allowed.")
                return JSONResponse(
                    {"statusCode": 403, "type": "application/vnd.microsoft.card.adaptive", "value": refusal},
                    status_code=403,
                )
            return JSONResponse({"error": ErrorCode.TENANT_NOT_ALLOWED}, status_code=403)
        if activity.type == "invoke" and activity.name == "adaptiveCard/action":
            return await self._card_action(activity)
        if activity.type == "message":
            await self._message(activity)
        return JSONResponse({}, status_code=200)

    def _is_bot(self, activity: Activity) -> bool:
        sender = activity.from_property
        if sender is None:
            return True
        return (sender.role or "").lower() == "bot" or sender.id == f"28:{self.app_id}" or not sender.aad_object_id

    @staticmethod
    def _tenant(activity: Activity) -> str:
        channel_data = activity.channel_data if isinstance(activity.channel_data, dict) else {}
        tenant_data = channel_data.get("tenant")
        tenant = tenant_data.get("id") if isinstance(tenant_data, dict) else None
        if not tenant and activity.conversation is not None:
            tenant = activity.conversation.tenant_id
        return str(tenant or "")

    async def _card_action(self, activity: Activity) -> Response:
        value: dict[str, Any] = activity.value if isinstance(activity.value, dict) else {}
        raw_action = value.get("action")
        action: dict[str, Any] = raw_action if isinstance(raw_action, dict) else {}
        raw_data = action.get("data")
        data: dict[str, Any] = raw_data if isinstance(raw_data, dict) else {}
        verb = str(action.get("verb"))
        decision = VERBS.get(verb) or (data.get("decision") if data.get("decision") in tuple(Decision) else None)
        if self._is_bot(activity):
            refusal = teams_cards.error_card("Refused", "Bots and apps cannot decide gates.")
            return JSONResponse(
                {"statusCode": 403, "type": "application/vnd.microsoft.card.adaptive", "value": refusal},
                status_code=403,
            )
        try:
            gate_id = str(uuid.UUID(str(data.get("gate_id"))))
        except ValueError:
            return self._invoke_card(teams_cards.error_card("Not recorded", "This card does not carry a gate id."))
        sender = activity.from_property
        external_id = str(sender.aad_object_id)
        tenant = self._tenant(activity)
        nonce = f"teams:{activity.id or uuid.uuid4()}"
        if not (len(external_id) <= MAX_ID_CHARS and len(nonce) <= MAX_ID_CHARS and storable_text(external_id + nonce)):
            # A NUL or a lone surrogate can be neither stored nor traced as the claimed identity: refused here.
            log.info("refused a Teams card action whose sender or activity id cannot be stored")
            return self._invoke_card(teams_cards.error_card("Not recorded", "This action's sender or id is not valid."))
        if verb == teams_cards.REFRESH_VERB:  # the card as this person sees it; nothing is decided
            return await self._view_card(gate_id, tenant, external_id)
        if decision is None:
            return self._invoke_card(teams_cards.error_card("Not recorded", "Unknown action on this card."))
        reason = data.get(teams_cards.REASON_INPUT_ID)
        reason = reason.strip() if isinstance(reason, str) else ""
        if len(reason) > REASON_MAX_CHARS or not storable_text(reason):
            prompt = f"A reason is at most {REASON_MAX_CHARS} characters of text. Nothing was recorded."
            return await self._view_card(gate_id, tenant, external_id, prompt)
        try:
            view = await self.wiring.teams_gate_view(gate_id, tenant=tenant, user=external_id)
        except UnknownGate:
            return self._invoke_card(teams_cards.error_card("Not recorded", "This card's gate no longer exists."))
        # A gate that needs a person's own key (an old card's button) is refused by the decision writer, which traces
        # the attempt; the answer below says where to sign it.
        if decision == Decision.REJECT and not reason:
            return self._gate_card(_prompted(view, REASON_NEEDED))
        identity = PlatformIdentity(channel=Channel.TEAMS, external_id=external_id, tenant=tenant)
        async with self.wiring.connect_callbacks() as conn:
            try:
                decided = await decide_gate(
                    conn,
                    identity,
                    gate_id=gate_id,
                    decision=decision,
                    reason=reason,
                    nonce=nonce,
                    on_recorded=self.wiring.on_recorded,
                    seal=self.wiring.seal,
                )
            except DecisionRefused as refused:
                if refused.code == RefusalCode.NEEDS_PERSON_KEY:
                    return self._gate_card(_prompted(view, person_key_needed(view.card.page_url)))
                if refused.code == RefusalCode.REASON_REQUIRED:
                    return self._gate_card(_prompted(view, REASON_NEEDED))
                return self._invoke_card(teams_cards.refusal_card(refused.code, str(refused)))
            except DecisionConflict as conflict:
                return self._invoke_card(teams_cards.error_card("Not recorded", str(conflict)))
            except GateNotFound:
                return self._invoke_card(teams_cards.error_card("Not recorded", "This card's gate no longer exists."))
        if decided.message_ids:
            await self.wiring.deliver(list(decided.message_ids))
        return await self._view_card(gate_id, tenant, external_id)

    async def _view_card(self, gate_id: str, tenant: str, user: str, prompt: str = "") -> Response:
        """The gate's card as this person sees it now, with `prompt` for them."""
        try:
            view = await self.wiring.teams_gate_view(gate_id, tenant=tenant, user=user, prompt=prompt)
        except UnknownGate:
            return self._invoke_card(teams_cards.error_card("Not recorded", "Unknown gate."))
        return self._gate_card(view)

    def _gate_card(self, view: GateView) -> Response:
        """The invoke's answer: the gate's card as `view` asks, its amounts written in COUNTERSIGN_LOCALE."""
        return self._invoke_card(teams_gate_card(view, locale=self.wiring.locale))

    @staticmethod
    def _invoke_card(card: dict[str, Any]) -> Response:
        return JSONResponse(teams_cards.invoke_response(card), status_code=200)

    async def _message(self, activity: Activity) -> None:
        text = activity.text if isinstance(activity.text, str) else ""
        words = text.replace("<at>", " ").replace("</at>", " ").lower().split()
        if "close" in words:
            words = words[words.index("close") + 1 :]
        else:
            return
        conversation = activity.conversation.id if activity.conversation else ""
        verb, first, second, _third = first_words(words)
        if verb == "status":
            command = STATUS
        elif verb == "payments" and len(words) == 3 and first == "start" and PERIOD.fullmatch(second):
            command = PAYMENTS_START
        elif verb == "payments" and (len(words) == 1 or PERIOD.fullmatch(first)):
            command = PAYMENTS
        elif verb == "trace" and first == "export" and len(words) >= 3 and second in FORMATS:
            command = TRACE_EXPORT
        else:
            command = HELP
        sender = activity.from_property
        user = str(sender.aad_object_id or "") if sender is not None and not self._is_bot(activity) else ""
        reply: dict[str, Any]
        try:
            async with self.wiring.connect_callbacks() as conn:
                caller = await authorize_chat_command(
                    conn,
                    self.wiring.policy,
                    platform="teams",
                    tenant=self._tenant(activity),
                    user=user,
                    command=command,
                    seal=self.wiring.seal,
                )
        except SERVICE_ERRORS as refused:
            # A plain text reply that carries no close data (Teams has no ephemeral reply in a channel thread).
            reply = {"type": "message", "text": answer_for(refused, command).replace("`", "")}
        else:
            reply = await self._reply(caller, command, words)
        reply["replyToId"] = activity.id
        await self.sender.send_activity(str(activity.service_url or ""), conversation, reply)

    async def _reply(self, caller: Caller, command: str, words: list[str]) -> dict[str, Any]:
        if command == STATUS:
            return await self._status_reply(caller)
        _verb, first, second, third = first_words(words)
        if command == PAYMENTS:
            return await self._payments_reply(caller, first or None)
        if command == PAYMENTS_START:
            return await self._start_payments_reply(caller, second)
        if command == TRACE_EXPORT:
            return await self._export_reply(caller, second, third or None)
        return {
            "type": "message",
            "text": "Try `close status`, `close payments [YYYY-MM]`, `close payments start YYYY-MM` or"
            " `close trace export csv|json [CLOSE_ID]`.",
        }

    async def _status_reply(self, caller: Caller) -> dict[str, Any]:
        try:
            async with self.wiring.connect_engine() as conn:
                status = await read_close_status(conn, self.wiring.policy, caller, command=STATUS)
        except SERVICE_ERRORS as exc:
            return {"type": "message", "text": answer_for(exc, STATUS)}
        return _card_activity(teams_cards.status_message(status_card(status)))

    async def _payments_reply(self, caller: Caller, period: str | None) -> dict[str, Any]:
        try:
            async with self.wiring.connect_engine() as conn:
                runs = await read_payment_runs(conn, self.wiring.policy, caller, period)
            card = teams_payments_card(payments_card(runs, period), locale=self.wiring.locale)
        except SERVICE_ERRORS as exc:
            return {"type": "message", "text": answer_for(exc, PAYMENTS)}
        except CardDataError as exc:
            return {"type": "message", "text": f"Cannot show the payment runs: {exc}"}
        return _card_activity(card)

    async def _start_payments_reply(self, caller: Caller, period: str) -> dict[str, Any]:
        """`close payments start YYYY-MM`: the month's payment runs, started by an entitled caller."""
        try:
            started = await self.wiring.start_payment_runs(period, caller.principal_id)
        except Exception as exc:  # the use case raises user errors with a clear message (no month loaded, started)
            return {"type": "message", "textFormat": "plain", "text": f"Could not start the payment runs: {exc}"}
        return {
            "type": "message",
            "textFormat": "plain",
            "text": f"{caller.display_name} started {len(started.close_ids)} payment runs for {started.period}"
            f" (construction set {started.set_id}). `close payments {started.period}` shows them.",
        }

    async def _export_reply(self, caller: Caller, fmt: str, close: str | None) -> dict[str, Any]:
        try:
            async with self.wiring.connect_engine() as conn:
                status = await close_to_export(conn, self.wiring.policy, caller, close)
        except SERVICE_ERRORS as exc:
            # plain: an unknown id is what the user typed
            return {"type": "message", "textFormat": "plain", "text": answer_for(exc, TRACE_EXPORT)}
        close_id = status["close_id"]
        # The export is itself a trace event, recorded before the file leaves: who, which close, what bytes.
        async with self.wiring.connect_callbacks() as conn:
            exported = await export_trace(
                conn,
                close_id=close_id,
                fmt=fmt,
                requested_by=caller.principal_id,
                platform="teams",
                seal=self.wiring.seal,
            )
        name = f"countersign-trace-{status['entity']}-{status['period']}-{close_id[:8]}.{fmt}"
        mime = "text/csv" if fmt == "csv" else "application/json"
        return {
            "type": "message",
            "textFormat": "plain",  # the entity comes from the books (a certificate id): never markdown
            "text": f"Trace export for {status['entity']} {status['period']}: {exported.events} events.",
            "attachments": [
                {
                    "contentType": mime,
                    "name": name,
                    "contentUrl": f"data:{mime};base64,{base64.b64encode(exported.data).decode()}",
                }
            ],
        }


def _prompted(view: GateView, prompt: str) -> GateView:
    """The same view with a word for the person it is rendered for."""
    viewer = dataclasses.replace(view.viewer, prompt=prompt) if view.viewer else Viewer(ViewerState.MAY_DECIDE, prompt)
    return dataclasses.replace(view, viewer=viewer)


def _card_activity(card: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "message",
        "attachments": [{"contentType": "application/vnd.microsoft.card.adaptive", "content": card}],
    }


def build_teams_router(adapter: TeamsAdapter) -> APIRouter:
    """`POST /api/messages`: every Bot Framework activity, authenticated by the adapter before anything else."""
    router = APIRouter()

    @router.post("/api/messages")
    async def teams_messages(request: Request) -> Response:
        return await adapter.handle(request)

    return router
