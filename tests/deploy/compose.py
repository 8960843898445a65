"""docker-compose.yml read the way Docker Compose reads it, and rendered for processes on this machine.

The compose file decides what each service's process gets. `service_environment`, `service_command` and
`healthcheck_command` render it for local addresses and a test's secrets; tests/deploy/test_scram_topology.py starts
every process with exactly that. `CONTRACT` records what that test proved works (each service's environment and
command); `problems()` checks a compose file against it and against the deployment's rules (only `migrate` holds the
owner; each service holds only its role's credentials; healthchecks, restarts and start order), so the compose file,
the contract and the topology test cannot drift apart (tests/deploy/test_compose_consistency.py).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from countersign.bootstrap.settings import PROJECT_ROOT, Settings, variable

COMPOSE_FILE = PROJECT_ROOT / "docker-compose.yml"
IMAGE_STATE_DIR = "/var/lib/countersign"  # the image's COUNTERSIGN_STATE_DIR (Dockerfile); the `state` volume
STATE_VOLUME = f"state:{IMAGE_STATE_DIR}"

# What an operator must set (the .env file next to the compose file); the topology test supplies each.
REQUIRED_VARIABLES = (
    "POSTGRES_PASSWORD",
    "COUNTERSIGN_ENGINE_DB_PASSWORD",
    "COUNTERSIGN_CALLBACKS_DB_PASSWORD",
    "COUNTERSIGN_CALLBACK_SECRET",
    "COUNTERSIGN_SPECIALIST_TOKEN",
)
# Optional chat settings given to `serve` and `worker` (empty: the channel is off, as in the topology test).
CHAT_VARIABLES = (
    "SLACK_BOT_TOKEN",
    "SLACK_SIGNING_SECRET",
    "COUNTERSIGN_SLACK_CHANNEL",
    "COUNTERSIGN_SLACK_TEAM_IDS",
    "TEAMS_APP_ID",
    "TEAMS_APP_PASSWORD",
    "TEAMS_APP_TYPE",
    "TEAMS_APP_TENANT_ID",
    "COUNTERSIGN_TEAMS_TENANT_IDS",
    "COUNTERSIGN_TEAMS_SERVICE_URL",
    "COUNTERSIGN_TEAMS_CONVERSATION",
)
OWNER_VARIABLES = ("DATABASE_URL", "POSTGRES_PASSWORD")
# The Close Board's origin and the locale, given to `serve` and `worker` with these defaults when unset.
BOARD_DEFAULTS = {"COUNTERSIGN_BOARD_URL": "http://localhost:8000", "COUNTERSIGN_LOCALE": "en_GB"}

# The model every service names (the specialists ask it; the others record it in the closes they start), with these
# defaults when unset; the model's address and key go to the specialists alone.
MODEL_DEFAULTS = {"COUNTERSIGN_MODEL_PROVIDER": "replay", "COUNTERSIGN_MODEL_ID": "countersign-narrator-v1"}
MODEL_ACCESS_VARIABLES = ("COUNTERSIGN_MODEL_BASE_URL", "COUNTERSIGN_MODEL_API_KEY")
# Logs and traces of the long-running processes.
OBSERVE_DEFAULTS = {"COUNTERSIGN_LOG_FORMAT": "text", "OTEL_EXPORTER_OTLP_ENDPOINT": ""}
OPTIONAL_VARIABLES = (*CHAT_VARIABLES, *MODEL_ACCESS_VARIABLES)
DEFAULTED = {**BOARD_DEFAULTS, **MODEL_DEFAULTS, **OBSERVE_DEFAULTS}

_CHAT = {name: "{" + name + "}" for name in (*CHAT_VARIABLES, *BOARD_DEFAULTS)}
_MODEL = {name: "{" + name + "}" for name in MODEL_DEFAULTS}
_OBSERVE = {name: "{" + name + "}" for name in OBSERVE_DEFAULTS}
_ENGINE_URL = "postgresql://countersign_engine:{COUNTERSIGN_ENGINE_DB_PASSWORD}@{db}/countersign"
_CALLBACKS_URL = "postgresql://countersign_callbacks:{COUNTERSIGN_CALLBACKS_DB_PASSWORD}@{db}/countersign"

# What the topology test ran each service with, as templates: `{VAR}` is a variable from the .env file, `{db}` and
# `{specialists}` the address of that service.
CONTRACT: dict[str, dict[str, Any]] = {
    "migrate": {
        "command": ["db", "upgrade"],
        "environment": {
            **_MODEL,
            **{name: "{" + name + "}" for name in BOARD_DEFAULTS},
            "DATABASE_URL": "postgresql://countersign:{POSTGRES_PASSWORD}@{db}/countersign",
            "COUNTERSIGN_ENGINE_DB_PASSWORD": "{COUNTERSIGN_ENGINE_DB_PASSWORD}",
            "COUNTERSIGN_CALLBACKS_DB_PASSWORD": "{COUNTERSIGN_CALLBACKS_DB_PASSWORD}",
        },
    },
    "specialists": {
        "command": [
            "specialists",
            "serve",
            "--host",
            "0.0.0.0",
            "--port",
            "8100",
            "--public-url",
            "http://{specialists}",
        ],
        "environment": {
            **_MODEL,
            **_OBSERVE,
            **{name: "{" + name + "}" for name in MODEL_ACCESS_VARIABLES},
            "COUNTERSIGN_SPECIALIST_TOKEN": "{COUNTERSIGN_SPECIALIST_TOKEN}",
        },
    },
    "serve": {
        "command": ["serve", "--host", "0.0.0.0", "--port", "8000"],
        "environment": {
            **_CHAT,
            **_MODEL,
            **_OBSERVE,
            "COUNTERSIGN_ENGINE_DATABASE_URL": _ENGINE_URL,
            "COUNTERSIGN_CALLBACKS_DATABASE_URL": _CALLBACKS_URL,
            "COUNTERSIGN_CALLBACK_SECRET": "{COUNTERSIGN_CALLBACK_SECRET}",
        },
    },
    "worker": {
        "command": ["worker", "--poll-s", "2", "--metrics-host", "0.0.0.0", "--metrics-port", "9100"],
        "environment": {
            **_CHAT,
            **_MODEL,
            **_OBSERVE,
            "COUNTERSIGN_ENGINE_DATABASE_URL": _ENGINE_URL,
            "COUNTERSIGN_SPECIALISTS_URL": "http://{specialists}",
            "COUNTERSIGN_SPECIALIST_TOKEN": "{COUNTERSIGN_SPECIALIST_TOKEN}",
        },
    },
}
LONG_RUNNING = ("specialists", "serve", "worker")
SIGNERS = ("serve", "worker", "migrate")  # processes that may sign trace checkpoints (worker; CLI exports)
# The container addresses the compose file names, by service.
CONTAINER_ADDRESSES = {"db": "db:5432", "specialists": "specialists:8100"}


class ComposeError(ValueError):
    pass


def load(path: Path = COMPOSE_FILE) -> dict[str, Any]:
    loaded = yaml.safe_load(path.read_text(encoding="utf-8"))  # `<<:` merge keys resolved as Compose does
    assert isinstance(loaded, dict)
    return loaded


_REFERENCE = re.compile(r"\$(?:(\$)|\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))")


def interpolate(text: str, variables: Mapping[str, str]) -> str:
    """Compose's variable substitution: `$$`, `$VAR`, `${VAR}`, `${VAR:-default}`, `${VAR-default}`,
    `${VAR:?error}` and `${VAR?error}` (the `:` forms treat an empty value as unset)."""

    def one(match: re.Match[str]) -> str:
        escaped, name, operator, argument, bare = match.groups()
        if escaped:
            return "$"
        name = name or bare
        value = variables.get(name)
        unset = value is None or (value == "" and (operator or "").startswith(":"))
        if operator in (":-", "-"):
            return argument if unset else str(value)
        if operator in (":?", "?"):
            if unset:
                raise ComposeError(f"{name}: {argument or 'required'}")
            return str(value)
        return "" if value is None else str(value)

    return _REFERENCE.sub(one, text)


def referenced_variables(compose: Mapping[str, Any]) -> set[str]:
    """Every variable the compose file substitutes anywhere."""
    names = set()
    for match in _REFERENCE.finditer(yaml.safe_dump(compose, width=10_000)):
        if not match.group(1):
            names.add(match.group(2) or match.group(5))
    return names


def _local(text: str, hosts: Mapping[str, str]) -> str:
    """Container addresses (`db:5432`) in a URL replaced by local ones (`127.0.0.1:54321`)."""
    for container, local in hosts.items():
        text = re.sub(rf"(?<=[@/]){re.escape(container)}(?=/|$)", local, text)
    return text


def _service(compose: Mapping[str, Any], service: str) -> dict[str, Any]:
    services = compose.get("services") or {}
    if service not in services:
        raise ComposeError(f"{service}: no such service")
    found = services[service]
    assert isinstance(found, dict)
    return found


def service_environment(
    compose: Mapping[str, Any], service: str, variables: Mapping[str, str], hosts: Mapping[str, str]
) -> dict[str, str]:
    """The environment Compose gives `service`, with container addresses replaced by `hosts`' local ones."""
    raw = _service(compose, service).get("environment") or {}
    if isinstance(raw, list):  # the `- KEY=value` form
        raw = dict(item.split("=", 1) if "=" in item else (item, variables.get(item, "")) for item in raw)
    return {str(key): _local(interpolate(str(value), variables), hosts) for key, value in raw.items()}


