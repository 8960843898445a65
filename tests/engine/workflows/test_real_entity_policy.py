"""Policy for real entities through a whole engine: always-human accounts and events, an entity's own materiality, an
entity whose books are in another currency than the policy's, and a bank account kept in a foreign currency.

Each test starts a close of the seed-42 books (changed as the case needs) under its own risk.yaml, seeded into the
database as `db upgrade` would, advances it with the real specialists over A2A, and reads the gates, their rules and
the trace. Each has a negative control: the same books under the shipped policy, or the policy without the change.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import shutil
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import Any

import yaml

from countersign.bootstrap.migrate import seed_policy_async
from countersign.bootstrap.settings import default_config_dir
from countersign.cards.evidence import evidence_for
from countersign.engine.books import load_books
from countersign.engine.orchestrator import advance
from countersign.engine.runs import start_close
from countersign.policy import Policy, load_workflows, parse_policy
from tests.support import import_default_principals

RISK = default_config_dir() / "risk.yaml"


def _policy(change: dict[str, Any]) -> Policy:
    data = yaml.safe_load(RISK.read_text(encoding="utf-8"))
    data.update(change)
    return parse_policy(data, "risk.yaml")


def _books(default_books: Path, folder: Path) -> Path:
    shutil.copytree(default_books, folder)
    return folder


async def _close_under(conn: Any, engine_ctx: Any, policy: Policy, books: Path) -> tuple[str, Any]:
    """A close of `books` started under `policy` (seeded into the database first) and advanced once."""
    await import_default_principals(conn)
    workflows = load_workflows(default_config_dir() / "workflows", policy)
    await seed_policy_async(conn, policy, workflows)
    loaded = await load_books(conn, books, loaded_by="test")
    close_id = await start_close(
        conn,
        entity=loaded.entity,
        period=loaded.period,
        book_set_id=loaded.book_set_id,
        policy=policy,
        workflow=workflows["close"],
        started_by="test-starter",
    )
    ctx = dataclasses.replace(engine_ctx, policy=policy, workflows=workflows)
    await advance(conn, close_id, ctx)
    return close_id, ctx


async def _gate(conn: Any, close_id: str, task: str) -> dict[str, Any] | None:
    cur = await conn.execute(
        "SELECT tier, rule, kind, summary, amount FROM gate WHERE close_id = %s AND task = %s ORDER BY opened_at",
        (close_id, task),
    )
    row = await cur.fetchone()
    if row is None:
        return None
    return {"tier": row[0], "rule": row[1], "kind": row[2], "summary": row[3], "amount": row[4]}


async def _task_status(conn: Any, close_id: str, task: str) -> str:
    cur = await conn.execute("SELECT status FROM close_task WHERE close_id = %s AND task = %s", (close_id, task))
    (status,) = await cur.fetchone()
    return str(status)


def _write_csv(path: Path, header: list[str], rows: list[list[str]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)


def _read_csv(path: Path) -> tuple[list[str], list[list[str]]]:
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    return rows[0], rows[1:]


async def test_an_always_human_account_and_a_supplier_bank_change_send_a_low_task_to_a_person(
    conn: Any, engine_ctx: Any, default_books: Path, tmp_path: Path
) -> None:
    books = _books(default_books, tmp_path / "books")
    _write_csv(
        books / "supplier_bank_changes.csv",
        ["change_id", "vendor", "changed_on", "old_account", "new_account", "changed_by"],
        [["VMC-0042", "Northwind Media Ltd", "2026-10-14", "****5555", "****9187", "j.doe"]],
    )
    policy = _policy({"always_human": {"tier": "medium", "accounts": ["2000"], "events": []}})

    close_id, _ = await _close_under(conn, engine_ctx, policy, books)

    gate = await _gate(conn, close_id, "ap_reconciliation")
    assert gate is not None and gate["kind"] == "approval" and gate["tier"] == "medium"
    assert "account 2000 (Accounts Payable) always needs a person" in gate["rule"]
    assert "supplier bank details changed" not in gate["rule"]  # the policy lists no events
    assert await _task_status(conn, close_id, "ar_reconciliation") == "done"  # 1100 is not always-human


async def test_a_supplier_bank_change_in_the_books_needs_a_person_under_the_shipped_policy(
    conn: Any, engine_ctx: Any, runtime: Any, default_books: Path, tmp_path: Path
) -> None:
    books = _books(default_books, tmp_path / "books")
    _write_csv(
        books / "supplier_bank_changes.csv",
        ["change_id", "vendor", "changed_on", "old_account", "new_account", "changed_by"],
        [["VMC-0042", "Northwind Media Ltd", "2026-10-14", "****5555", "****9187", "j.doe"]],
    )

    close_id, _ = await _close_under(conn, engine_ctx, runtime.policy, books)

    gate = await _gate(conn, close_id, "ap_reconciliation")
    assert gate is not None and gate["tier"] == "medium"
    assert (
        "supplier bank details changed (Northwind Media Ltd, 2026-10-14, by j.doe) always needs a person"
        in (gate["rule"])
    )


async def test_without_a_change_or_an_always_human_account_the_low_task_completes_alone(
    conn: Any, engine_ctx: Any, runtime: Any, default_books: Path
) -> None:
    """Negative control for the two tests above: the same books, unchanged, under the shipped policy."""
    close_id, _ = await _close_under(conn, engine_ctx, runtime.policy, default_books)

    assert await _gate(conn, close_id, "ap_reconciliation") is None
    assert await _task_status(conn, close_id, "ap_reconciliation") == "done"


async def test_an_entitys_own_materiality_raises_its_gate_and_says_whose_it_is(
    conn: Any, engine_ctx: Any, runtime: Any, default_books: Path
) -> None:
    policy = _policy(
        {
            "entities": {
                "ACME-UK": {"currency": "GBP", "amount_thresholds": [{"min_amount": "50000.00", "tier": "critical"}]}
            }
        }
    )

    close_id, _ = await _close_under(conn, engine_ctx, policy, default_books)

    gate = await _gate(conn, close_id, "accruals")
    assert gate is not None and gate["tier"] == "critical"  # GBP 82,213.52 of accruals >= the entity's GBP 50,000.00
    assert "materiality of ACME-UK" in gate["rule"] and "GBP 82,213.52" in gate["rule"]


async def test_under_the_global_thresholds_the_same_accruals_stay_at_their_own_tier(
    conn: Any, engine_ctx: Any, runtime: Any, default_books: Path
) -> None:
    """Negative control: GBP 82,213.52 is under the global GBP 250,000.00, so accruals keep tier high."""
    close_id, _ = await _close_under(conn, engine_ctx, runtime.policy, default_books)

    gate = await _gate(conn, close_id, "accruals")
    assert gate is not None and gate["tier"] == "high" and "raises tier" not in gate["rule"]


async def test_an_entity_in_another_currency_is_judged_after_conversion_at_the_rate_its_books_record(
    conn: Any, engine_ctx: Any, default_books: Path, tmp_path: Path
) -> None:
    """ACME-US keeps its books in US dollars; the group's thresholds are in sterling. Its accruals of
    USD 82,213.52 are GBP 64,948.68 at 0.79: under a GBP 70,000.00 threshold that the unconverted figure is over."""
    books = _books(default_books, tmp_path / "books")
    manifest = json.loads((books / "entity.json").read_text())
    manifest.update({"entity": "ACME-US", "currency": "USD"})
    (books / "entity.json").write_text(json.dumps(manifest))
    _write_csv(
        books / "rates.csv",
        ["from_currency", "to_currency", "rate", "rate_date", "source"],
        [["USD", "GBP", "0.79", "2026-10-31", "Bank of England spot rate"]],
    )
    policy = _policy(
        {
            "entities": {"ACME-US": {"currency": "USD"}},
            "amount_thresholds": [{"min_amount": "70000.00", "tier": "critical"}],
        }
    )

    close_id, _ = await _close_under(conn, engine_ctx, policy, books)

    gate = await _gate(conn, close_id, "accruals")
    assert gate is not None and gate["tier"] == "high" and "raises tier" not in gate["rule"]
    assert gate["amount"] == Decimal("82213.52")  # the gate keeps the entity's own amount
    assert gate["summary"]["currency"] == "USD"  # and the card shows the entity's money
    assert gate["summary"]["fx_rate"]["converted_amount"] == "64948.68"
    # The rate is in the trace twice: the close's version set, and the gate_opened event of that gate.
    cur = await conn.execute("SELECT version_set FROM trace_context WHERE close_id = %s", (close_id,))
    (versions,) = await cur.fetchone()
    assert versions["functional_currency"] == "USD"
    assert versions["rates"] == [
        {
            "from_currency": "USD",
            "to_currency": "GBP",
            "rate": "0.79",
            "rate_date": "2026-10-31",
            "source": "Bank of England spot rate",
        }
    ]
    cur = await conn.execute(
        "SELECT payload FROM trace_event"
        " WHERE close_id = %s AND kind = 'gate_opened' AND payload->>'task' = 'accruals'",
        (close_id,),
    )
    (opened,) = await cur.fetchone()
    assert opened["tier"] == "high" and opened["fx_rate"]["rate"] == "0.79"
    facts = {fact.label: fact.value for e in evidence_for(gate["summary"]) for fact in e.facts}
    assert facts["Rate"] == "1 USD = 0.79 GBP" and facts["Compared as"] == "GBP 64948.68"


async def test_the_same_entity_at_a_higher_rate_crosses_the_threshold_and_the_rule_names_the_rate(
    conn: Any, engine_ctx: Any, default_books: Path, tmp_path: Path
) -> None:
    """Control for the test above: the same books at 0.90 are GBP 73,992.17, over GBP 70,000.00."""
    books = _books(default_books, tmp_path / "books")
    manifest = json.loads((books / "entity.json").read_text())
    manifest.update({"entity": "ACME-US", "currency": "USD"})
    (books / "entity.json").write_text(json.dumps(manifest))
    _write_csv(
        books / "rates.csv",
        ["from_currency", "to_currency", "rate", "rate_date", "source"],
        [["USD", "GBP", "0.90", "2026-10-31", "Bank of England spot rate"]],
    )
    policy = _policy(
        {
            "entities": {"ACME-US": {"currency": "USD"}},
            "amount_thresholds": [{"min_amount": "70000.00", "tier": "critical"}],
        }
    )

    close_id, _ = await _close_under(conn, engine_ctx, policy, books)

    gate = await _gate(conn, close_id, "accruals")
    assert gate is not None and gate["tier"] == "critical"
    assert "USD 82,213.52 = GBP 73,992.17 at 0.9 USD/GBP (Bank of England spot rate, 2026-10-31)" in gate["rule"]


async def test_books_in_another_currency_without_the_rate_do_not_start(
    conn: Any, engine_ctx: Any, default_books: Path, tmp_path: Path
) -> None:
    books = _books(default_books, tmp_path / "books")
    manifest = json.loads((books / "entity.json").read_text())
    manifest.update({"entity": "ACME-US", "currency": "USD"})
    (books / "entity.json").write_text(json.dumps(manifest))
    policy = _policy({"entities": {"ACME-US": {"currency": "USD"}}})
    loaded = await load_books(conn, books, loaded_by="test")
    workflows = load_workflows(default_config_dir() / "workflows", policy)
    try:
        await start_close(
            conn,
            entity="ACME-US",
            period=loaded.period,
            book_set_id=loaded.book_set_id,
            policy=policy,
            workflow=workflows["close"],
            started_by="test-starter",
        )
    except ValueError as refused:
        assert str(refused).startswith("rates.csv: (file): ACME-US keeps its books in USD")
    else:
        raise AssertionError("a close on USD books without a USD->GBP rate started")
    assert (await (await conn.execute("SELECT count(*) FROM close_run")).fetchone())[0] == 0


USD_PER_GBP = Decimal("1.27")  # how the test turns account 1010's sterling lines into dollars


def _in_dollars(amount: str) -> str:
    return str((Decimal(amount) * USD_PER_GBP).quantize(Decimal("0.01"), rounding=ROUND_HALF_EVEN))


async def test_a_dollar_bank_account_is_matched_in_dollars_and_its_exchange_difference_explained(
    conn: Any, engine_ctx: Any, runtime: Any, default_books: Path, tmp_path: Path
) -> None:
    """A sterling entity whose payroll account 1010 is kept in US dollars: the bank's dollar lines match the
    ledger's dollar amounts, and the difference between the account's dollars at the closing rate and the sterling
    it carries is shown as an unrealised exchange difference, not as unmatched lines."""
    books = _books(default_books, tmp_path / "books")
    header, rows = _read_csv(books / "accounts.csv")
    _write_csv(
        books / "accounts.csv", [*header, "currency"], [[*row, "USD" if row[0] == "1010" else ""] for row in rows]
    )
    header, rows = _read_csv(books / "gl_lines.csv")
    dollars = [[*row, "USD", _in_dollars(row[4])] if row[3] == "1010" else [*row, "", ""] for row in rows]
    _write_csv(books / "gl_lines.csv", [*header, "currency", "currency_amount"], dollars)
    for feed in (books / "bank_lines.csv", books / "corrected" / "bank_lines.csv"):
        header, rows = _read_csv(feed)
        _write_csv(
            feed,
            [*header, "currency"],
            [[*row[:3], _in_dollars(row[3]), *row[4:], "USD"] if row[1] == "1010" else [*row, ""] for row in rows],
        )
    _write_csv(
        books / "rates.csv",
        ["from_currency", "to_currency", "rate", "rate_date", "source"],
        [["USD", "GBP", "0.785", "2026-10-31", "Bank of England spot rate"]],
    )

    close_id, _ = await _close_under(conn, engine_ctx, runtime.policy, books)

    gate = await _gate(conn, close_id, "bank_reconciliation")  # halted on 1000's wrong export: an escalation
    assert gate is not None and gate["kind"] == "escalation"
    accounts = {a["account"]: a for a in gate["summary"]["result"]["accounts"]}
    payroll = accounts["1010"]
    assert payroll["currency"] == "USD" and payroll["matched"] == 104 and payroll["halt"] is False
    carried = sum((Decimal(row[4]) for row in rows_of(books / "gl_lines.csv") if row[3] == "1010"), Decimal(0))
    in_usd = sum((Decimal(row[8]) for row in rows_of(books / "gl_lines.csv") if row[3] == "1010"), Decimal(0))
    revalued = (in_usd * Decimal("0.785")).quantize(Decimal("0.01"), rounding=ROUND_HALF_EVEN)
    assert payroll["fx"]["balance"] == str(in_usd) and payroll["fx"]["carrying_value"] == str(carried)
    assert payroll["fx"]["unrealised_difference"] == str(revalued - carried)
    assert revalued != carried  # a real difference, explained rather than matched away
    assert "explained here and not matched against bank lines" in payroll["fx"]["note"]
    assert "currency" not in accounts["1000"] and "fx" not in accounts["1000"]
    lines = [line for e in evidence_for(gate["summary"]) for line in e.lines]
    assert any(line.startswith("Account 1010, exchange difference: USD") for line in lines)


def rows_of(path: Path) -> list[list[str]]:
    return _read_csv(path)[1]
