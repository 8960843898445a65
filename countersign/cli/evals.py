"""`countersign eval`: evals that grade the close's rules and the model guards. Needs no database, no network."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape

from countersign.cli.common import LazyNames
from countersign.cli.eval_certificates import certificates_command
from countersign.cli.progress import spinner

if TYPE_CHECKING:
    from countersign.evals.gates import EvalReport
    from countersign.evals.narratives import NarrativeEvalReport
    from countersign.evals.retrieval import (
        FUSED_RECALL_AT_5_TARGET,
        KINDS,
        PARAPHRASE_RECALL_AT_5_TARGET,
        QueryFileError,
        RandomRetriever,
        RetrievalReport,
        SweepRow,
        check,
        evaluate,
        load_queries,
        shuffled_labels,
        sweep,
        sweep_grid,
    )
    from countersign.retrieval import DEFAULT_TUNING, CorpusError, Retriever, load_corpus

# The retrieval eval's names, imported when it runs (the retriever and its models are heavy) and still answering as
# this module's attributes, where a test stands a control in for the real one.
_retrieval = LazyNames(
    globals(),
    {
        "countersign.evals.retrieval": (
            "FUSED_RECALL_AT_5_TARGET",
            "KINDS",
            "PARAPHRASE_RECALL_AT_5_TARGET",
            "QueryFileError",
            "RandomRetriever",
            "RetrievalReport",
            "SweepRow",
            "check",
            "evaluate",
            "load_queries",
            "shuffled_labels",
            "sweep",
            "sweep_grid",
        ),
        "countersign.retrieval": ("DEFAULT_TUNING", "CorpusError", "Retriever", "load_corpus"),
    },
)
__getattr__ = _retrieval.attribute

EVAL_HELP = "Evals that grade the close's rules against hand-written expectations."
eval_app = typer.Typer(help=EVAL_HELP, no_args_is_help=True)

console = Console(highlight=False, soft_wrap=True)  # one line per case, whatever the terminal width
err = Console(stderr=True, highlight=False, soft_wrap=True)
SHOWN_CONTROL_FAILURES = 3
eval_app.command("certificates")(certificates_command)


@eval_app.callback()
def eval_group() -> None:
    """Evals that grade the close's rules against hand-written expectations."""


@eval_app.command("gates")
def gates(
    cases: Annotated[
        Path | None, typer.Option("--cases", help="Case table (default: config/evals/gate_cases.yaml).")
    ] = None,
    control_tier: Annotated[
        str, typer.Option("--control-tier", help="Tier whose gate the negative control deletes.")
    ] = "medium",
) -> None:
    """Check derived gates against the case table; a policy with one tier's gate deleted must fail it."""
    from countersign.bootstrap.runtime import load_rules
    from countersign.bootstrap.settings import load_settings
    from countersign.evals.gates import load_cases, negative_control, run_gate_eval
    from countersign.policy import PolicyError, UnknownTierError
    from countersign.policy.errors import GateInputError

    settings = load_settings()
    cases_path = cases or settings.config_dir / "evals" / "gate_cases.yaml"
    try:
        with spinner("gate eval: loading the rules and the cases") as say:
            policy, checklist = load_rules(settings)
            table = load_cases(cases_path)
            say(f"gate eval: deriving the gates of {len(table)} cases")
            report = run_gate_eval(policy, checklist, table)
            say(f"gate eval: the negative control, tier {control_tier}'s gate deleted")
            control = negative_control(policy, checklist, table, tier=control_tier)
    except (PolicyError, GateInputError, UnknownTierError) as exc:
        err.print(f"[bold red]error:[/] {escape(str(exc))}")
        raise typer.Exit(2) from exc

    print_eval(report, cases_path)
    print_control(control, control_tier)
    if not report.passed:
        err.print("[bold red]the eval is wrong:[/] derived gates disagree with the case table")
        raise typer.Exit(1)
    if control.passed:
        err.print(
            f"[bold red]the negative control is wrong:[/] the cases still pass with tier "
            f"{escape(control_tier)}'s gate deleted, so they cannot detect a missing gate"
        )
        raise typer.Exit(1)


