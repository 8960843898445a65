"""Recorded responses ("cassettes"): one JSON file per request, named by the request's key.

A file holds {"key", "request", "response", "recorded_by"}. Replay refuses a file whose stored request is not the
request asked (a renamed or edited file), so a cassette cannot answer a question it was not recorded for.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from countersign.llm.messages import ModelRequest, ModelResponse, ToolCall, canonical_json, strict_json_loads
from countersign.llm.provider import NoRecordedResponse, Provider, ProviderError

RECORDERS = frozenset({"hand", "record"})


def cassette_path(cassette_dir: Path, request: ModelRequest) -> Path:
    return cassette_dir / f"{request.key()}.json"


def write_cassette(cassette_dir: Path, request: ModelRequest, response: ModelResponse, *, recorded_by: str) -> Path:
    """Write `<key>.json` (replacing an older one atomically) and return its path."""
    if recorded_by not in RECORDERS:
        raise ValueError(f"recorded_by must be one of {sorted(RECORDERS)}, not {recorded_by!r}")
    cassette_dir.mkdir(parents=True, exist_ok=True)
    document = {
        "key": request.key(),
        "request": request.as_json(),
        "response": response.as_json(),
        "recorded_by": recorded_by,
    }
    path = cassette_path(cassette_dir, request)
    partial = path.with_suffix(".json.partial")
    partial.write_text(json.dumps(document, sort_keys=True, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(partial, path)
    return path


def cassette_set_hash(cassette_dir: Path) -> str:
    """SHA-256 over the sorted (file name, SHA-256 of the file's bytes) of every `*.json` cassette in the folder.

    A missing or empty folder hashes nothing (the SHA-256 of no bytes), so the value is always a hex digest.
    """
    digest = hashlib.sha256()
    if cassette_dir.is_dir():
        for path in sorted(cassette_dir.glob("*.json"), key=lambda p: p.name):
            digest.update(f"{path.name}\0{hashlib.sha256(path.read_bytes()).hexdigest()}\n".encode())
    return digest.hexdigest()


def _response_from_json(value: Any, path: Path) -> ModelResponse:
    try:
        calls = tuple(
            ToolCall(id=str(call["id"]), name=str(call["name"]), arguments=_mapping(call["arguments"]))
            for call in value["tool_calls"]
        )
        content = value["content"]
        if content is not None and not isinstance(content, str):
            raise TypeError("content is neither text nor null")
        return ModelResponse(
            content=content,
            tool_calls=calls,
            tokens_in=_count(value["tokens_in"]),
            tokens_out=_count(value["tokens_out"]),
            finish_reason=str(value["finish_reason"]),
        )
    except (KeyError, TypeError, ValueError) as error:
        raise ProviderError(f"cassette {path} has a malformed response: {error!r}") from error


def _mapping(value: Any) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise TypeError(f"tool call arguments are not an object: {value!r}")
    return value


def _count(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"token count {value!r} is not a non-negative integer")
    return value


class ReplayProvider:
    """Answers from `<cassette_dir>/<key>.json`; no network, no credentials."""

    name = "replay"

    def __init__(self, cassette_dir: Path) -> None:
        self.cassette_dir = cassette_dir

    async def complete(self, request: ModelRequest) -> ModelResponse:
        key = request.key()
        path = self.cassette_dir / f"{key}.json"
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            raise NoRecordedResponse(key, self.cassette_dir) from None
        try:
            document = strict_json_loads(raw)
        except ValueError as error:
            raise ProviderError(f"cassette {path} is not JSON: {error}") from error
        if not isinstance(document, dict):
            raise ProviderError(f"cassette {path} is not a JSON object")
        if document.get("key") != key or canonical_json(document.get("request")) != request.canonical():
            raise ProviderError(f"cassette {path} was recorded for a different request than key {key}: refused")
        return _response_from_json(document.get("response"), path)


class RecordingProvider:
    """Asks `inner` (a real provider) and writes what it answered as a cassette that replay will serve."""

    name = "record"

    def __init__(self, inner: Provider, cassette_dir: Path) -> None:
        self.inner = inner
        self.cassette_dir = cassette_dir

    async def complete(self, request: ModelRequest) -> ModelResponse:
        response = await self.inner.complete(request)
        write_cassette(self.cassette_dir, request, response, recorded_by="record")
        return response