def service_command(
    compose: Mapping[str, Any], service: str, ports: Mapping[int, int], hosts: Mapping[str, str]
) -> list[str]:
    """The service's command, listening on 127.0.0.1 and on `ports` (container port -> local port)."""
    command = _service(compose, service).get("command") or []
    local = []
    previous = ""
    for argument in command:
        argument = str(argument)
        if argument == "0.0.0.0":
            argument = "127.0.0.1"
        elif previous in ("--port", "--metrics-port"):
            argument = str(ports.get(int(argument), argument))
        local.append(_local(argument, hosts))
        previous = argument
    return local


def healthcheck_command(compose: Mapping[str, Any], service: str, ports: Mapping[int, int]) -> list[str]:
    """The service's healthcheck as a local command (`python` is this interpreter)."""
    test = list(_service(compose, service)["healthcheck"]["test"])
    if test[0] != "CMD":
        raise ComposeError(f"{service}: healthcheck must be the exec form [CMD, ...] to run without a shell")
    command = [sys.executable if part == "python" else str(part) for part in test[1:]]
    for container_port, local_port in ports.items():
        command = [part.replace(f"127.0.0.1:{container_port}/", f"127.0.0.1:{local_port}/") for part in command]
    return command


def contract_environment(service: str, variables: Mapping[str, str], hosts: Mapping[str, str]) -> dict[str, str]:
    """What the topology test relies on `service` getting, for these variables and local addresses."""
    fields = {**{name: variables.get(name, "") for name in (*REQUIRED_VARIABLES, *OPTIONAL_VARIABLES)}}
    fields.update({name: variables.get(name) or default for name, default in DEFAULTED.items()})
    fields.update({service_name: hosts[address] for service_name, address in CONTAINER_ADDRESSES.items()})
    return {key: value.format(**fields) for key, value in CONTRACT[service]["environment"].items()}