def print_eval(report: EvalReport, cases_path: Path) -> None:
    where = escape(str(cases_path))
    if report.passed:
        console.print(f"gate eval: [bold green]GREEN[/] {report.cases}/{report.cases} cases passed ({where})")
        return
    passed = report.cases - len(report.failures)
    console.print(f"gate eval: [bold red]RED[/] {passed}/{report.cases} cases passed ({where})")
    for failure in report.failures:
        console.print(f"  {escape(failure.describe())}")


def print_control(control: EvalReport, tier: str) -> None:
    label = f"negative control (tier {escape(tier)} gate deleted)"
    if control.passed:
        console.print(f"{label}: [bold red]GREEN[/] all {control.cases} cases passed; it should have failed")
        return
    console.print(
        f"{label}: [bold green]RED[/] as it should be, with {len(control.failures)} failures of {control.cases} cases"
    )
    for failure in control.failures[:SHOWN_CONTROL_FAILURES]:
        console.print(f"  {escape(failure.describe())}")
    hidden = len(control.failures) - SHOWN_CONTROL_FAILURES
    if hidden > 0:
        console.print(f"  ... and {hidden} more")


@eval_app.command("narratives")
def narratives(
    scenarios: Annotated[
        Path | None,
        typer.Option("--scenarios", help="Scenario table (default: config/evals/narratives/scenarios.yaml)."),
    ] = None,
    write_cassettes: Annotated[
        bool,
        typer.Option(
            "--write-cassettes",
            help="First rewrite every scenario's cassettes from its hand-written responses (after a prompt change).",
        ),
    ] = False,
) -> None:
    """Replay misbehaving model answers against the guards; the same run with the guards off must fail."""
    from countersign.bootstrap.settings import load_settings
    from countersign.evals.narratives import load_scenarios, run_narrative_eval, write_hand_cassettes
    from countersign.evals.narratives import negative_control as narrative_negative_control
    from countersign.policy import PolicyError

    settings = load_settings()
    table_path = scenarios or settings.config_dir / "evals" / "narratives" / "scenarios.yaml"
    prompts_dir = settings.config_dir / "prompts"
    try:
        with spinner("narrative eval: loading the scenarios") as say:
            table = load_scenarios(table_path)
            if write_cassettes:
                say("narrative eval: writing the hand-written cassettes")
                written = asyncio.run(write_hand_cassettes(table, prompts_dir))
                console.print(
                    f"wrote {sum(written.values())} hand-written cassettes for {len(written)} scenarios "
                    f"under {escape(str(table.cassettes_root))}"
                )
            say("narrative eval: replaying every scenario with the guards on")
            report = asyncio.run(run_narrative_eval(table, prompts_dir))
            say("narrative eval: the negative control, guards off")
            control = asyncio.run(narrative_negative_control(table, prompts_dir))
    except (PolicyError, OSError) as exc:
        err.print(f"[bold red]error:[/] {escape(str(exc))}")
        raise typer.Exit(2) from exc

    print_narrative_eval(report, table_path)
    print_narrative_control(control)
    if not report.passed:
        err.print(
            "[bold red]the eval is wrong:[/] a planted violation was not caught, something moved, "
            "or a run ended otherwise than the scenario table says"
        )
        raise typer.Exit(1)
    if control.passed:
        err.print(
            "[bold red]the negative control is wrong:[/] the scenarios still pass with the guards off, "
            "so they cannot detect a missing guard"
        )
        raise typer.Exit(1)


