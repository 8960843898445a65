"""Server side of the specialists' A2A transport: one ASGI app serving every specialist agent.

Every JSON-RPC call needs `Authorization: Bearer <token>` (declared in each agent card's security schemes); the
agent cards and `/healthz` stay readable without it. Request bodies are bounded (`SPECIALIST_MAX_BODY_BYTES`) while
they are read. A message without our contract (`metadata.idempotency_key` and exactly one data part holding the
specialist's request object) becomes a task in state input-required whose agent message says exactly what is
needed; the handler never runs for it (ADR 0037). With `root_agent`, one specialist is also served at the origin
root: its card at `/.well-known/agent-card.json`, its JSON-RPC at `/`.
"""

import contextvars
import hmac
import inspect
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import anyio.to_thread
from a2a.helpers import get_data_parts, new_data_part, new_task_from_user_message, new_text_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    Message,
    Part,
    Role,
    SecurityRequirement,
    SecurityScheme,
    SendMessageRequest,
    StringList,
    Task,
)
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH, PROTOCOL_VERSION_CURRENT, TransportProtocol
from google.protobuf.json_format import MessageToDict
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route

from countersign.http_edge.limits import MIB, ASGIApp, BodyLimitMiddleware, Receive, Scope, Send
from countersign.specialists.task_store import BoundedTaskStore
from countersign.specialists.wire import IDEMPOTENCY_KEY_FIELD, restore_integers

if TYPE_CHECKING:
    from countersign.specialists.narration import Narrator

SPECIALIST_MAX_BODY_BYTES = 16 * MIB
"""The default profile's largest call (bank reconciliation, 2,000 GL lines) sends about 61 KB; 16 MiB is ~270x that
and keeps the body a refused chunked request can make the server hold (the SDK buffers up to the limit) far under
the 50 MB RSS budget."""

BEARER_SCHEME_NAME = "bearer"

SPECIALIST_NAMES = ("reconciliation", "accruals", "variance", "extraction", "adjudication")

SyncHandler = Callable[[dict[str, Any]], dict[str, Any]]
AsyncHandler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
Handler = SyncHandler | AsyncHandler
"""A sync handler runs in a worker thread; an async one (a model-backed specialist) runs on the event loop, where
its provider's HTTP client lives, and moves its own heavy deterministic work off the loop."""

RESULT_ARTIFACT_NAME = "result"

PARKED_TASK_RELEASE_S = 0.01
"""The SDK keeps a task waiting for input "parked" in memory, with its request, until a follow-up comes, forever by
default. Ours release it once its caller has the answer; the task stays in the (bounded) task store, and a follow-up
message on it is served from there."""

_SKILL_DESCRIPTIONS = {
    "reconciliation": (
        "Reconciles bank lines to GL lines one-to-one (amount, reference, date window), and AP/AR subledgers "
        "and intercompany balances to their control accounts; halts when unmatched share or differences "
        "exceed tolerance."
    ),
    "accruals": (
        "Builds the balanced month-end accrual journal from goods received not invoiced, one debit line "
        "per receipt above materiality and one credit line to the accrual account, and from the sums certified on "
        "construction contracts for the period and not yet invoiced, one debit line each to the cost account."
    ),
    "variance": (
        "Flags budget variances above the amount and percentage thresholds and writes a narrative (model-written "
        "behind guards, or from a template) whose every figure is grounded in the input lines."
    ),
    "extraction": (
        "Summarises a payment certificate's description and variation texts (model-written behind guards, or the "
        "text's opening as the fallback) and flags instruction-like text in them as suspected injection; never "
        "returns an amount or a verdict."
    ),
    "adjudication": (
        "Explains a payment certificate's violated invariants and duplicate holds, citing only the contract clauses "
        "retrieved for it (model-written behind the citation guard, or the invariants' own explanations); never "
        "returns an amount or a verdict."
    ),
}

_SKILL_WORKFLOW_TAGS = {"extraction": "payment-certificates", "adjudication": "payment-certificates"}

