"""The trace signing key file: created once, whole, and shared by every process that starts on a fresh state dir."""

from __future__ import annotations

import multiprocessing
import stat
from pathlib import Path

import pytest

from countersign.audit.checkpoint import NoteSigner, encode_signer_key, generate_signer
from countersign.bootstrap import keys
from countersign.bootstrap.settings import Settings


def _settings(state_dir: Path) -> Settings:
    return Settings(database_url=None, state_dir=state_dir, config_dir=state_dir / "config", callback_secret=None)


def test_first_use_creates_a_private_key_file_and_later_uses_read_it(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    first = keys.load_trace_signer(settings)
    again = keys.load_trace_signer(settings)
    path = keys.key_file(settings)
    assert encode_signer_key(first) == encode_signer_key(again)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert sorted(p.name for p in path.parent.iterdir()) == ["trace-signer.key"]


def test_a_process_that_loses_the_creation_race_uses_the_winners_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = _settings(tmp_path)
    winner = generate_signer(settings.trace_origin)
    real_generate = generate_signer

    def generate_while_another_process_writes_first(origin: str) -> NoteSigner:
        path = keys.key_file(settings)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(encode_signer_key(winner) + "\n", encoding="utf-8")
        return real_generate(origin)

    monkeypatch.setattr(keys, "generate_signer", generate_while_another_process_writes_first)
    loaded = keys.load_trace_signer(settings)
    assert encode_signer_key(loaded) == encode_signer_key(winner)
    assert sorted(p.name for p in keys.key_file(settings).parent.iterdir()) == ["trace-signer.key"]


def _load_after_barrier(
    state_dir: str,
    barrier: multiprocessing.synchronize.Barrier,
    out: multiprocessing.Queue,  # type: ignore[type-arg]
) -> None:
    barrier.wait()
    try:
        out.put(("ok", encode_signer_key(keys.load_trace_signer(_settings(Path(state_dir))))))
    except Exception as error:  # reported to the parent, which fails the test with it
        out.put(("error", repr(error)))


def test_processes_starting_together_all_sign_with_one_key(tmp_path: Path) -> None:
    context = multiprocessing.get_context("fork")
    count = 12
    barrier = context.Barrier(count)
    out: multiprocessing.Queue = context.Queue()  # type: ignore[type-arg]
    workers = [context.Process(target=_load_after_barrier, args=(str(tmp_path), barrier, out)) for _ in range(count)]
    for worker in workers:
        worker.start()
    results = [out.get(timeout=60) for _ in workers]
    for worker in workers:
        worker.join(timeout=60)
    assert [r for r in results if r[0] == "error"] == []
    assert len({key for _, key in results}) == 1
    assert (keys.key_file(_settings(tmp_path)).read_text(encoding="utf-8").strip(), "ok") in {
        (key, status) for status, key in results
    }