def print_narrative_eval(report: NarrativeEvalReport, table_path: Path) -> None:
    where = escape(str(table_path))
    total = len(report.results)
    passed = total - len(report.failures)
    verdict = "[bold green]GREEN[/]" if report.passed else "[bold red]RED[/]"
    console.print(f"narrative eval: {verdict} {passed}/{total} scenarios passed ({where})")
    print_guard_table(report)
    print_scenario_failures(report, limit=None)


def print_narrative_control(control: NarrativeEvalReport) -> None:
    label = "negative control (guards off)"
    total = len(control.results)
    if control.passed:
        console.print(f"{label}: [bold red]GREEN[/] all {total} scenarios passed; it should have failed")
        return
    console.print(
        f"{label}: [bold green]RED[/] as it should be, with {len(control.failures)} failures of {total} scenarios"
    )
    print_guard_table(control)
    print_scenario_failures(control, limit=SHOWN_CONTROL_FAILURES)


def print_guard_table(report: NarrativeEvalReport) -> None:
    console.print(f"  {'guard':<18} {'scenarios':>9} {'planted':>7} {'caught':>7} {'moved':>6}")
    for row in report.tallies():
        console.print(f"  {row.guard:<18} {row.scenarios:>9} {row.planted:>7} {row.caught:>7} {row.moved:>6}")


def print_scenario_failures(report: NarrativeEvalReport, limit: int | None) -> None:
    failures = report.failures
    for result in failures[:limit]:
        scenario = result.scenario
        console.print(f"  scenarios[{scenario.index}] {escape(scenario.name)}: {escape('; '.join(result.problems()))}")
    hidden = len(failures) - len(failures[:limit])
    if hidden > 0:
        console.print(f"  ... and {hidden} more")


@eval_app.command("retrieval")
def retrieval_eval(
    queries: Annotated[
        Path | None,
        typer.Option("--queries", help="Tuning queries (default: config/evals/retrieval_queries.yaml)."),
    ] = None,
    heldout: Annotated[
        Path | None,
        typer.Option("--heldout", help="Held-out queries (default: config/evals/retrieval_queries_heldout.yaml)."),
    ] = None,
    corpus: Annotated[
        Path | None, typer.Option("--corpus", help="Clause corpus (default: corpus.json in the clauses folder).")
    ] = None,
    control_seed: Annotated[int, typer.Option("--control-seed", help="Seed of the controls' shuffles.")] = 7,
    run_sweep: Annotated[
        bool, typer.Option("--sweep", help="Instead, sweep the fusion and expansion choices on the tuning queries.")
    ] = False,
) -> None:
    """Recall@5 and MRR@10 of BM25, dense and fused clause retrieval on the tuning and the held-out queries; the
    same runs with shuffled labels, and with a retriever answering at random, must fail."""
    from countersign.bootstrap.settings import load_settings

    _retrieval.bind()
    settings = load_settings()
    corpus_path = corpus or settings.clauses_dir / "corpus.json"
    query_sets = {
        "tuning": queries or settings.config_dir / "evals" / "retrieval_queries.yaml",
        "held-out": heldout or settings.config_dir / "evals" / "retrieval_queries_heldout.yaml",
    }
    try:
        with spinner("retrieval eval: loading the corpus and building the retriever"):
            clause_corpus = load_corpus(corpus_path)
            tables = {name: load_queries(path, clause_corpus) for name, path in query_sets.items()}
            retriever = Retriever.build(clause_corpus)
    except (CorpusError, QueryFileError, OSError) as exc:
        err.print(f"[bold red]error:[/] {escape(str(exc))}")
        raise typer.Exit(2) from exc
    if run_sweep:
        with spinner("retrieval eval: sweeping the tunings"):
            rows = sweep(retriever, tables["tuning"], sweep_grid())
        print_sweep(rows, query_sets["tuning"])
        return

    wrong: list[str] = []
    for name, table in tables.items():
        with spinner(f"retrieval eval: {len(table)} {name} queries"):
            report = evaluate(retriever, table)
        failures = check(report)
        verdict = "[bold red]FAIL[/]" if failures else "[bold green]PASS[/]"
        console.print(
            f"retrieval eval, {name} queries: {verdict} {len(table)} queries, corpus {report.corpus_version[:12]} "
            f"({escape(str(corpus_path))}, {escape(str(query_sets[name]))})"
        )
        print_retrieval_table(report)
        for failure in failures:
            console.print(f"  {escape(failure)}")
        if failures:
            wrong.append(f"the {name} queries miss the targets")
        with spinner(f"retrieval eval: the negative controls on the {name} queries"):
            controls = {
                f"labels shuffled within each form, seed {control_seed}": evaluate(
                    retriever, shuffled_labels(table, control_seed)
                ),
                f"random clauses of the form, seed {control_seed}": evaluate(
                    RandomRetriever(clause_corpus, control_seed), table
                ),
            }
        for label, control in controls.items():
            control_failures = check(control)
            if control_failures:
                console.print(
                    f"negative control ({name}, {label}): [bold green]FAIL[/] as it should: "
                    f"{escape('; '.join(control_failures))}"
                )
            else:
                console.print(
                    f"negative control ({name}, {label}): [bold red]PASS[/] it met every target; it should have failed"
                )
                wrong.append(f"the {name} control ({label}) passes")
            print_retrieval_table(control)
    if wrong:
        err.print(
            f"[bold red]the eval is wrong:[/] {escape('; '.join(wrong))} (targets: fused recall@5 at least each "
            f"arm's and {FUSED_RECALL_AT_5_TARGET:.2f}, paraphrases {PARAPHRASE_RECALL_AT_5_TARGET:.2f}; every "
            "control must fail them)"
        )
        raise typer.Exit(1)


