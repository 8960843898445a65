"""`countersign demo`: a workflow end to end on synthetic data."""

from __future__ import annotations

from typing import Annotated

import typer

from countersign.cli.common import console, err, fail, run, runtime


def demo(
    seed: Annotated[int, typer.Option(help="Seed for the synthetic books.")] = 42,
    workflow: Annotated[
        str, typer.Option(help="close: a month-end close; certificates: a month of payment certificates.")
    ] = "close",
) -> None:
    """Run a workflow end to end on synthetic data: human gates over the signed callback, trace verified, timeline."""
    if workflow not in ("close", "certificates"):
        fail(f"--workflow must be close or certificates, got {workflow!r}")
    rt = runtime()
    if workflow == "certificates":
        from countersign.scenarios.demo_certificates import DemoRefused, run_certificates_demo

        try:
            ok = run(lambda: run_certificates_demo(rt, seed=seed, console=console))
        except DemoRefused as exc:
            fail(str(exc), code=1)
        raise typer.Exit(0 if ok else 1)
    from countersign.scenarios.demo import run_demo

    ok = run(lambda: run_demo(rt, seed=seed, console=console, progress_console=err))
    raise typer.Exit(0 if ok else 1)
