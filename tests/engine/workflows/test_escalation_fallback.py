"""An approved escalation moves the work forward (ADR 0036).

With no recorded model response, the variance narrative escalates `no_recorded_response`. A person approving that
escalation accepts the deterministic narrative: the next attempt does not ask the model, ships the template text
flagged `no_recorded_response_fallback`, and goes to its approval gate like any result; the close closes. Without
the rule (negative control) the same approval re-runs into the same missing recording: a second identical escalation.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from countersign.audit.trace import iter_events
from countersign.bootstrap.runtime import engine_context
from countersign.bootstrap.settings import PROJECT_ROOT, Settings
from countersign.cards.evidence import MODEL_NOT_ASKED_NOTE, NARRATIVE_FALLBACK_NOTE, narrative_note
from countersign.engine import task_runner
from countersign.engine.books import load_bank_feed
from countersign.engine.dispatch import dispatch_key, input_digest
from countersign.engine.orchestrator import advance
from countersign.engine.runs import close_status, load_close, task_rows
from countersign.engine.workflows.close import inputs
from countersign.llm import ModelRequest, ModelResponse
from countersign.specialists import variance
from countersign.specialists.errors import SpecialistInputError
from countersign.specialists.narration import MODEL_OFF_FIELD, Narrator
from tests.engine.workflow_support import approve_open_gates
from tests.support import start_default_close

VARIANCE = "variance_analysis"


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """The shipped config, but an empty cassette folder: every model request misses its recording."""
    empty = tmp_path / "no-cassettes"
    empty.mkdir()
    return Settings(
        database_url=None,
        state_dir=tmp_path / "state",
        config_dir=PROJECT_ROOT / "config",
        callback_secret="test-callback-secret",
        cassette_dir=empty,
    )


@pytest_asyncio.fixture
async def replay_ctx(runtime: Any) -> AsyncIterator[Any]:
    async with engine_context(runtime) as ctx:
        yield ctx


async def _drive(conn: Any, api: Any, ctx: Any, close_id: str, books: Path, rounds: int) -> dict[str, Any]:
    """Advance and approve every open gate (the bank halt after loading the corrected feed), `rounds` times or
    until the close is closed."""
    await advance(conn, close_id, ctx)
    book_set = (await load_close(conn, close_id)).book_set_id
    await load_bank_feed(
        conn, book_set, books / "corrected" / "bank_lines.csv", loaded_by="alice.chen", close_id=close_id
    )
    for _ in range(rounds):
        status = await close_status(conn, close_id)
        if status["status"] == "closed":
            break
        await approve_open_gates(api, conn, close_id)
        await advance(conn, close_id, ctx)
    return await close_status(conn, close_id)


def _gates_of(status: dict[str, Any], task: str) -> list[tuple[int, str, str]]:
    return [(g["attempt"], g["kind"], g["status"]) for g in status["gates"] if g["task"] == task]


async def test_an_approved_no_recorded_response_escalation_ships_the_deterministic_narrative_flagged(
    conn: Any, runtime: Any, replay_ctx: Any, api: Any, default_books: Path
) -> None:
    close_id = await start_default_close(conn, runtime, default_books)
    status = await _drive(conn, api, replay_ctx, close_id, default_books, rounds=10)

    assert status["status"] == "closed", status
    # One escalation, approved; the next attempt went to its approval gate, approved by a person; no second escalation.
    assert _gates_of(status, VARIANCE) == [(1, "escalation", "approved"), (2, "approval", "approved")]
    row = (await task_rows(conn, close_id))[VARIANCE]
    assert (row.status, row.attempt, row.escalation) == ("done", 2, "no_recorded_response")
    result = row.result or {}
    assert result["narrative_source"] == "fallback"
    assert result["narrative_flags"] == ["no_recorded_response_fallback"]
    assert "halted" not in result and result["model_steps"] == []
    # The text accepted is the engine's own, from its computed figures, every figure grounded.
    close = await load_close(conn, close_id)
    payload = await inputs.variance_input(conn, close.book_set_id, close.entity, close.period, runtime.policy)
    analysis = variance.analyse(payload)
    assert result["narrative"] == variance.draft_narrative(analysis.flagged_lines)
    assert result["figures"] and all(f["raw"] for f in result["figures"])

    events = [e async for e in iter_events(conn, close_id=close_id)]
    mine = [e for e in events if e.payload.get("task") == VARIANCE]
    requeued = [e.payload for e in mine if e.kind == "task_requeued"]
    started = [e.payload for e in mine if e.kind == "task_started"]
    assert [p.get(MODEL_OFF_FIELD) for p in requeued] == ["no_recorded_response"]
    assert [(p["attempt"], p.get(MODEL_OFF_FIELD)) for p in started] == [(1, None), (2, "no_recorded_response")]
    # Attempt 1 asked the model and missed; attempt 2 did not ask it.
    async with conn.cursor() as cur:
        await cur.execute(
            "SELECT attempt, result->>'escalation', result->'narrative_flags' FROM dispatch"
            " WHERE close_id = %s AND task = %s ORDER BY attempt",
            (close_id, VARIANCE),
        )
        dispatched = await cur.fetchall()
    assert dispatched == [
        (1, "no_recorded_response", ["no_recorded_response_escalation"]),
        (2, None, ["no_recorded_response_fallback"]),
    ]

    # The idempotency key is derived as always: close, task, attempt and the digest of what was sent.
    sent = {**payload, MODEL_OFF_FIELD: "no_recorded_response"}
    async with conn.cursor() as cur:
        await cur.execute(
            "SELECT idempotency_key FROM dispatch WHERE close_id = %s AND task = %s AND attempt = 2",
            (close_id, VARIANCE),
        )
        keys = [r[0] for r in await cur.fetchall()]
    assert keys == [dispatch_key(close_id, VARIANCE, 2, input_digest(sent))]

    # The card says the narrative is not the model's, and why.
    approval = next(g for g in status["gates"] if g["task"] == VARIANCE and g["kind"] == "approval")
    async with conn.cursor() as cur:
        await cur.execute("SELECT summary FROM gate WHERE gate_id = %s", (approval["gate_id"],))
        found = await cur.fetchone()
    assert found is not None
    note = narrative_note(found[0])
    assert note is not None and note.startswith(MODEL_NOT_ASKED_NOTE) and "no_recorded_response_fallback" in note


async def test_negative_control_without_the_rule_the_approval_reruns_into_the_same_miss(
    conn: Any, runtime: Any, replay_ctx: Any, api: Any, default_books: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(task_runner, "model_off_reason", lambda tc: None)
    close_id = await start_default_close(conn, runtime, default_books)
    status = await _drive(conn, api, replay_ctx, close_id, default_books, rounds=4)

    assert status["status"] == "halted"
    escalations = [g for g in _gates_of(status, VARIANCE) if g[1] == "escalation"]
    assert len(escalations) >= 2, status["gates"]
    assert (await task_rows(conn, close_id))[VARIANCE].escalation == "no_recorded_response"


class _Unreachable:
    name = "unreachable"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        raise AssertionError("the model was asked although the engine said model_off")


def _variance_payload() -> dict[str, Any]:
    line = {
        "account": "6000",
        "name": "Marketing",
        "actual": "1500.00",
        "prior": "1000.00",
        "budget": "1000.00",
        "variance_prior": "500.00",
        "variance_budget": "500.00",
        "variance_budget_pct": "50.0",
    }
    return {
        "period": "2026-10",
        "threshold_amount": "100",
        "threshold_pct": "10",
        "grounding_tolerance": "0.01",
        "lines": [line],
    }


async def test_the_variance_specialist_honours_model_off_and_refuses_an_unknown_reason() -> None:
    narrator = Narrator(provider=_Unreachable(), model="m", prompts_dir=PROJECT_ROOT / "config" / "prompts")
    result = await variance.handle_with_model({**_variance_payload(), MODEL_OFF_FIELD: "budget_exhausted"}, narrator)
    assert result["narrative"] == variance.handle(_variance_payload())["narrative"]
    assert (result["narrative_source"], result["narrative_flags"]) == ("fallback", ["budget_exhausted_fallback"])
    with pytest.raises(SpecialistInputError, match="model_off"):
        await variance.handle_with_model({**_variance_payload(), MODEL_OFF_FIELD: "ungrounded_narrative"}, narrator)


def test_the_card_note_tells_a_model_not_asked_from_a_model_refused() -> None:
    not_asked = narrative_note({"narrative_source": "fallback", "narrative_flags": ["no_recorded_response_fallback"]})
    refused = narrative_note({"narrative_source": "fallback", "narrative_flags": ["ungrounded_fallback"]})
    assert not_asked == f"{MODEL_NOT_ASKED_NOTE} (no_recorded_response_fallback)"
    assert refused == f"{NARRATIVE_FALLBACK_NOTE} (ungrounded_fallback)"
    assert narrative_note({"narrative_source": "model", "narrative_flags": []}) is None
