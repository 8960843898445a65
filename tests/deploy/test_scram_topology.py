"""The compose topology, run without Docker: every service a process with exactly the environment and command that
docker-compose.yml gives it (hosts replaced by 127.0.0.1), against a PostgreSQL that demands SCRAM over TCP.

`migrate` upgrades the schema as the owner and sets the service roles' passwords; `specialists`, `serve` and two
`worker` replicas start holding only their roles' credentials; an operator imports principals through `migrate` and
starts a close through `worker` (as `docker compose run` would); people decide every gate through signed callbacks to
`serve`, each decision signed by the person's own Ed25519 key; the workers carry the close to `closed`. About 20 s.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from countersign.audit.checkpoint import parse_signer_key
from countersign.audit.person_proof import public_key_text
from countersign.audit.trace import verify_chain
from countersign.engine.runs import close_status
from tests.deploy import compose
from tests.deploy.postgres import ScramServer, free_port, scram_postgres
from tests.support import decision_body, person_public_key, signed_headers

ENTITY, PERIOD = "TOPO-UK", "2026-10"
PEOPLE = {
    "dana.reyes": ["accountant"],
    "alice.chen": ["controller"],
    "bob.osei": ["cfo", "controller"],
    "carol.main": ["cfo"],
}
WORKER_REPLICAS = 2
STARTUP_LIMIT_S = 120.0  # liveness bounds only: how long a process may take to answer its healthcheck
CLOSE_LIMIT_S = 300.0

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PostgreSQL binaries from the wheel")


def _variables() -> dict[str, str]:
    """The deployment's .env file: a fresh secret for each required variable; chat left off."""
    return {name: secrets.token_hex(16) for name in compose.REQUIRED_VARIABLES}


def _people_yaml(path: Path) -> Path:
    lines = ["principals:"]
    for person, roles in PEOPLE.items():
        key = public_key_text(person_public_key(person))
        lines.append(
            f"  - {{id: {person}, kind: human, name: {person}, roles: [{', '.join(roles)}], public_key: '{key}'}}"
        )
    path.write_text("\n".join(lines) + "\n")
    return path