REQUEST_SCHEMAS = {
    "reconciliation": (
        "countersign.reconciliation.request.v1",
        'an object with "kind" one of "bank", "bank_page", "bank_pages", "subledger", "intercompany" and that'
        " kind's lines and tolerances (a bank account too large for one message comes as pages, ADR 0041)",
    ),
    "accruals": (
        "countersign.accruals.request.v1",
        'an object with "period_end", "accrual_account", "materiality_amount", "grni" (the receipts) and, optionally,'
        ' "certified" (sums certified for the period, not yet invoiced) with the books\' "functional_currency"',
    ),
    "variance": (
        "countersign.variance.request.v1",
        'an object with "period" (YYYY-MM), "threshold_amount", "threshold_pct", "grounding_tolerance" and "lines"',
    ),
    "extraction": (
        "countersign.extraction.request.v1",
        'an object with "kind": "extraction", "certificate_id", "contract_id" and "texts" ({field, text} objects)',
    ),
    "adjudication": (
        "countersign.adjudication.request.v1",
        'an object with "kind": "adjudication", "certificate_id", "corpus_version" and "facts"',
    ),
}
"""Each specialist's request: the schema name an input-required answer names, and its shape in one line (each
specialist's own parser checks the fields and names the offending one when it refuses a request)."""

NEEDS_FIELD = "countersign_request_needs"
"""The key of the data part in an input-required answer that says, machine-readably, what the message lacked."""

_current_idempotency_key: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "current_idempotency_key", default=None
)


class UnknownSpecialistError(ValueError):
    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"unknown specialist {name!r}; expected one of {', '.join(SPECIALIST_NAMES)}")


class SpecialistRequestError(ValueError):
    """The A2A message itself is malformed (no payload object, no idempotency key)."""

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(f"invalid specialist request: {field}: {reason}")


def current_idempotency_key() -> str | None:
    """The idempotency key of the call a handler is running for (None outside a call)."""
    return _current_idempotency_key.get()


def default_handlers(narrator: "Narrator | None" = None) -> dict[str, Handler]:
    """Every specialist; with a `narrator`, the variance narrative, the bank halt's explanation, the certificate
    summaries and the adjudication's explanation come from its model (behind the guards), else from the templates
    and the deterministic fallbacks."""
    from countersign.specialists import accruals, adjudication, extraction, reconciliation, variance

    if narrator is None:
        return {
            "reconciliation": reconciliation.handle,
            "accruals": accruals.handle,
            "variance": variance.handle,
            "extraction": extraction.handle,
            "adjudication": adjudication.handle,
        }
    seat = narrator

    async def reconcile(payload: dict[str, Any]) -> dict[str, Any]:
        return await reconciliation.handle_with_model(payload, seat)

    async def explain_variances(payload: dict[str, Any]) -> dict[str, Any]:
        return await variance.handle_with_model(payload, seat)

    async def summarise_certificate(payload: dict[str, Any]) -> dict[str, Any]:
        return await extraction.handle_with_model(payload, seat)

    async def explain_findings(payload: dict[str, Any]) -> dict[str, Any]:
        return await adjudication.handle_with_model(payload, seat)

    return {
        "reconciliation": reconcile,
        "accruals": accruals.handle,
        "variance": explain_variances,
        "extraction": summarise_certificate,
        "adjudication": explain_findings,
    }


