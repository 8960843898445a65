"""A local fake of an OpenAI-compatible server: POST /v1/chat/completions on a real loopback socket.

It records each request body it received and answers with the next queued reply: a JSON document, an HTTP error,
bytes that are not JSON, or an endless answer streamed from a small buffer (`Reply.stream_bytes`), so a hostile
1 GiB answer costs the fake nothing; `streamed_bytes` is how much of it the client actually pulled.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

STREAM_CHUNK_BYTES = 64 * 1024


@dataclass
class Reply:
    status: int = 200
    json: Any = None
    raw: bytes | None = None  # sent as-is instead of `json`
    stream_bytes: int | None = None  # stream this many bytes (a JSON answer whose text never ends), chunked
    declare_length: bool = False  # with `stream_bytes`: send a Content-Length saying so
    headers: dict[str, str] | None = None  # e.g. {"Retry-After": "3"}


@dataclass
class FakeOpenAI:
    base_url: str = ""
    received: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    replies: list[Reply] = field(default_factory=list)
    streamed_bytes: int = 0

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.post("/v1/chat/completions")
        async def chat_completions(request: Request) -> Response:
            self.received.append(await request.json())
            self.headers.append(dict(request.headers))
            reply = self.replies.pop(0)
            if reply.stream_bytes is not None:
                headers = {"content-length": str(reply.stream_bytes)} if reply.declare_length else None
                return StreamingResponse(
                    self._endless(reply.stream_bytes), media_type="application/json", headers=headers
                )
            if reply.raw is not None:
                return Response(
                    reply.raw, status_code=reply.status, media_type="application/json", headers=reply.headers
                )
            return JSONResponse(reply.json, status_code=reply.status, headers=reply.headers)

        return app

    async def _endless(self, total_bytes: int) -> AsyncIterator[bytes]:
        prefix = b'{"choices": [{"index": 0, "message": {"role": "assistant", "content": "'
        block = b"a" * STREAM_CHUNK_BYTES
        sent = 0
        while sent < total_bytes:
            piece = (prefix if sent == 0 else block)[: total_bytes - sent]
            sent += len(piece)
            self.streamed_bytes = sent
            yield piece


def completion(
    content: str | None,
    *,
    tool_calls: list[dict[str, Any]] | None = None,
    prompt_tokens: int = 11,
    completion_tokens: int = 7,
    finish_reason: str = "stop",
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls is not None:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "model": "fake-model",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


@asynccontextmanager
async def serve_fake_openai() -> AsyncIterator[FakeOpenAI]:
    fake = FakeOpenAI()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    fake.base_url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    server = uvicorn.Server(uvicorn.Config(fake.app(), log_level="warning", lifespan="off"))
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        for _ in range(200):
            if server.started:
                break
            await asyncio.sleep(0.02)
        assert server.started, "the fake OpenAI server did not start"
        yield fake
    finally:
        server.should_exit = True
        await serving
        sock.close()
