"""docker-compose.yml gives each service exactly the environment and command the topology test ran it with
(tests/deploy/compose.py CONTRACT), only `migrate` holds the owner, and every long-running service has a healthcheck,
a restart policy and the start order the deployment needs. A drifted compose file fails the check."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from countersign.bootstrap.settings import PROJECT_ROOT
from tests.deploy import compose


def test_the_shipped_compose_file_is_the_topology_the_test_ran() -> None:
    dockerfile = (PROJECT_ROOT / "Dockerfile").read_text()
    assert compose.problems(compose.load(), dockerfile) == []


def test_rendering_resolves_variables_and_addresses_as_compose_would() -> None:
    variables = {name: f"secret-{n}" for n, name in enumerate(compose.REQUIRED_VARIABLES)}
    hosts = {"db:5432": "127.0.0.1:6000", "specialists:8100": "127.0.0.1:6100"}
    loaded = compose.load()
    serve = compose.service_environment(loaded, "serve", variables, hosts)
    engine_password = variables["COUNTERSIGN_ENGINE_DB_PASSWORD"]
    assert serve["COUNTERSIGN_ENGINE_DATABASE_URL"] == (
        f"postgresql://countersign_engine:{engine_password}@127.0.0.1:6000/countersign"
    )
    assert serve["SLACK_BOT_TOKEN"] == ""  # optional, off
    assert serve["COUNTERSIGN_MODEL_PROVIDER"] == "replay" and serve["COUNTERSIGN_LOG_FORMAT"] == "text"
    named = {**variables, "COUNTERSIGN_MODEL_PROVIDER": "openai", "COUNTERSIGN_MODEL_ID": "gpt-x"}
    for service in ("migrate", "serve", "worker", "specialists"):  # one .env: every service names the same model
        environment = compose.service_environment(loaded, service, named, hosts)
        assert (environment["COUNTERSIGN_MODEL_PROVIDER"], environment["COUNTERSIGN_MODEL_ID"]) == ("openai", "gpt-x")
        assert ("COUNTERSIGN_MODEL_API_KEY" in environment) == (service == "specialists")
    worker = compose.service_environment(loaded, "worker", variables, hosts)
    assert worker["COUNTERSIGN_SPECIALISTS_URL"] == "http://127.0.0.1:6100"
    assert compose.service_command(loaded, "worker", {9100: 7001}, hosts)[-1] == "7001"
    with pytest.raises(compose.ComposeError, match="POSTGRES_PASSWORD"):
        compose.service_environment(loaded, "migrate", {}, hosts)  # `${VAR:?...}`: compose refuses to start too


def test_interpolation_follows_compose_rules() -> None:
    values = {"SET": "x", "EMPTY": ""}
    assert compose.interpolate("$$SET ${SET} $SET ${EMPTY:-d} ${EMPTY-d} ${UNSET-d}", values) == "$SET x x d  d"
    with pytest.raises(compose.ComposeError):
        compose.interpolate("${EMPTY:?needed}", values)


DRIFTS: dict[str, Callable[[dict[str, Any]], None]] = {
    # a variable renamed in one place only: serve would authenticate with a password migrate never set
    "renamed password variable": lambda c: c["services"]["serve"]["environment"].update(
        COUNTERSIGN_ENGINE_DATABASE_URL="postgresql://countersign_engine:${ENGINE_PASSWORD:?x}@db:5432/countersign"
    ),
    "worker given the owner's URL": lambda c: c["services"]["worker"]["environment"].update(
        DATABASE_URL="postgresql://countersign:${POSTGRES_PASSWORD:?x}@db:5432/countersign"
    ),
    "serve connecting as the owner": lambda c: c["services"]["serve"]["environment"].update(
        COUNTERSIGN_CALLBACKS_DATABASE_URL="postgresql://countersign:${POSTGRES_PASSWORD:?x}@db:5432/countersign"
    ),
    "misspelt setting": lambda c: c["services"]["worker"]["environment"].update(
        COUNTERSIGN_SPECIALIST_TOKENS="${COUNTERSIGN_SPECIALIST_TOKEN:?x}"
    ),
    "specialists on another port": lambda c: c["services"]["worker"]["environment"].update(
        COUNTERSIGN_SPECIALISTS_URL="http://specialists:8101"
    ),
    "callback secret dropped": lambda c: c["services"]["serve"]["environment"].pop("COUNTERSIGN_CALLBACK_SECRET"),
    "command changed": lambda c: c["services"]["worker"].update(command=["worker", "--once"]),
    "no healthcheck": lambda c: c["services"]["specialists"].pop("healthcheck"),
    "no restart policy": lambda c: c["services"]["serve"].pop("restart"),
    "serve starts before migrate finishes": lambda c: c["services"]["serve"]["depends_on"].update(
        migrate={"condition": "service_started"}
    ),
    "worker without the key volume": lambda c: c["services"]["worker"].update(volumes=[]),
    # the specialists could not reach the model an operator configured
    "specialists without the model's key": lambda c: c["services"]["specialists"]["environment"].pop(
        "COUNTERSIGN_MODEL_API_KEY"
    ),
    # serve would record the default model in the version set of the closes it starts, not the one asked
    "serve not naming the model": lambda c: c["services"]["serve"]["environment"].pop("COUNTERSIGN_MODEL_ID"),
    "worker given the model's key": lambda c: c["services"]["worker"]["environment"].update(
        COUNTERSIGN_MODEL_API_KEY="${COUNTERSIGN_MODEL_API_KEY:-}"
    ),
    "specialists without OTLP": lambda c: c["services"]["specialists"]["environment"].pop(
        "OTEL_EXPORTER_OTLP_ENDPOINT"
    ),
    "migrate without the board URL": lambda c: c["services"]["migrate"]["environment"].pop("COUNTERSIGN_BOARD_URL"),
}


@pytest.mark.parametrize("drift", sorted(DRIFTS))
def test_a_drifted_compose_file_fails_the_check(drift: str) -> None:
    drifted = copy.deepcopy(compose.load())
    DRIFTS[drift](drifted)
    assert compose.problems(drifted) != []


def test_a_compose_file_with_a_drifted_variable_fails_the_check(tmp_path: Any) -> None:
    text = compose.COMPOSE_FILE.read_text()
    reference = "${COUNTERSIGN_ENGINE_DB_PASSWORD:?set COUNTERSIGN_ENGINE_DB_PASSWORD}@db"
    assert reference in text
    drifted = tmp_path / "docker-compose.yml"
    drifted.write_text(text.replace(reference, "${COUNTERSIGN_ENGINE_PASSWORD:?set it}@db", 1))
    assert compose.problems(compose.load(drifted)) != []
