"""Systems under test for the public A2A TCK (docs/a2a-conformance.md); not part of `make test`.

    python tests/conformance/tck_sut.py bare --port 9100
    python tests/conformance/tck_sut.py specialist NAME --port 9101 --token TOKEN

`bare` is the baseline: a2a-sdk's own request handler and in-memory task store behind a trivial executor that
answers every message with a completed task echoing its text. `specialist` serves every Countersign specialist the
way `countersign specialists serve` does, with NAME's card at the origin root and its JSON-RPC also at `/`. When the
checked-out `build_specialists_app` has no `root_agent` (an older tree, for a before/after comparison), a small ASGI
wrapper rewrites the root paths to NAME's own.
"""

from __future__ import annotations

import argparse
import inspect
import sys
from pathlib import Path
from typing import Any

import uvicorn

sys.path.insert(0, str(Path.cwd()))  # the tree under test: run from its root


def bare_app(base_url: str) -> Any:
    from a2a.helpers import get_message_text, new_task_from_user_message, new_text_message
    from a2a.server.agent_execution import AgentExecutor, RequestContext
    from a2a.server.events import EventQueue
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
    from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
    from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill
    from a2a.utils.constants import PROTOCOL_VERSION_CURRENT, TransportProtocol
    from starlette.applications import Starlette

    class EchoExecutor(AgentExecutor):
        async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
            message = context.message
            assert message is not None
            task = context.current_task or new_task_from_user_message(message)
            if context.current_task is None:
                await event_queue.enqueue_event(task)
            updater = TaskUpdater(event_queue, task.id, task.context_id)
            text = get_message_text(message)
            await updater.complete(new_text_message(f"echo: {text}", context_id=task.context_id, task_id=task.id))

        async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
            task = context.current_task
            if task is not None:
                await TaskUpdater(event_queue, task.id, task.context_id).cancel()

    card = AgentCard(
        name="bare-a2a-sdk",
        description="A bare a2a-sdk server with a trivial echo executor (the TCK baseline).",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(
                url=base_url,
                protocol_binding=TransportProtocol.JSONRPC.value,
                protocol_version=PROTOCOL_VERSION_CURRENT,
            )
        ],
        capabilities=AgentCapabilities(streaming=False, push_notifications=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="echo", name="echo", description="Echoes the message text.", tags=["echo"])],
    )
    handler = DefaultRequestHandler(agent_executor=EchoExecutor(), task_store=InMemoryTaskStore(), agent_card=card)
    return Starlette(routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(handler, rpc_url="/")])


class RootRewrite:
    """For a tree without `root_agent`: the root card and `/` answer as NAME's own paths."""

    def __init__(self, app: Any, name: str) -> None:
        self.app = app
        self.name = name

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] in ("/", "/.well-known/agent-card.json"):
            path = f"/{self.name}" if scope["path"] == "/" else f"/{self.name}{scope['path']}"
            scope = dict(scope, path=path, raw_path=path.encode())
        await self.app(scope, receive, send)


def specialist_app(name: str, base_url: str, token: str) -> Any:
    from countersign.specialists.server import build_specialists_app

    if "root_agent" in inspect.signature(build_specialists_app).parameters:
        return build_specialists_app(base_url, token=token, root_agent=name)
    return RootRewrite(build_specialists_app(base_url, token=token), name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("kind", choices=("bare", "specialist"))
    parser.add_argument("name", nargs="?")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--token", default="")
    args = parser.parse_args()
    base_url = f"http://127.0.0.1:{args.port}"
    if args.kind == "bare":
        app = bare_app(base_url)
    else:
        if not args.name or not args.token:
            parser.error("specialist needs NAME and --token")
        app = specialist_app(args.name, base_url, args.token)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
