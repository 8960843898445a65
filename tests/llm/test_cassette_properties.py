"""Any request and response survive a cassette: written, then replayed, they come back equal under the same key."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from countersign.llm import Message, ModelRequest, ModelResponse, ReplayProvider, ToolCall, write_cassette

json_scalars = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=20)
json_values = st.recursive(
    json_scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
)
arguments = st.dictionaries(st.text(max_size=8), json_values, max_size=4)
tool_calls = st.lists(st.builds(ToolCall, id=st.text(max_size=8), name=st.text(max_size=8), arguments=arguments))
messages = st.lists(
    st.builds(Message, role=st.sampled_from(["system", "user", "assistant", "tool"]), content=st.text(max_size=40)),
    min_size=1,
    max_size=4,
)
requests = st.builds(
    ModelRequest,
    model=st.text(min_size=1, max_size=12),
    template_hash=st.text(alphabet="0123456789abcdef", min_size=64, max_size=64),
    messages=messages.map(tuple),
    max_tokens=st.integers(1, 4096),
    temperature=st.floats(0.0, 2.0, allow_nan=False),
)
responses = st.builds(
    ModelResponse,
    content=st.none() | st.text(max_size=40),
    tool_calls=tool_calls.map(tuple),
    tokens_in=st.integers(0, 10**6),
    tokens_out=st.integers(0, 10**6),
    finish_reason=st.sampled_from(["stop", "tool_calls", "length"]),
)


@settings(max_examples=60, deadline=None)
@given(request=requests, response=responses)
def test_a_written_cassette_replays_the_same_response(request: ModelRequest, response: ModelResponse) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = write_cassette(Path(folder), request, response, recorded_by="hand")
        assert path.name == f"{request.key()}.json"
        assert asyncio.run(ReplayProvider(Path(folder)).complete(request)) == response