def print_sweep(rows: Sequence[SweepRow], queries_path: Path) -> None:
    chosen = next((row for row in rows if row.tuning == DEFAULT_TUNING), None)
    console.print(f"retrieval sweep over {len(rows)} tunings, fused arm, on {escape(str(queries_path))}; best first")
    console.print(
        f"  {'expansion':<13} {'dense':>5} {'rrf k':>5} {'w lex':>5} {'w den':>5} {'keep 1st':>8} "
        f"{'recall@5':>8} {'para r@5':>8} {'MRR@10':>7}"
    )
    for row in rows:
        tuning = row.tuning
        mark = "  <- default" if row is chosen else ""
        console.print(
            f"  {tuning.expansion.value:<13} {'yes' if tuning.expand_dense else 'no':>5} {tuning.rrf_k:>5} "
            f"{tuning.lexical_weight:>5.2f} {tuning.dense_weight:>5.2f} {'yes' if tuning.keep_first else 'no':>8} "
            f"{row.fused.recall_at_5:>8.3f} {row.paraphrase.recall_at_5:>8.3f} {row.fused.mrr_at_10:>7.3f}{mark}"
        )


def print_retrieval_table(report: RetrievalReport) -> None:
    kinds = "".join(f" {kind + ' r@5':>16} {'MRR@10':>7}" for kind in KINDS)
    console.print(f"  {'arm':<7} {'recall@5':>8} {'MRR@10':>7}{kinds}")
    rows = [(arm.arm, arm.overall, [arm.by_kind[kind] for kind in KINDS]) for arm in report.arms]
    for name, overall, by_kind in [*rows, ("chance", report.chance, [])]:
        split = "".join(f" {scores.recall_at_5:>16.3f} {scores.mrr_at_10:>7.3f}" for scores in by_kind)
        console.print(f"  {name:<7} {overall.recall_at_5:>8.3f} {overall.mrr_at_10:>7.3f}{split}")
    counts = ", ".join(f"{report.arm('fused').by_kind[kind].queries} {kind}" for kind in KINDS)
    console.print(f"  ({counts} queries; chance: a random ranking within each query's form)")
