"""Client side of the specialists' A2A transport: call a specialist, get its result or a SpecialistError."""

import asyncio
import secrets
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import httpx
from a2a.client import A2ACardResolver, Client, ClientCallContext, ClientConfig, ClientFactory
from a2a.helpers import get_data_parts, get_message_text, new_data_part, new_message
from a2a.types import AgentCard, Role, SendMessageRequest, Task, TaskState
from a2a.utils.errors import A2AError
from google.protobuf.json_format import MessageToDict
from opentelemetry import trace

from countersign.specialists.server import RESULT_ARTIFACT_NAME, Handler, build_specialists_app
from countersign.specialists.wire import IDEMPOTENCY_KEY_FIELD, restore_integers

if TYPE_CHECKING:
    from countersign.specialists.narration import Narrator

DEFAULT_TIMEOUT_S = 120.0
IN_PROCESS_BASE_URL = "http://specialists.countersign.internal"

# A no-op unless the process installed a tracer provider (countersign/bootstrap/telemetry.py).
tracer = trace.get_tracer("countersign.dispatch")


class SpecialistError(Exception):
    def __init__(self, specialist: str, reason: str) -> None:
        self.specialist = specialist
        self.reason = reason
        super().__init__(f"specialist {specialist!r} failed: {reason}")


class SpecialistClient:
    """Calls specialist agents served under `{base_url}/{specialist}`; caches each agent card and client.

    Every call carries `Authorization: Bearer <token>`; the agent cards are fetched without it.
    """

    def __init__(self, http: httpx.AsyncClient, base_url: str, *, token: str) -> None:
        self._http = http
        self._base_url = base_url.rstrip("/")
        self._auth_headers = {"Authorization": f"Bearer {token}"}
        self._factory = ClientFactory(ClientConfig(httpx_client=http, streaming=False))
        self._cards: dict[str, AgentCard] = {}
        self._clients: dict[str, Client] = {}

    async def call(
        self,
        specialist: str,
        payload: dict[str, Any],
        idempotency_key: str,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> dict[str, Any]:
        with tracer.start_as_current_span(
            "specialist.call", kind=trace.SpanKind.CLIENT, attributes={"countersign.specialist": specialist}
        ):
            return await self._call(specialist, payload, idempotency_key, timeout_s)

    async def _call(
        self, specialist: str, payload: dict[str, Any], idempotency_key: str, timeout_s: float
    ) -> dict[str, Any]:
        no_answer = f"no answer within {timeout_s} s"
        try:
            async with asyncio.timeout(timeout_s) as deadline:
                task = await self._send(specialist, payload, idempotency_key, timeout_s)
        except TimeoutError as exc:
            raise SpecialistError(specialist, no_answer) from exc
        except A2AError as exc:
            raise SpecialistError(specialist, f"{type(exc).__name__}: {exc}") from exc
        if deadline.expired():
            # In process (httpx.ASGITransport) the SDK server swallows the cancellation and answers with the
            # unfinished task, so the deadline can pass without a TimeoutError.
            raise SpecialistError(specialist, no_answer)
        return _task_result(specialist, task, idempotency_key)

    async def aclose(self) -> None:
        """Close the cached A2A clients (the httpx client passed in stays open: it belongs to the caller)."""
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.close()

    async def card(self, specialist: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> AgentCard:
        cached = self._cards.get(specialist)
        if cached is None:
            resolver = A2ACardResolver(self._http, f"{self._base_url}/{specialist}")
            cached = await resolver.get_agent_card(http_kwargs={"timeout": timeout_s})
            self._cards[specialist] = cached
        return cached

    async def _client(self, specialist: str, timeout_s: float) -> Client:
        client = self._clients.get(specialist)
        if client is None:
            client = self._factory.create(await self.card(specialist, timeout_s))
            self._clients[specialist] = client
        return client

    async def _send(self, specialist: str, payload: dict[str, Any], idempotency_key: str, timeout_s: float) -> Task:
        client = await self._client(specialist, timeout_s)
        message = new_message([new_data_part(payload)], role=Role.ROLE_USER)
        message.metadata.update({IDEMPOTENCY_KEY_FIELD: idempotency_key})
        request = SendMessageRequest(message=message)
        task: Task | None = None
        async for event in client.send_message(request, context=self._call_context(timeout_s)):
            if event.HasField("task"):
                task = event.task
            elif event.HasField("message"):
                reason = f"answered with a message instead of a task: {get_message_text(event.message)!r}"
                raise SpecialistError(specialist, reason)
        if task is None:
            raise SpecialistError(specialist, "the agent returned no task")
        return task

    def _call_context(self, timeout_s: float) -> ClientCallContext:
        return ClientCallContext(timeout=timeout_s, service_parameters=dict(self._auth_headers))


class SpecialistContractError(SpecialistError):
    """The specialist answered input-required: our own request broke the contract (a bug here, not an outage), so
    repeating it cannot help."""


def _task_result(specialist: str, task: Task, idempotency_key: str) -> dict[str, Any]:
    state = task.status.state
    if state == TaskState.TASK_STATE_INPUT_REQUIRED:
        detail = get_message_text(task.status.message) if task.status.HasField("message") else ""
        raise SpecialistContractError(specialist, f"request refused as incomplete, a bug in the caller: {detail}")
    if state != TaskState.TASK_STATE_COMPLETED:
        detail = get_message_text(task.status.message) if task.status.HasField("message") else ""
        reason = detail or f"task {task.id} did not complete: {TaskState.Name(state)}"
        raise SpecialistError(specialist, reason)
    artifacts = [artifact for artifact in task.artifacts if artifact.name == RESULT_ARTIFACT_NAME]
    if len(artifacts) != 1:
        raise SpecialistError(specialist, f"expected one {RESULT_ARTIFACT_NAME!r} artifact, got {len(artifacts)}")
    artifact = artifacts[0]
    echoed_key = MessageToDict(artifact.metadata).get(IDEMPOTENCY_KEY_FIELD)
    if echoed_key != idempotency_key:
        raise SpecialistError(specialist, f"result is for idempotency key {echoed_key!r}, not {idempotency_key!r}")
    data_parts = get_data_parts(artifact.parts)
    if len(data_parts) != 1 or not isinstance(data_parts[0], dict):
        raise SpecialistError(specialist, "the result artifact must hold exactly one data part with an object")
    result: dict[str, Any] = restore_integers(data_parts[0])
    return result


@asynccontextmanager
async def open_in_process(
    handlers: Mapping[str, Handler] | None = None,
    base_url: str = IN_PROCESS_BASE_URL,
    token: str | None = None,
    narrator: "Narrator | None" = None,
) -> AsyncIterator[SpecialistClient]:
    """A SpecialistClient talking to an in-process specialists app over `httpx.ASGITransport`.

    Without `handlers`, the default specialists, model-backed when a `narrator` is given.

    Without a `token`, app and client share a fresh random one: the in-process door is authenticated too.
    """
    token = token or secrets.token_urlsafe(32)
    app = build_specialists_app(base_url, handlers, token=token, narrator=narrator)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=base_url) as http:
        client = SpecialistClient(http, base_url, token=token)
        try:
            yield client
        finally:
            await client.aclose()