def agent_card(name: str, base_url: str) -> AgentCard:
    if name not in _SKILL_DESCRIPTIONS:
        raise UnknownSpecialistError(name)
    description = _SKILL_DESCRIPTIONS[name]
    return AgentCard(
        name=f"countersign-{name}",
        description=f"Countersign {name} specialist. {description}",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(
                url=f"{base_url.rstrip('/')}/{name}",
                protocol_binding=TransportProtocol.JSONRPC.value,
                protocol_version=PROTOCOL_VERSION_CURRENT,
            )
        ],
        capabilities=AgentCapabilities(streaming=False, push_notifications=False),
        security_schemes={
            BEARER_SCHEME_NAME: SecurityScheme(
                http_auth_security_scheme=HTTPAuthSecurityScheme(
                    scheme="Bearer",
                    description="The deployment's specialist token (COUNTERSIGN_SPECIALIST_TOKEN).",
                )
            )
        },
        security_requirements=[SecurityRequirement(schemes={BEARER_SCHEME_NAME: StringList()})],
        default_input_modes=["application/json"],
        default_output_modes=["application/json"],
        skills=[
            AgentSkill(
                id=name,
                name=name,
                description=description,
                tags=["countersign", _SKILL_WORKFLOW_TAGS.get(name, "month-end-close"), name],
                input_modes=["application/json"],
                output_modes=["application/json"],
            )
        ],
    )


def describe_failure(exc: BaseException) -> str:
    """`SpecialistInputError: field: reason` for input errors, else `ExceptionType: message`."""
    field = getattr(exc, "field", None)
    reason = getattr(exc, "reason", None)
    if isinstance(field, str) and isinstance(reason, str):
        return f"{type(exc).__name__}: {field}: {reason}"
    return f"{type(exc).__name__}: {exc}"


def _payload_problem(message: Message) -> str | None:
    data_parts = get_data_parts(message.parts)
    if len(data_parts) != 1:
        return f"exactly one data part holding an object, found {len(data_parts)} data parts"
    if not isinstance(data_parts[0], dict):
        return f"exactly one data part holding an object, found one holding {type(data_parts[0]).__name__}"
    return None


def _key_problem(message: Message) -> str | None:
    key = MessageToDict(message.metadata).get(IDEMPOTENCY_KEY_FIELD)
    if not isinstance(key, str) or not key:
        return "a non-empty string"
    return None


def read_request(message: Message) -> tuple[str, dict[str, Any]]:
    """The idempotency key and the payload a specialist needs; SpecialistRequestError names everything missing."""
    problems = {f"metadata.{IDEMPOTENCY_KEY_FIELD}": _key_problem(message), "parts": _payload_problem(message)}
    missing = {field: reason for field, reason in problems.items() if reason is not None}
    if missing:
        raise SpecialistRequestError(", ".join(missing), "; ".join(f"{f}: {r}" for f, r in missing.items()))
    key: str = MessageToDict(message.metadata)[IDEMPOTENCY_KEY_FIELD]
    payload: dict[str, Any] = restore_integers(get_data_parts(message.parts)[0])
    return key, payload


def what_is_needed(name: str, exc: SpecialistRequestError) -> tuple[str, dict[str, Any]]:
    """For a message without our contract: the agent's text and a data object saying what was missing and what to
    send instead."""
    schema, shape = REQUEST_SCHEMAS[name]
    text = (
        f"countersign-{name} needs more input and has not started. Missing: {exc.reason}. Send a message with"
        f" metadata.{IDEMPOTENCY_KEY_FIELD} (a non-empty string naming this request; one key always carries the same"
        f" request) and exactly one data part holding the request object, schema {schema}: {shape}."
    )
    needed = {
        "missing": exc.field.split(", "),
        "reason": exc.reason,
        "metadata_key": IDEMPOTENCY_KEY_FIELD,
        "data_part": "exactly one, holding a JSON object",
        "schema": schema,
    }
    return text, needed


def _input_required_message(name: str, exc: SpecialistRequestError, context_id: str, task_id: str) -> Message:
    text, needed = what_is_needed(name, exc)
    return Message(
        message_id=str(uuid.uuid4()),
        role=Role.ROLE_AGENT,
        context_id=context_id,
        task_id=task_id,
        parts=[Part(text=text), new_data_part({NEEDS_FIELD: needed})],
    )


def _run_with_key(handler: SyncHandler, payload: dict[str, Any], idempotency_key: str) -> dict[str, Any]:
    token = _current_idempotency_key.set(idempotency_key)
    try:
        return handler(payload)
    finally:
        _current_idempotency_key.reset(token)


