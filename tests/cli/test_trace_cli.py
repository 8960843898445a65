"""The trace commands in fresh processes: verify, bundles verified offline, proofs, the timeline, version sets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import psycopg

from countersign.audit.merkle import verify_consistency, verify_inclusion
from countersign.bootstrap.settings import PROJECT_ROOT
from countersign.llm import cassette_set_hash
from countersign.retrieval import load_corpus
from tests.cli.test_cli import cli


def _start_and_advance(database: Any, tmp_path: Path) -> str:
    assert (
        cli(database, tmp_path, "close", "start", "--entity", "NEWCO", "--period", "2026-10", "--synthetic").returncode
        == 0
    )
    assert cli(database, tmp_path, "close", "advance").returncode == 0
    status = json.loads(cli(database, tmp_path, "close", "status", "--json").stdout)
    return str(status["close_id"])


def test_verify_reports_tree_size_and_root_and_catches_a_dropped_tail(database: Any, tmp_path: Path) -> None:
    close_id = _start_and_advance(database, tmp_path)
    bundle = tmp_path / "evidence.zip"
    exported = cli(
        database, tmp_path, "trace", "export", "--close", close_id, "--format", "bundle", "--out", str(bundle)
    )
    assert exported.returncode == 0, exported.stderr  # exporting a bundle signs a checkpoint
    ok = cli(database, tmp_path, "trace", "verify")
    assert ok.returncode == 0 and "tree size" in ok.stdout and "consistent with the checkpoint" in ok.stdout
    with psycopg.connect(database.url, autocommit=True) as admin:
        admin.execute("ALTER TABLE trace_event DISABLE TRIGGER trace_event_append_only")
        last = admin.execute("SELECT max(seq) FROM trace_event").fetchone()[0]  # type: ignore[index]
        admin.execute("DELETE FROM trace_event WHERE seq > %s", (last - 3,))
        admin.execute(
            "UPDATE trace_head SET seq = %s, hash = (SELECT hash FROM trace_event WHERE seq = %s)", (last - 3, last - 3)
        )
    broken = cli(database, tmp_path, "trace", "verify")
    assert broken.returncode == 1
    assert "checkpoint" in broken.stderr and "fewer than" in broken.stderr


def test_a_bundle_verifies_offline_without_any_database(database: Any, tmp_path: Path) -> None:
    close_id = _start_and_advance(database, tmp_path)
    bundle = tmp_path / "evidence.zip"
    assert (
        cli(
            database, tmp_path, "trace", "export", "--close", close_id, "--format", "bundle", "--out", str(bundle)
        ).returncode
        == 0
    )

    class NoDatabase:
        url = "postgresql://nobody@127.0.0.1:1/none"

    good = cli(NoDatabase(), tmp_path, "trace", "verify", "--bundle", str(bundle))
    assert good.returncode == 0, good.stderr
    assert "bundle verified" in good.stdout
    data = bytearray(bundle.read_bytes())
    data[len(data) // 2] ^= 0x01
    bundle.write_bytes(bytes(data))
    bad = cli(NoDatabase(), tmp_path, "trace", "verify", "--bundle", str(bundle))
    assert bad.returncode == 1
    assert "bundle invalid" in bad.stderr


def test_proofs_printed_by_the_cli_verify(database: Any, tmp_path: Path) -> None:
    _start_and_advance(database, tmp_path)
    proof = json.loads(cli(database, tmp_path, "trace", "prove", "--seq", "3").stdout)
    verify_inclusion(
        bytes.fromhex(proof["leaf_hash"]),
        proof["leaf_index"],
        proof["tree_size"],
        [bytes.fromhex(h) for h in proof["proof"]],
        bytes.fromhex(proof["root"]),
    )
    consistency = json.loads(cli(database, tmp_path, "trace", "consistency", "--from", "4", "--to", "11").stdout)
    verify_consistency(
        4,
        11,
        bytes.fromhex(consistency["from_root"]),
        bytes.fromhex(consistency["to_root"]),
        [bytes.fromhex(h) for h in consistency["proof"]],
    )
    too_far = cli(database, tmp_path, "trace", "prove", "--seq", "100000")
    assert too_far.returncode == 2 and "--seq" in too_far.stderr


def test_show_prints_who_handed_what_to_whom(database: Any, tmp_path: Path) -> None:
    close_id = _start_and_advance(database, tmp_path)
    shown = cli(database, tmp_path, "trace", "show", "--close", close_id)
    assert shown.returncode == 0
    assert "orchestrator → reconciliation-agent" in shown.stdout
    assert "17 of 17" in shown.stdout


def test_every_event_of_a_close_carries_its_version_set(database: Any, tmp_path: Path) -> None:
    close_id = _start_and_advance(database, tmp_path)
    with psycopg.connect(database.url) as conn:
        rows = conn.execute("SELECT version_set FROM trace_event WHERE close_id = %s", (close_id,)).fetchall()
    assert len(rows) > 10
    for (version_set,) in rows:
        assert {
            "app_version",
            "risk_yaml_sha256",
            "checklist_sha256",
            "synthetic_profile",
            "synthetic_seed",
            "model_provider",
            "model_id",
            "prompt_templates_sha256",
            "cassettes_sha256",
            "clause_corpus_version",
        } <= set(version_set)
        assert version_set["synthetic_profile"] == "default"
        assert version_set["model_provider"] == "replay" and version_set["model_id"] == "countersign-narrator-v1"
        assert version_set["cassettes_sha256"] == cassette_set_hash(PROJECT_ROOT / "config" / "cassettes")
        assert version_set["clause_corpus_version"] == load_corpus(PROJECT_ROOT / "config/clauses/corpus.json").version
