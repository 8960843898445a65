"""Fixtures the model-gateway tests share: the local fake OpenAI-compatible server and an HTTP client."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from tests.llm.fake_openai import FakeOpenAI, serve_fake_openai


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with serve_fake_openai() as server:
        yield server


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient() as client:
        yield client