async def _run_handler(handler: Handler, payload: dict[str, Any], idempotency_key: str) -> dict[str, Any]:
    """An async handler on the loop, a sync one in a worker thread; either sees the call's idempotency key."""
    if not inspect.iscoroutinefunction(handler):
        sync_handler: SyncHandler = handler  # type: ignore[assignment]
        return await anyio.to_thread.run_sync(_run_with_key, sync_handler, payload, idempotency_key)
    token = _current_idempotency_key.set(idempotency_key)
    try:
        result: dict[str, Any] = await handler(payload)
        return result
    finally:
        _current_idempotency_key.reset(token)


class SpecialistRequestHandler(DefaultRequestHandler):
    """The SDK's handler, except that a follow-up naming a task but no context joins the task's own context.

    A follow-up on a task waiting for input is normally served by the SDK's parked copy of the task; ours are
    released at once (PARKED_TASK_RELEASE_S), and the SDK, recreating the task from the store, would give a follow-up
    without `contextId` a fresh context and then refuse the mismatch with -32602. The A2A contract is that a message
    naming a task belongs to that task's context, so that context is filled in first.
    """

    async def on_message_send(self, params: SendMessageRequest, context: ServerCallContext) -> Message | Task:
        message = params.message
        if message.task_id and not message.context_id:
            stored = await self.task_store.get(message.task_id, context)
            if isinstance(stored, Task):
                message.context_id = stored.context_id
        result: Message | Task = await super().on_message_send(params, context)
        return result


