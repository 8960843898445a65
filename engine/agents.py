"""Server side of the specialists' A2A transport: one ASGI app serving all three specialist agents."""

import contextvars
from collections.abc import Callable, Mapping
from typing import Any

import anyio.to_thread
from a2a.helpers import get_data_parts, new_data_part, new_task_from_user_message, new_text_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Message
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH, PROTOCOL_VERSION_CURRENT, TransportProtocol
from google.protobuf.json_format import MessageToDict
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route

from engine.a2a_data import IDEMPOTENCY_KEY_FIELD, restore_integers

SPECIALIST_NAMES = ("reconciliation", "accruals", "variance")

Handler = Callable[[dict[str, Any]], dict[str, Any]]

RESULT_ARTIFACT_NAME = "result"

_SKILL_DESCRIPTIONS = {
    "reconciliation": (
        "Reconciles bank lines to GL lines one-to-one (amount, reference, date window), and AP/AR subledgers "
        "and intercompany balances to their control accounts; halts when unmatched share or differences "
        "exceed tolerance."
    ),
    "accruals": (
        "Builds the balanced month-end GRNI accrual journal from goods received not invoiced, one debit line "
        "per receipt above materiality and one credit line to the accrual account."
    ),
    "variance": (
        "Flags budget variances above the amount and percentage thresholds and writes a template narrative "
        "whose every figure is grounded in the input lines."
    ),
}

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


def default_handlers() -> dict[str, Handler]:
    from engine.specialists import accruals, reconciliation, variance

    return {
        "reconciliation": reconciliation.handle,
        "accruals": accruals.handle,
        "variance": variance.handle,
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
        default_input_modes=["application/json"],
        default_output_modes=["application/json"],
        skills=[
            AgentSkill(
                id=name,
                name=name,
                description=description,
                tags=["countersign", "month-end-close", name],
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


def _read_payload(message: Message) -> dict[str, Any]:
    data_parts = get_data_parts(message.parts)
    if len(data_parts) != 1 or not isinstance(data_parts[0], dict):
        raise SpecialistRequestError("payload", "the message must carry exactly one data part holding an object")
    payload: dict[str, Any] = restore_integers(data_parts[0])
    return payload


def _read_idempotency_key(message: Message) -> str:
    key = MessageToDict(message.metadata).get(IDEMPOTENCY_KEY_FIELD)
    if not isinstance(key, str) or not key:
        raise SpecialistRequestError(IDEMPOTENCY_KEY_FIELD, "message metadata must carry a non-empty string")
    return key


def _run_with_key(handler: Handler, payload: dict[str, Any], idempotency_key: str) -> dict[str, Any]:
    token = _current_idempotency_key.set(idempotency_key)
    try:
        return handler(payload)
    finally:
        _current_idempotency_key.reset(token)


class HandlerExecutor(AgentExecutor):
    """Runs a specialist handler per task, off the event loop; reports one data artifact or a failure."""

    def __init__(self, name: str, handler: Handler) -> None:
        self.name = name
        self._handler = handler

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        if message is None:
            raise SpecialistRequestError("message", "the request carries no message")
        task = context.current_task
        if task is None:
            task = new_task_from_user_message(message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        try:
            idempotency_key = _read_idempotency_key(message)
            payload = _read_payload(message)
            result = await anyio.to_thread.run_sync(_run_with_key, self._handler, payload, idempotency_key)
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


async def _healthz(request: Request) -> JSONResponse:
    return JSONResponse({"status": "ok", "specialists": sorted(request.app.state.specialist_names)})


def _specialist_routes(name: str, handler: Handler, base_url: str) -> list[BaseRoute]:
    card = agent_card(name, base_url)
    request_handler = DefaultRequestHandler(
        agent_executor=HandlerExecutor(name, handler), task_store=InMemoryTaskStore(), agent_card=card
    )
    return [
        *create_agent_card_routes(card, card_url=f"/{name}{AGENT_CARD_WELL_KNOWN_PATH}"),
        *create_jsonrpc_routes(request_handler, rpc_url=f"/{name}"),
        *create_jsonrpc_routes(request_handler, rpc_url=f"/{name}/"),
    ]


def build_specialists_app(base_url: str, handlers: Mapping[str, Handler] | None = None) -> Starlette:
    """Serve each specialist at `/{name}` (JSON-RPC) with its card at `/{name}/.well-known/agent-card.json`.

    `base_url` is where clients reach this app; it goes into every card as the specialist's interface URL.
    """
    chosen = default_handlers() if handlers is None else dict(handlers)
    for name in chosen:
        if name not in SPECIALIST_NAMES:
            raise UnknownSpecialistError(name)
    routes: list[BaseRoute] = [Route("/healthz", _healthz, methods=["GET"])]
    for name, handler in chosen.items():
        routes.extend(_specialist_routes(name, handler, base_url))
    app = Starlette(routes=routes)
    app.state.specialist_names = tuple(chosen)
    return app