class Topology:
    """The rendered compose file for this machine: each service's environment, command and healthcheck."""

    def __init__(self, server: ScramServer, variables: dict[str, str], state: Path, scratch: Path) -> None:
        self.compose = compose.load()
        self.variables = variables
        self.specialists_port = free_port()
        self.hosts = {"db:5432": server.address, "specialists:8100": f"127.0.0.1:{self.specialists_port}"}
        self.state = state  # the `state` volume, mounted into migrate, serve and worker
        self.scratch = scratch
        self.ports: dict[str, dict[int, int]] = {
            "specialists": {8100: self.specialists_port},
            "serve": {8000: free_port()},
            **{f"worker.{n}": {9100: free_port()} for n in range(1, WORKER_REPLICAS + 1)},
        }

    def environment(self, service: str) -> dict[str, str]:
        """Exactly what compose gives the service, plus what the image sets (Dockerfile ENV) and a PATH."""
        rendered = compose.service_environment(self.compose, service, self.variables, self.hosts)
        assert rendered == compose.contract_environment(service, self.variables, self.hosts)
        mounts_state = compose.STATE_VOLUME in (self.compose["services"][service].get("volumes") or [])
        image = {
            "PATH": os.environ["PATH"],
            "HOME": str(self.scratch),
            "PYTHONUNBUFFERED": "1",
            "COUNTERSIGN_STATE_DIR": str(self.state if mounts_state else self.scratch / f"{service}-state"),
        }
        return {**image, **rendered}

    def command(self, service: str, instance: str | None = None) -> list[str]:
        ports = self.ports.get(instance or service, {})
        args = compose.service_command(self.compose, service, ports, self.hosts)
        return [sys.executable, "-m", "countersign.cli.main", *args]

    def healthcheck(self, service: str, instance: str | None = None) -> list[str]:
        return compose.healthcheck_command(self.compose, service, self.ports[instance or service])

    def run(self, service: str, *args: str) -> subprocess.CompletedProcess[str]:
        """`docker compose run --rm SERVICE ARGS...`: a one-off command with the service's environment."""
        done = subprocess.run(
            [sys.executable, "-m", "countersign.cli.main", *args],
            env=self.environment(service),
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert done.returncode == 0, f"{service} {args}: {done.stdout}\n{done.stderr}"
        return done


@pytest.fixture
def started(tmp_path: Path) -> Iterator[tuple[Topology, ScramServer, dict[str, subprocess.Popen[bytes]]]]:
    variables = _variables()
    with scram_postgres(
        tmp_path / "postgres", owner="countersign", password=variables["POSTGRES_PASSWORD"], database="countersign"
    ) as server:
        topology = Topology(server, variables, tmp_path / "state-volume", tmp_path)
        upgraded = subprocess.run(
            topology.command("migrate"),
            env=topology.environment("migrate"),
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert upgraded.returncode == 0, upgraded.stdout + upgraded.stderr
        assert "password set for role countersign_engine" in upgraded.stdout
        assert "password set for role countersign_callbacks" in upgraded.stdout
        for secret in variables.values():
            assert secret not in upgraded.stdout + upgraded.stderr  # never logged
        processes: dict[str, subprocess.Popen[bytes]] = {}
        logs = tmp_path / "logs"
        logs.mkdir()
        instances = [("specialists", "specialists"), ("serve", "serve")]
        instances += [("worker", f"worker.{n}") for n in range(1, WORKER_REPLICAS + 1)]
        try:
            for service, instance in instances:
                processes[instance] = subprocess.Popen(
                    topology.command(service, instance),
                    env=topology.environment(service),
                    stdout=(logs / f"{instance}.log").open("wb"),
                    stderr=subprocess.STDOUT,
                )
            for service, instance in instances:
                _wait_healthy(topology, service, instance, processes[instance], logs)
            yield topology, server, processes
        finally:
            for process in processes.values():
                process.terminate()
            for process in processes.values():
                try:
                    process.wait(timeout=40)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


def _wait_healthy(
    topology: Topology, service: str, instance: str, process: subprocess.Popen[bytes], logs: Path
) -> None:
    """Run the service's own compose healthcheck until it passes (liveness bound STARTUP_LIMIT_S)."""
    deadline = time.monotonic() + STARTUP_LIMIT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"{instance} exited {process.returncode}: {(logs / f'{instance}.log').read_text()}")
        check = subprocess.run(topology.healthcheck(service, instance), capture_output=True, timeout=30)
        if check.returncode == 0:
            return
        time.sleep(0.5)
    raise AssertionError(f"{instance} not healthy in {STARTUP_LIMIT_S}s: {(logs / f'{instance}.log').read_text()}")


def _process_environment(process: subprocess.Popen[bytes]) -> dict[str, str]:
    raw = Path(f"/proc/{process.pid}/environ").read_bytes()
    return dict(item.decode().split("=", 1) for item in raw.split(b"\0") if b"=" in item)


async def _decide(http: httpx.AsyncClient, secret: str, gate: dict[str, Any], person: str) -> None:
    """Signed over the gate as the status read showed it (its summary digest), as a client signs."""
    body = decision_body(
        person,
        "approve",
        gate_id=gate["gate_id"],
        reason="reviewed in the topology test",
        summary_digest=gate["summary_digest"],
    )
    gate_id = gate["gate_id"]
    answer = await http.post(
        f"/callbacks/gates/{gate_id}/decisions", content=body, headers=signed_headers(body, secret=secret)
    )
    assert answer.status_code in (200, 201), answer.text


async def _drive_to_closed(topology: Topology, owner: psycopg.AsyncConnection[Any], serve_port: int) -> dict[str, Any]:
    """Decide every open gate as its eligible people would, until the workers report the close closed."""
    row = await (await owner.execute("SELECT close_id FROM close_run WHERE entity = %s", (ENTITY,))).fetchone()
    assert row is not None
    close_id = str(row[0])
    secret = topology.variables["COUNTERSIGN_CALLBACK_SECRET"]
    decided: set[tuple[str, str]] = set()
    feed_loaded = False
    deadline = time.monotonic() + CLOSE_LIMIT_S
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{serve_port}", timeout=30) as http:
        while time.monotonic() < deadline:
            status = await close_status(owner, close_id)
            if status["status"] == "closed":
                return status
            assert status["status"] != "blocked", status.get("status_reason")
            for gate in (g for g in status["gates"] if g["status"] == "open"):
                if gate["kind"] == "escalation" and gate["task"] == "bank_reconciliation" and not feed_loaded:
                    feed = topology.state / "books" / f"{ENTITY}-{PERIOD}" / "corrected" / "bank_lines.csv"
                    topology.run(
                        "worker", "close", "load-bank-feed", str(feed), "--close", close_id, "--by", "alice.chen"
                    )
                    feed_loaded = True
                excluded = {gate["prepared_by"], *gate["requested_by"]}
                voters = [p for p, roles in PEOPLE.items() if gate["approver_role"] in roles and p not in excluded]
                for person in voters[: gate["quorum"]]:
                    if (gate["gate_id"], person) not in decided:
                        await _decide(http, secret, gate, person)
                        decided.add((gate["gate_id"], person))
            await asyncio.sleep(0.5)
    raise AssertionError(f"close {close_id} not closed within {CLOSE_LIMIT_S}s: {json.dumps(status, default=str)}")


async def test_the_compose_topology_closes_a_close_over_scram_with_least_privilege(
    started: Any, tmp_path: Path
) -> None:
    topology, server, processes = started
    owner_password = topology.variables["POSTGRES_PASSWORD"]

    # No service process holds the owner's URL or password; each holds only its own role's credentials.
    for instance, process in processes.items():
        environment = _process_environment(process)
        assert "DATABASE_URL" not in environment, instance
        assert not any(owner_password in value for value in environment.values()), instance
        assert not any(name.endswith("_DB_PASSWORD") for name in environment), instance
    assert "COUNTERSIGN_CALLBACKS_DATABASE_URL" not in _process_environment(processes["worker.1"])
    assert not any("DATABASE_URL" in name for name in _process_environment(processes["specialists"]))

    # The operator imports people (as the owner, through `migrate`) and starts a close (through `worker`).
    topology.run("migrate", "principals", "import", str(_people_yaml(tmp_path / "people.yaml")))
    topology.run("worker", "close", "start", "--entity", ENTITY, "--period", PERIOD, "--synthetic")

    async with await psycopg.AsyncConnection.connect(server.url(), autocommit=True) as owner:
        status = await _drive_to_closed(topology, owner, topology.ports["serve"][8000])
        decisions = [d for g in status["gates"] for d in g["decisions"]]
        assert len(status["gates"]) >= 5 and decisions
        assert {d["principal"] for d in decisions} <= set(PEOPLE)
        assert (await verify_chain(owner)).ok
        # Every checkpoint, whichever worker signed it, verifies against the one key in the shared state volume.
        from countersign.audit.checkpoint import open_checkpoint

        key = parse_signer_key((topology.state / "keys" / "trace-signer.key").read_text().strip()).verifier()
        notes = await (await owner.execute("SELECT note FROM trace_checkpoint")).fetchall()
        assert notes
        for (note,) in notes:
            open_checkpoint(note.encode(), key)

    # An auditor's verification through `migrate` (the owner's URL; role URLs derived with the roles' passwords).
    verified = topology.run("migrate", "trace", "verify")
    assert "trace intact" in verified.stdout
    for instance, process in processes.items():
        assert process.poll() is None, f"{instance} stopped during the close"