class HandlerExecutor(AgentExecutor):
    """Runs a specialist handler per task, off the event loop; reports one data artifact or a failure."""

    def __init__(self, name: str, handler: Handler) -> None:
        self.name = name
        self._handler = handler

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        if message is None:  # the SDK builds every SendMessage context with its message
            raise ValueError(f"{self.name}: the request carries no message")
        task = context.current_task
        if task is None:
            task = new_task_from_user_message(message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        try:
            idempotency_key, payload = read_request(message)
        except SpecialistRequestError as exc:
            # Not our contract (a generic A2A client): the task waits for the input it needs; nothing runs.
            await updater.requires_input(_input_required_message(self.name, exc, task.context_id, task.id))
            return
        try:
            result = await _run_handler(self._handler, payload, idempotency_key)
            if not isinstance(result, dict):
                raise TypeError(f"{self.name} handler returned {type(result).__name__}, expected dict")
            result_part = new_data_part(result)
        except Exception as exc:
            failure = new_text_message(describe_failure(exc), context_id=task.context_id, task_id=task.id)
            await updater.failed(failure)
            return
        await updater.add_artifact(
            [result_part], name=RESULT_ARTIFACT_NAME, metadata={IDEMPOTENCY_KEY_FIELD: idempotency_key}
        )
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task
        if task is not None:
            await TaskUpdater(event_queue, task.id, task.context_id).cancel()


def _open_without_token(method: str, path: str) -> bool:
    """The agent cards and health stay readable without the token; every JSON-RPC call needs it."""
    return method in ("GET", "HEAD") and (path == "/healthz" or path.endswith(AGENT_CARD_WELL_KNOWN_PATH))


def bearer_token_matches(authorization: str | None, token: str) -> bool:
    """`Authorization: Bearer <token>` (scheme case-insensitive), compared in constant time."""
    scheme, _, presented = (authorization or "").partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(presented.strip().encode(), token.encode())


class BearerTokenMiddleware:
    """401 before any work for a call without the specialist token; pure ASGI, so the body is never read."""

    def __init__(self, app: ASGIApp, *, token: str) -> None:
        if not token:
            raise ValueError("the specialist token must not be empty")
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or _open_without_token(str(scope["method"]), str(scope["path"])):
            await self.app(scope, receive, send)
            return
        authorization = next(
            (value.decode("latin-1") for name, value in scope.get("headers", ()) if name.lower() == b"authorization"),
            None,
        )
        if bearer_token_matches(authorization, self.token):
            await self.app(scope, receive, send)
            return
        response = JSONResponse(
            {"error": "unauthorized", "detail": "a specialist call needs Authorization: Bearer <specialist token>"},
            status_code=401,
            headers={"www-authenticate": 'Bearer realm="countersign-specialists"', "connection": "close"},
        )
        await response(scope, receive, send)


async def _healthz(request: Request) -> JSONResponse:
    return JSONResponse({"status": "ok", "specialists": sorted(request.app.state.specialist_names)})


def _specialist_routes(
    name: str, handler: Handler, base_url: str, task_store: BoundedTaskStore, *, at_root: bool
) -> list[BaseRoute]:
    card = agent_card(name, base_url)
    request_handler = SpecialistRequestHandler(
        agent_executor=HandlerExecutor(name, handler),
        task_store=task_store,
        agent_card=card,
        interrupted_task_timeout=PARKED_TASK_RELEASE_S,
    )
    routes: list[BaseRoute] = [
        *create_agent_card_routes(card, card_url=f"/{name}{AGENT_CARD_WELL_KNOWN_PATH}"),
        *create_jsonrpc_routes(request_handler, rpc_url=f"/{name}"),
        *create_jsonrpc_routes(request_handler, rpc_url=f"/{name}/"),
    ]
    if at_root:  # the same card, handler and task store, for tools that look only at the origin root
        routes += [
            *create_agent_card_routes(card, card_url=AGENT_CARD_WELL_KNOWN_PATH),
            *create_jsonrpc_routes(request_handler, rpc_url="/"),
        ]
    return routes


def build_specialists_app(
    base_url: str,
    handlers: Mapping[str, Handler] | None = None,
    *,
    token: str,
    max_body_bytes: int = SPECIALIST_MAX_BODY_BYTES,
    narrator: "Narrator | None" = None,
    root_agent: str | None = None,
    task_stores: Mapping[str, BoundedTaskStore] | None = None,
) -> Starlette:
    """Serve each specialist at `/{name}` (JSON-RPC) with its card at `/{name}/.well-known/agent-card.json`.

    With `root_agent`, that specialist is also served at the origin root (card at `/.well-known/agent-card.json`,
    JSON-RPC at `/`), with the same card and task store as at its own path. `task_stores` (by specialist) replaces
    the fresh BoundedTaskStore each specialist gets otherwise, so that two apps can serve the same tasks.

    `base_url` is where clients reach this app; it goes into every card as the specialist's interface URL.
    `token` is the bearer token every JSON-RPC call must present; bodies over `max_bytes` get 413 while read.
    Without `handlers`, the default ones, model-backed when a `narrator` is given.
    """
    if not token:
        raise ValueError("the specialists need a bearer token: set COUNTERSIGN_SPECIALIST_TOKEN")
    chosen = default_handlers(narrator) if handlers is None else dict(handlers)
    for name in chosen:
        if name not in SPECIALIST_NAMES:
            raise UnknownSpecialistError(name)
    if root_agent is not None and root_agent not in chosen:
        raise UnknownSpecialistError(root_agent)
    routes: list[BaseRoute] = [Route("/healthz", _healthz, methods=["GET"])]
    given = task_stores or {}
    stores = {name: given.get(name) or BoundedTaskStore() for name in chosen}  # finished tasks are forgotten
    for name, handler in chosen.items():
        routes.extend(_specialist_routes(name, handler, base_url, stores[name], at_root=name == root_agent))
    middleware = [
        Middleware(BearerTokenMiddleware, token=token),
        Middleware(BodyLimitMiddleware, limits=(), default_max_bytes=max_body_bytes),
    ]
    app = Starlette(routes=routes, middleware=middleware)
    app.state.specialist_names = tuple(chosen)
    app.state.task_stores = stores
    app.state.root_agent = root_agent
    return app
