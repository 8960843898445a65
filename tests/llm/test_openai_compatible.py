"""The OpenAI-compatible provider and record mode against a local fake server on a real socket."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from countersign.llm import (
    Message,
    ModelRequest,
    ModelResponse,
    OpenAICompatibleProvider,
    ProviderError,
    RecordingProvider,
    ReplayProvider,
    ToolCall,
    ToolSpec,
    run_loop,
)
from tests.llm.fake_openai import FakeOpenAI, Reply, completion, serve_fake_openai

GL_LINES = ToolSpec(
    "gl_lines", "GL lines of an account", {"type": "object", "properties": {"account": {"type": "string"}}}
)
REQUEST = ModelRequest(
    model="fake-model",
    template_hash="t" * 64,
    messages=(Message("system", "Explain."), Message("user", "Why did rent rise?")),
    tools=(GL_LINES,),
    max_tokens=200,
    temperature=0.0,
)
ASKS_FOR_GL_LINES = completion(
    None,
    tool_calls=[
        {"id": "call-1", "type": "function", "function": {"name": "gl_lines", "arguments": '{"account":"6100"}'}}
    ],
    finish_reason="tool_calls",
)


async def test_the_provider_posts_chat_completions_json_and_parses_text(
    fake: FakeOpenAI, http: httpx.AsyncClient
) -> None:
    fake.replies.append(Reply(json=completion("Rent rose with the lease.", prompt_tokens=31, completion_tokens=6)))
    provider = OpenAICompatibleProvider(fake.base_url, api_key="sk-test", http=http)
    response = await provider.complete(REQUEST)
    assert response == ModelResponse("Rent rose with the lease.", (), 31, 6, "stop")
    assert fake.received == [
        {
            "model": "fake-model",
            "messages": [{"role": "system", "content": "Explain."}, {"role": "user", "content": "Why did rent rise?"}],
            "max_tokens": 200,
            "temperature": 0.0,
            "tools": [
                {
                    "type": "function",
                    "function": {
                        "name": "gl_lines",
                        "description": "GL lines of an account",
                        "parameters": {"type": "object", "properties": {"account": {"type": "string"}}},
                    },
                }
            ],
        }
    ]
    assert fake.headers[0]["authorization"] == "Bearer sk-test"


async def test_tool_calls_are_parsed_and_sent_back_with_their_results(
    fake: FakeOpenAI, http: httpx.AsyncClient
) -> None:
    fake.replies += [Reply(json=ASKS_FOR_GL_LINES), Reply(json=completion("It rose by 1200.00."))]
    provider = OpenAICompatibleProvider(fake.base_url, api_key=None, http=http)
    result = await run_loop(provider, REQUEST, tools={"gl_lines": lambda args: '{"amount":"1200.00"}'})
    assert result.text == "It rose by 1200.00." and result.steps == 2
    assert "authorization" not in fake.headers[0]
    assert fake.received[1]["messages"][2:] == [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call-1",
                    "type": "function",
                    "function": {"name": "gl_lines", "arguments": '{"account": "6100"}'},
                }
            ],
        },
        {"role": "tool", "content": '{"amount":"1200.00"}', "tool_call_id": "call-1"},
    ]


async def test_record_mode_writes_cassettes_that_replay_serves_without_the_server(
    tmp_path: Path, http: httpx.AsyncClient
) -> None:
    async with serve_fake_openai() as fake:
        fake.replies += [Reply(json=ASKS_FOR_GL_LINES), Reply(json=completion("It rose by 1200.00."))]
        recorder = RecordingProvider(OpenAICompatibleProvider(fake.base_url, api_key=None, http=http), tmp_path)
        recorded = await run_loop(recorder, REQUEST, tools={"gl_lines": lambda args: '{"amount":"1200.00"}'})
    files = sorted(tmp_path.glob("*.json"))
    assert len(files) == 2
    assert {json.loads(f.read_text())["recorded_by"] for f in files} == {"record"}
    first = await ReplayProvider(tmp_path).complete(REQUEST)
    assert first.tool_calls == (ToolCall("call-1", "gl_lines", {"account": "6100"}),)
    replayed = await run_loop(
        ReplayProvider(tmp_path), REQUEST, tools={"gl_lines": lambda args: '{"amount":"1200.00"}'}
    )
    assert (replayed.text, replayed.steps, replayed.tokens_in, replayed.tokens_out) == (
        recorded.text,
        recorded.steps,
        recorded.tokens_in,
        recorded.tokens_out,
    )
    assert [e["request_key"] for e in replayed.events if e["kind"] == "model_step"] == [
        e["request_key"] for e in recorded.events if e["kind"] == "model_step"
    ]


async def test_record_mode_writes_nothing_when_the_provider_fails(
    fake: FakeOpenAI, http: httpx.AsyncClient, tmp_path: Path
) -> None:
    fake.replies.append(Reply(status=500, json={"error": "boom"}))
    recorder = RecordingProvider(OpenAICompatibleProvider(fake.base_url, api_key=None, http=http), tmp_path)
    with pytest.raises(ProviderError):
        await recorder.complete(REQUEST)
    assert list(tmp_path.iterdir()) == []


async def test_an_http_error_status_is_a_provider_error_naming_it(fake: FakeOpenAI, http: httpx.AsyncClient) -> None:
    fake.replies.append(Reply(status=500, json={"error": {"message": "model overloaded"}}))
    with pytest.raises(ProviderError, match=r"HTTP 500 .*model overloaded"):
        await OpenAICompatibleProvider(fake.base_url, api_key=None, http=http).complete(REQUEST)


@pytest.mark.parametrize(
    ("reply", "says"),
    [
        (Reply(raw=b"{this is not json"), "not JSON"),
        (Reply(json={"choices": []}), "malformed answer"),
        (Reply(json={"usage": {"prompt_tokens": 1, "completion_tokens": 1}}), "malformed answer"),
        (Reply(json={k: v for k, v in completion("no usage").items() if k != "usage"}), "malformed answer"),
        (
            Reply(
                json=completion(
                    None, tool_calls=[{"id": "c", "type": "function", "function": {"name": "x", "arguments": "{oops"}}]
                )
            ),
            "malformed answer",
        ),
        (Reply(json=completion("x", prompt_tokens=-1)), "malformed answer"),
        (
            Reply(
                json=completion(
                    None,
                    tool_calls=[{"id": "c", "type": "function", "function": {"name": "x", "arguments": '{"a": NaN}'}}],
                )
            ),
            "malformed answer",
        ),
    ],
)
async def test_a_malformed_answer_is_a_provider_error(
    fake: FakeOpenAI, http: httpx.AsyncClient, reply: Reply, says: str
) -> None:
    fake.replies.append(reply)
    with pytest.raises(ProviderError, match=says):
        await OpenAICompatibleProvider(fake.base_url, api_key=None, http=http).complete(REQUEST)


async def test_an_unreachable_server_is_a_provider_error(http: httpx.AsyncClient) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(ProviderError, match="transport error"):
        await OpenAICompatibleProvider(f"http://127.0.0.1:{port}/v1", api_key=None, http=http).complete(REQUEST)
