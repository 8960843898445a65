"""Schemathesis against the app's own OpenAPI schema: every operation, no 5xx, responses as documented.

The schema is read at import time from an app whose database is never touched (the pools open lazily), so pytest
gets one test per operation; each test then calls a second app built on the real per-test database.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from fastapi import FastAPI
from hypothesis import settings
from schemathesis.config import SchemathesisConfig
from schemathesis.python import asgi

from countersign.bootstrap.app import create_app
from countersign.bootstrap.database import Database
from countersign.bootstrap.runtime import Runtime, load_rules_all
from countersign.bootstrap.settings import PROJECT_ROOT, Settings
from tests.fuzz.strategies import FUZZ


def _schema_only_app() -> FastAPI:
    config = Settings(
        database_url=None,
        state_dir=Path("unused-state"),
        config_dir=PROJECT_ROOT / "config",
        callback_secret="schema-only",
        openapi=True,  # the pages are off by default (COUNTERSIGN_OPENAPI)
    )
    policy, workflows = load_rules_all(config)
    return create_app(Runtime(config, Database("postgresql://unused@127.0.0.1:1/unused"), policy, workflows))


# A body the schema forbids may also be refused for its size before it is parsed: 413 is a rejection too.
NEGATIVE_DATA_REFUSALS = ["400", "401", "403", "404", "405", "406", "409", "413", "415", "422", "428", "429", "5xx"]
CONFIG = SchemathesisConfig.from_dict(
    {"checks": {"negative_data_rejection": {"expected-statuses": NEGATIVE_DATA_REFUSALS}}}
)
schema = schemathesis.openapi.from_dict(_schema_only_app().openapi(), config=CONFIG)


@pytest.fixture
def live_app(runtime: Runtime) -> Iterator[FastAPI]:
    app = create_app(replace(runtime, settings=runtime.settings.model_copy(update=dict(openapi=True))))
    try:
        yield app
    finally:
        # Schemathesis runs the lifespan (the connection pools) on its own event loop and keeps it open;
        # close it before the test database is dropped.
        asgi.shutdown_lifespans()


@schema.parametrize()
@settings(FUZZ, max_examples=50)
def test_every_operation_answers_without_a_server_error_and_as_documented(case: Any, live_app: FastAPI) -> None:
    # Every status the routes answer (401/403/404/409/413/422) is declared in the schema, so conformance is checked.
    case.call_and_validate(app=live_app, base_url="http://testserver")
