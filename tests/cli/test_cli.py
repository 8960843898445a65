"""The command line in fresh processes: no state survives between commands but the database."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from countersign.bootstrap.settings import PROJECT_ROOT
from countersign.callbacks.decision_writer import DecisionRequest, record_decision
from countersign.callbacks.person_signature import ed25519_proof
from tests.support import import_default_principals, person_signature


def cli(database: Any, tmp_path: Path, *args: str, config_dir: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "DATABASE_URL": database.url,
        "COUNTERSIGN_STATE_DIR": str(tmp_path / "state"),
        "COUNTERSIGN_CONFIG_DIR": str(config_dir or PROJECT_ROOT / "config"),
        "COLUMNS": "200",
    }
    return subprocess.run(
        [sys.executable, "-m", "countersign.cli.main", *args], env=env, capture_output=True, text=True, timeout=300
    )


def status_json(database: Any, tmp_path: Path) -> dict[str, Any]:
    done = cli(database, tmp_path, "close", "status", "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


async def test_advance_from_two_fresh_processes_in_turn(database: Any, conn: Any, tmp_path: Path) -> None:
    started = cli(database, tmp_path, "close", "start", "--entity", "NEWCO", "--period", "2026-10", "--synthetic")
    assert started.returncode == 0, started.stderr
    first = cli(database, tmp_path, "close", "advance")
    assert first.returncode == 0, first.stderr
    assert "17 of 17 bank lines unmatched" in first.stdout

    status = status_json(database, tmp_path)
    assert {"close_id", "entity", "period", "status", "tasks", "gates"} <= status.keys()
    assert status["entity"] == "NEWCO" and status["status"] == "halted"
    assert all({"task", "status"} <= t.keys() for t in status["tasks"])
    assert all({"gate_id", "task", "tier", "status", "decisions"} <= g.keys() for g in status["gates"])

    await import_default_principals(conn)
    accruals = next(g for g in status["gates"] if g["task"] == "accruals")
    stamp = int(time.time())
    signature = person_signature(accruals["gate_id"], "alice.chen", "approve", "ok", "n1", stamp)
    proof = ed25519_proof(signature, stamp)
    request = DecisionRequest(accruals["gate_id"], "alice.chen", "approve", "ok", "n1", "signed_callback", proof)
    await record_decision(conn, request)

    second = cli(database, tmp_path, "close", "advance")
    assert second.returncode == 0, second.stderr
    assert "accruals: journal" in second.stdout
    after = status_json(database, tmp_path)
    assert next(t for t in after["tasks"] if t["task"] == "accruals")["status"] == "done"
    # Nothing was dispatched twice across the two processes.
    rows = await (await conn.execute("SELECT task, attempt, count(*) FROM dispatch GROUP BY 1, 2")).fetchall()
    assert rows and all(r[2] == 1 for r in rows)


def test_a_checklist_that_disagrees_with_policy_stops_the_cli(database: Any, tmp_path: Path) -> None:
    config = tmp_path / "config"
    shutil.copytree(PROJECT_ROOT / "config", config)
    checklist = config / "workflows" / "close.yaml"
    text = checklist.read_text()
    marker = "  - id: intercompany"
    head, tail = text.split(marker, 1)
    checklist.write_text(head + marker + tail.replace("requires_gate: true", "requires_gate: false", 1))
    done = cli(database, tmp_path, "close", "status", config_dir=config)
    assert done.returncode == 2
    assert "intercompany" in done.stderr and "false" in done.stderr and "medium" in done.stderr


def test_status_without_any_close_is_a_clear_error(database: Any, tmp_path: Path) -> None:
    done = cli(database, tmp_path, "close", "status")
    assert done.returncode == 2
    assert "no close has been started" in done.stderr


def test_trace_verify_exits_1_naming_the_divergent_event(database: Any, tmp_path: Path) -> None:
    assert (
        cli(database, tmp_path, "close", "start", "--entity", "NEWCO", "--period", "2026-10", "--synthetic").returncode
        == 0
    )
    ok = cli(database, tmp_path, "trace", "verify")
    assert ok.returncode == 0 and "trace intact" in ok.stdout
    with psycopg.connect(database.url, autocommit=True) as admin:
        admin.execute("ALTER TABLE trace_event DISABLE TRIGGER trace_event_append_only")
        admin.execute("UPDATE trace_event SET actor = 'someone-else' WHERE seq = 2")
    broken = cli(database, tmp_path, "trace", "verify")
    assert broken.returncode == 1
    assert "seq 2" in broken.stderr


@pytest.mark.parametrize("seeds", [(7, 7), (7, 8)])
def test_synth_is_byte_identical_for_a_seed_and_differs_across_seeds(
    database: Any, tmp_path: Path, seeds: tuple[int, int]
) -> None:
    outs = []
    for index, seed in enumerate(seeds):
        out = tmp_path / f"books{index}"
        done = cli(database, tmp_path, "synth", "--profile", "default", "--seed", str(seed), "--out", str(out))
        assert done.returncode == 0, done.stderr
        outs.append({p.relative_to(out): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()})
    assert outs[0].keys() == outs[1].keys()
    assert (outs[0] == outs[1]) == (seeds[0] == seeds[1])


def test_synth_clauses_writes_the_committed_corpus_byte_for_byte(database: Any, tmp_path: Path) -> None:
    done = cli(database, tmp_path, "synth", "--profile", "clauses", "--seed", "7", "--out", str(tmp_path / "c"))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "c" / "corpus.json").read_bytes() == (PROJECT_ROOT / "config/clauses/corpus.json").read_bytes()
    other = cli(database, tmp_path, "synth", "--profile", "clauses", "--seed", "8", "--out", str(tmp_path / "d"))
    assert other.returncode == 0, other.stderr
    assert (tmp_path / "d" / "corpus.json").read_bytes() != (tmp_path / "c" / "corpus.json").read_bytes()


def test_synth_construction_is_byte_identical_and_cites_the_committed_corpus(database: Any, tmp_path: Path) -> None:
    outs = []
    for name in ("a", "b"):
        args = ("synth", "--profile", "construction", "--seed", "11", "--out", str(tmp_path / name))
        done = cli(database, tmp_path, *args)
        assert done.returncode == 0, done.stderr
        outs.append({p.name: p.read_bytes() for p in sorted((tmp_path / name).iterdir())})
    assert outs[0] == outs[1]
    assert set(outs[0]) == {"contracts.json", "certificates.jsonl", "ground_truth.json"}
    corpus = json.loads((PROJECT_ROOT / "config/clauses/corpus.json").read_bytes())
    ids = {clause["id"] for clause in corpus["clauses"]}
    contract = json.loads(outs[0]["contracts.json"])["contracts"][0]
    assert contract["clause_refs"] and set(contract["clause_refs"].values()) <= ids
    assert {clause_id.split("-")[0] for clause_id in contract["clause_refs"].values()} == {contract["form"]}


def test_synth_refuses_a_profile_of_unknown_kind_naming_the_key(database: Any, tmp_path: Path) -> None:
    config = tmp_path / "config"
    shutil.copytree(PROJECT_ROOT / "config", config)
    (config / "profiles" / "odd.yaml").write_text("kind: payroll\n", encoding="utf-8")
    done = cli(database, tmp_path, "synth", "--profile", "odd", "--out", str(tmp_path / "o"), config_dir=config)
    assert done.returncode == 2
    assert "kind" in done.stderr and "payroll" in done.stderr
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(("entity", "period"), [("../escape", "2026-10"), ("/abs", "2026-10"), ("OK", "2026-13")])
def test_close_start_refuses_entities_and_periods_that_could_escape_or_lie(
    database: Any, tmp_path: Path, entity: str, period: str
) -> None:
    done = cli(database, tmp_path, "close", "start", "--entity", entity, "--period", period, "--synthetic")
    assert done.returncode == 2
    assert "is not valid" in done.stderr
    assert not list(tmp_path.rglob("*escape*"))
    with psycopg.connect(database.url) as conn:
        assert conn.execute("SELECT count(*) FROM book_set").fetchone() == (0,)
