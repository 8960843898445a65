"""Starting work from any door (CLI, Slack, the demos): a month-end close, or a month's payment runs.

Each use case takes a connection and the rules it starts under (`StartRules`: the policy, the workflow, the versions
every trace event carries); the composition root builds those from its settings, so no service knows the Runtime.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from psycopg import AsyncConnection

from countersign.engine.construction import latest_set_for_period
from countersign.engine.runs import CloseAlreadyExists, start_close
from countersign.engine.workflows.certificates.runs import UnknownConstructionSet, start_payment_runs
from countersign.policy import Policy, Workflow
from countersign.services.errors import NoCertificatesForPeriod, NoSuchConstructionSet, PaymentRunsAlreadyStarted
from countersign.services.loading import SynthesizeBooks, books_for_close


def _no_synthesis(entity: str, period: str) -> Path:
    raise AssertionError(f"asked to synthesize books for {entity} {period} without a synthesizer")


@dataclass(frozen=True)
class StartRules:
    """What a new close is started under: `versions` goes into every trace event of the close."""

    policy: Policy
    workflow: Workflow
    versions: Mapping[str, Any]
    synthesize: SynthesizeBooks = field(default=_no_synthesis)  # books for an entity nobody loaded books for


async def start_close_on_book_set(
    conn: AsyncConnection[Any], rules: StartRules, *, entity: str, period: str, book_set_id: int, started_by: str
) -> str:
    """Open the close of `entity` `period` on a book set already loaded, with its tasks; returns the close id."""
    return await start_close(
        conn,
        entity=entity,
        period=period,
        book_set_id=book_set_id,
        policy=rules.policy,
        workflow=rules.workflow,
        started_by=started_by,
        versions=dict(rules.versions),
    )


async def start_close_on_books(
    conn: AsyncConnection[Any],
    rules: StartRules,
    *,
    entity: str,
    period: str,
    books_dir: Path | None,
    started_by: str,
    synthetic: bool = False,
    loaded_by: str = "countersign-cli",
) -> str:
    """`close start` from any door: books given, loaded before, or (`synthetic`) generated; then the close and its
    tasks. No books and not `synthetic` raises NoBooksLoaded."""
    book_set_id = await books_for_close(
        conn,
        entity=entity,
        period=period,
        books_dir=books_dir,
        synthetic=synthetic,
        synthesize=rules.synthesize,
        loaded_by=loaded_by,
    )
    return await start_close_on_book_set(
        conn, rules, entity=entity, period=period, book_set_id=book_set_id, started_by=started_by
    )


async def start_month_of_payment_runs(
    conn: AsyncConnection[Any], rules: StartRules, *, set_id: int, period: str, started_by: str
) -> list[str]:
    """One payment run per certificate of construction set `set_id` submitted in `period`; returns their close ids."""
    return await start_payment_runs(
        conn,
        set_id=set_id,
        period=period,
        policy=rules.policy,
        workflow=rules.workflow,
        started_by=started_by,
        versions=dict(rules.versions),
    )


@dataclass(frozen=True)
class StartedPaymentRuns:
    set_id: int
    period: str
    close_ids: tuple[str, ...]


async def start_payment_runs_for_month(
    conn: AsyncConnection[Any], rules: StartRules, *, period: str, set_id: int | None, started_by: str
) -> StartedPaymentRuns:
    """`payments start` from any door: the month's runs on construction set `set_id`, or on the latest set loaded
    with a certificate in `period`. A month with no certificate raises NoCertificatesForPeriod; a month already
    started raises PaymentRunsAlreadyStarted."""
    chosen = set_id if set_id is not None else await latest_set_for_period(conn, period)
    if chosen is None:
        raise NoCertificatesForPeriod(period)
    try:
        close_ids = await start_month_of_payment_runs(conn, rules, set_id=chosen, period=period, started_by=started_by)
    except CloseAlreadyExists as exc:
        raise PaymentRunsAlreadyStarted(period, exc.entity, exc.close_id) from None
    except UnknownConstructionSet:
        raise NoSuchConstructionSet(chosen) from None
    if not close_ids:
        raise NoCertificatesForPeriod(period, chosen)
    return StartedPaymentRuns(chosen, period, tuple(close_ids))
