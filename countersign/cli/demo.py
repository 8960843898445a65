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
    serve: Annotated[
        bool,
        typer.Option(
            "--serve",
            help="Then leave a server running with an open close to visit on the Close Board (Ctrl-C stops).",
        ),
    ] = False,
    port: Annotated[int, typer.Option(help="With --serve: the port (the board is http://localhost:PORT).")] = 8000,
) -> None:
    """Run a workflow end to end on synthetic data: human gates over the signed callback, trace verified, timeline.
    With --serve, a second close is then left open on a running server, with one-time passkey enrolment links."""
    if workflow not in ("close", "certificates"):
        fail(f"--workflow must be close or certificates, got {workflow!r}")
    if serve and workflow != "close":
        fail("--serve leaves a month-end close open to visit: use it with --workflow close")
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
    if serve and ok:
        from countersign.scenarios.demo_visit import serve_visit

        try:
            run(lambda: serve_visit(rt, seed=seed, host="127.0.0.1", port=port, console=console))
        except OSError as exc:  # the port is taken, or not ours to bind
            fail(f"--port {port}: {exc.strerror or exc}")
    raise typer.Exit(0 if ok else 1)