def contract_command(service: str, hosts: Mapping[str, str]) -> list[str]:
    fields = {service_name: hosts[address] for service_name, address in CONTAINER_ADDRESSES.items()}
    return [part.format(**fields) for part in CONTRACT[service]["command"]]


def problems(compose: Mapping[str, Any], dockerfile: str | None = None) -> list[str]:
    """Everything in `compose` that disagrees with the contract or the deployment's rules; [] when consistent."""
    found: list[str] = []
    variables = {name: f"value-of-{name}" for name in REQUIRED_VARIABLES}  # distinct, URL-safe stand-ins
    hosts = {address: address for address in CONTAINER_ADDRESSES.values()}  # container addresses kept as they are
    known = {variable(field) for field in Settings.model_fields}
    referenced = referenced_variables(compose)
    for name in sorted(referenced - {*REQUIRED_VARIABLES, *OPTIONAL_VARIABLES, *DEFAULTED}):
        found.append(f"${{{name}}}: not a deployment variable (the topology test does not set it)")
    for name in sorted(set(REQUIRED_VARIABLES) - referenced):
        found.append(f"{name}: required by the deployment but used nowhere")
    for service in CONTRACT:
        try:
            environment = service_environment(compose, service, variables, hosts)
            command = [str(part) for part in _service(compose, service).get("command") or []]
        except (ComposeError, KeyError, ValueError) as exc:
            found.append(f"{service}: {exc}")
            continue
        expected = contract_environment(service, variables, hosts)
        for key in sorted(environment.keys() | expected.keys()):
            if key not in expected:
                found.append(f"{service}: {key} is not in the environment the topology test ran it with")
            elif key not in environment:
                found.append(f"{service}: {key} is missing (the topology test gives it)")
            elif environment[key] != expected[key]:
                found.append(f"{service}: {key} is {environment[key]!r}, the topology test ran with {expected[key]!r}")
        for key in sorted(environment.keys() - known):
            found.append(f"{service}: {key} is not a Countersign setting (countersign/bootstrap/settings.py)")
        if service != "migrate":
            for key, value in environment.items():
                if key in OWNER_VARIABLES or variables["POSTGRES_PASSWORD"] in value:
                    found.append(f"{service}: holds the owner's credentials ({key})")
        if command != contract_command(service, hosts):
            found.append(f"{service}: command {command} is not the one the topology test ran")
    found.extend(_lifecycle_problems(compose))
    if dockerfile is not None and f"COUNTERSIGN_STATE_DIR={IMAGE_STATE_DIR}" not in dockerfile:
        found.append(f"Dockerfile: COUNTERSIGN_STATE_DIR is not {IMAGE_STATE_DIR} (where the state volume is mounted)")
    return found


def _lifecycle_problems(compose: Mapping[str, Any]) -> list[str]:
    found = []
    services = compose.get("services") or {}
    for service in LONG_RUNNING:
        spec = services.get(service) or {}
        if not (spec.get("healthcheck") or {}).get("test"):
            found.append(f"{service}: no healthcheck")
        if spec.get("restart") != "unless-stopped":
            found.append(f"{service}: restart is {spec.get('restart')!r}, not 'unless-stopped'")
    for service in ("serve", "worker"):
        depends = (services.get(service) or {}).get("depends_on") or {}
        if (depends.get("migrate") or {}).get("condition") != "service_completed_successfully":
            found.append(f"{service}: does not wait for migrate to complete successfully")
    if ((services.get("migrate") or {}).get("depends_on") or {}).get("db", {}).get("condition") != "service_healthy":
        found.append("migrate: does not wait for a healthy db")
    for service in SIGNERS:
        if STATE_VOLUME not in ((services.get(service) or {}).get("volumes") or []):
            found.append(f"{service}: the state volume (trace signing key) is not mounted at {IMAGE_STATE_DIR}")
    if "state" not in (compose.get("volumes") or {}):
        found.append("volumes: no named `state` volume for the trace signing key")
    return found
