"""`countersign demo --seed N` closes for a seed whose books have no recorded model responses (ADR 0036).

Seed 7's variance request has no cassette: its narrative escalates `no_recorded_response` once; the approver accepts
the deterministic text, which comes back flagged to its approval gate, and the close closes.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console

from countersign.scenarios.demo import run_demo


async def test_the_demo_closes_for_seed_7_with_the_deterministic_narrative_flagged(runtime: Any, conn: Any) -> None:
    console = Console(record=True, width=200, force_terminal=False)
    ok = await run_demo(runtime, seed=7, console=console)
    out = console.export_text()

    assert ok, out
    assert "close status: closed" in out
    # One escalation for the missing recording, approved once: the re-run does not ask the model again.
    assert out.count("variance_analysis: HALTED") == 1, out
    assert "variance_analysis: escalation approved, re-running as attempt 2 without the model" in out
    assert "variance_analysis narrative (fallback; no_recorded_response_fallback)" in out
    assert "approves variance_analysis (approval, tier high)" in out
