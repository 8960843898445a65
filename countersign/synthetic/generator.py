"""generate_books: one profile + seed -> a byte-reproducible books directory (see the books format)."""

import csv
import hashlib
import json
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from pathlib import Path
from typing import Any

from countersign.synthetic import chart
from countersign.synthetic.bank import BANK_HEADER, BankFeeds, build_bank_feeds
from countersign.synthetic.gl import GlResult, OpenItem, gl_line_id, opening_items, write_gl
from countersign.synthetic.ground_truth import GROUND_TRUTH_FILE
from countersign.synthetic.money import format_minor
from countersign.synthetic.names import company_names
from countersign.synthetic.period import parse_period, period_days
from countersign.synthetic.pnl import VARIANCE_THRESHOLD_MINOR, VARIANCE_THRESHOLD_PCT, PnlLine, plan_pnl
from countersign.synthetic.profile import MIN_GL_LINES, BankFeedMismatch, IntercompanyMismatch, Profile, ProfileError

ENTITY_FILE = "entity.json"
GRNI_WINDOW_DAYS = 10
_GRNI_ITEMS = (
    ("5000", "Raw materials"),
    ("6100", "Facilities services"),
    ("6200", "Software licences"),
    ("6300", "Travel bookings"),
    ("6400", "Advisory services"),
    ("6500", "Energy supply"),
    ("6600", "Campaign materials"),
)


@dataclass(frozen=True)
class BooksManifest:
    out_dir: Path
    entity: str
    period: str
    currency: str
    profile: str
    seed: int
    gl_line_count: int
    files: dict[str, str]
    """Relative file name -> sha256 hex of its bytes (every file except entity.json)."""


def generate_books(
    profile: Profile,
    seed: int,
    out_dir: Path,
    *,
    entity: str | None = None,
    period: str | None = None,
    gl_lines: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> BooksManifest:
    profile = _apply_overrides(profile, entity=entity, period=period, gl_lines=gl_lines)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    rng = random.Random(seed)
    days = period_days(profile.period)
    day_labels = [d.isoformat() for d in days]
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "corrected").mkdir(exist_ok=True)

    parties = company_names(rng, profile.customers + profile.vendors)
    customers, vendors = parties[: profile.customers], parties[profile.customers :]
    opening_ar = opening_items(rng, "SI", profile.opening_ar_invoices, customers, days[0])
    opening_ap = opening_items(rng, "PI", profile.opening_ap_invoices, vendors, days[0])

    written: list[str] = []
    _write_csv(
        out_dir,
        "accounts.csv",
        ("account", "name", "type", "subtype"),
        written,
        ((a.code, a.name, a.type, a.subtype) for a in chart.ACCOUNTS),
    )
    with (out_dir / "gl_lines.csv").open("w", encoding="utf-8", newline="") as handle:
        gl = write_gl(
            rng,
            csv.writer(handle, lineterminator="\n"),
            days=days,
            period=profile.period,
            total_lines=profile.gl_lines,
            customers=customers,
            vendors=vendors,
            opening_ar=opening_ar,
            opening_ap=opening_ap,
            intercompany=profile.intercompany,
            progress=progress,
        )
    written.append("gl_lines.csv")

    wrong_exports = {a.account: a.bank_lines for a in profile.anomalies if isinstance(a, BankFeedMismatch)}
    feeds = build_bank_feeds(
        rng,
        cash_lines=gl.cash_lines,
        excluded_line_numbers=gl.opening_line_numbers,
        bank_accounts=profile.bank_accounts,
        bank_lag_days=profile.bank_lag_days,
        outstanding_items=profile.outstanding_items,
        day_labels=day_labels,
        wrong_export_lines=wrong_exports,
    )
    _write_csv(out_dir, "bank_lines.csv", BANK_HEADER, written, feeds.rows(corrected=False))
    _write_csv(out_dir, "corrected/bank_lines.csv", BANK_HEADER, written, feeds.rows(corrected=True))

    subledger_header = ("invoice_id", "{party}", "invoice_date", "due_date", "amount")
    _write_csv(out_dir, "ap_subledger.csv", _header(subledger_header, "vendor"), written, _subledger(gl.open_ap))
    _write_csv(out_dir, "ar_subledger.csv", _header(subledger_header, "customer"), written, _subledger(gl.open_ar))

    grni = _grni(rng, profile.grni_receipts, vendors, day_labels)
    _write_csv(
        out_dir,
        "grni.csv",
        ("receipt_id", "vendor", "po_number", "received_date", "amount", "expense_account", "description"),
        written,
        ((r[0], r[1], r[2], r[3], format_minor(r[4]), r[5], r[6]) for r in grni),
    )

    intercompany = _intercompany(profile, gl)
    _write_csv(
        out_dir,
        "intercompany.csv",
        ("counterparty", "account", "our_balance", "their_balance"),
        written,
        ((p, a, format_minor(ours), format_minor(theirs)) for p, a, ours, theirs in intercompany),
    )

    pnl = plan_pnl(rng, {a: gl.balances[a] for a in chart.PNL_ACCOUNTS}, profile.variance_flags)
    _write_csv(
        out_dir,
        "prior_period.csv",
        ("account", "amount"),
        written,
        ((line.account, format_minor(line.prior_minor)) for line in pnl),
    )
    _write_csv(
        out_dir,
        "budget.csv",
        ("account", "amount"),
        written,
        ((line.account, format_minor(line.budget_minor)) for line in pnl),
    )

    truth = _ground_truth(profile, seed, gl, feeds, grni, intercompany, pnl)
    _write_json(out_dir / GROUND_TRUTH_FILE, truth)
    written.append(GROUND_TRUTH_FILE)

    files = {name: hashlib.sha256((out_dir / name).read_bytes()).hexdigest() for name in sorted(written)}
    manifest = BooksManifest(
        out_dir=out_dir,
        entity=profile.entity,
        period=profile.period,
        currency=profile.currency,
        profile=profile.name,
        seed=seed,
        gl_line_count=gl.line_count,
        files=files,
    )
    _write_json(
        out_dir / ENTITY_FILE,
        {
            "entity": manifest.entity,
            "period": manifest.period,
            "currency": manifest.currency,
            "profile": manifest.profile,
            "seed": manifest.seed,
            "gl_line_count": manifest.gl_line_count,
            "files": files,
        },
    )
    return manifest


def _apply_overrides(profile: Profile, *, entity: str | None, period: str | None, gl_lines: int | None) -> Profile:
    if entity is not None:
        if not entity.strip():
            raise ProfileError(profile.source, "entity", "override must be a non-empty string")
        profile = replace(profile, entity=entity)
    if period is not None:
        try:
            parse_period(period)
        except ValueError as exc:
            raise ProfileError(profile.source, "period", f"override: {exc}") from exc
        profile = replace(profile, period=period)
    if gl_lines is not None:
        if isinstance(gl_lines, bool) or not isinstance(gl_lines, int) or gl_lines < MIN_GL_LINES:
            raise ProfileError(profile.source, "gl_lines", f"override must be an integer >= {MIN_GL_LINES}")
        profile = replace(profile, gl_lines=gl_lines)
    return profile


def _header(template: tuple[str, ...], party: str) -> tuple[str, ...]:
    return tuple(party if column == "{party}" else column for column in template)


def _write_csv(
    out_dir: Path, name: str, header: Sequence[str], written: list[str], rows: Iterable[Sequence[str]]
) -> None:
    with (out_dir / name).open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)
    written.append(name)


def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, sort_keys=True, indent=2) + "\n", encoding="utf-8")


def _subledger(items: list[OpenItem]) -> list[tuple[str, str, str, str, str]]:
    return [(i, party, issued, due, format_minor(amount)) for i, party, issued, due, amount in sorted(items)]


# (receipt_id, vendor, po_number, received_date, amount_minor, expense_account, description)
GrniReceipt = tuple[str, str, str, str, int, str, str]


def _grni(rng: random.Random, count: int, vendors: list[str], day_labels: list[str]) -> list[GrniReceipt]:
    receipts: list[GrniReceipt] = []
    first_day = max(0, len(day_labels) - GRNI_WINDOW_DAYS)
    for index in range(count):
        account, item = _GRNI_ITEMS[int(rng.random() * len(_GRNI_ITEMS))]
        vendor = vendors[int(rng.random() * len(vendors))]
        received = day_labels[first_day + int(rng.random() * (len(day_labels) - first_day))]
        po_number = f"PO-{10_000 + int(rng.random() * 90_000)}"
        amount = 25_000 + int(rng.random() * 1_475_001)
        receipts.append((f"GRN-{index + 1:04d}", vendor, po_number, received, amount, account, item))
    return receipts


def _intercompany(profile: Profile, gl: GlResult) -> list[tuple[str, str, int, int]]:
    differences = {a.counterparty: a.difference_minor for a in profile.anomalies if isinstance(a, IntercompanyMismatch)}
    pairs = []
    for pair in profile.intercompany:
        ours = gl.balances[pair.account]
        pairs.append((pair.counterparty, pair.account, ours, ours + differences.get(pair.counterparty, 0)))
    return pairs


def _money(minor: int) -> str:
    return format_minor(minor)


def _ground_truth(
    profile: Profile,
    seed: int,
    gl: GlResult,
    feeds: BankFeeds,
    grni: list[GrniReceipt],
    intercompany: list[tuple[str, str, int, int]],
    pnl: list[PnlLine],
) -> dict[str, Any]:
    gl_counts = {account: 0 for account in feeds.statements}
    opening_on_account: dict[str, list[int]] = {account: [] for account in feeds.statements}
    for line_number, account, *_ in gl.cash_lines:
        if account in gl_counts:
            gl_counts[account] += 1
            if line_number in gl.opening_line_numbers:
                opening_on_account[account].append(line_number)

    as_loaded: dict[str, Any] = {}
    corrected: dict[str, Any] = {}
    for account, statement in sorted(feeds.statements.items()):
        unmatched_gl = sorted(feeds.outstanding_line_numbers[account] + opening_on_account[account])
        corrected[account] = {
            "bank_lines": len(statement),
            "matched": len(statement),
            "gl_lines": gl_counts[account],
            "unmatched_gl": len(unmatched_gl),
            "unmatched_gl_ids": [gl_line_id(n) for n in unmatched_gl],
        }
        if account in feeds.wrong_exports:
            as_loaded[account] = {
                "bank_lines": len(feeds.wrong_exports[account]),
                "matched": 0,
                "gl_lines": gl_counts[account],
                "unmatched_gl": gl_counts[account],
            }
        else:
            as_loaded[account] = {key: corrected[account][key] for key in ("bank_lines", "matched", "gl_lines")}
            as_loaded[account]["unmatched_gl"] = corrected[account]["unmatched_gl"]

    anomalies: list[dict[str, Any]] = []
    for anomaly in profile.anomalies:
        if isinstance(anomaly, BankFeedMismatch):
            anomalies.append(
                {
                    "kind": anomaly.kind,
                    "account": anomaly.account,
                    "bank_lines": anomaly.bank_lines,
                    "matching_gl_lines": 0,
                    "explanation": (
                        f"The statement loaded for account {anomaly.account} "
                        f"({chart.ACCOUNT_NAMES[anomaly.account]}) was exported from a different bank "
                        f"account: its {anomaly.bank_lines} lines carry EXT- references and amounts that "
                        "appear nowhere on that GL account, so none can be matched. "
                        "corrected/bank_lines.csv holds the true statement, which reconciles."
                    ),
                }
            )
        else:
            anomalies.append(
                {
                    "kind": anomaly.kind,
                    "counterparty": anomaly.counterparty,
                    "difference": _money(anomaly.difference_minor),
                    "explanation": (
                        f"{anomaly.counterparty} reports a balance that differs from ours by "
                        f"{_money(anomaly.difference_minor)} (their balance minus ours)."
                    ),
                }
            )

    ap_total = sum(item[4] for item in gl.open_ap)
    ar_total = sum(item[4] for item in gl.open_ar)
    return {
        "entity": profile.entity,
        "period": profile.period,
        "profile": profile.name,
        "seed": seed,
        "anomalies": anomalies,
        "expected": {
            "bank_reconciliation": as_loaded,
            "bank_reconciliation_corrected": corrected,
            "ap_control_balance": _money(gl.balances[chart.PAYABLE_CONTROL]),
            "ap_subledger_total": _money(ap_total),
            "ap_items": len(gl.open_ap),
            "ar_control_balance": _money(gl.balances[chart.RECEIVABLE_CONTROL]),
            "ar_subledger_total": _money(ar_total),
            "ar_items": len(gl.open_ar),
            "grni_total": _money(sum(r[4] for r in grni)),
            "grni_receipts": len(grni),
            "intercompany": [
                {
                    "counterparty": counterparty,
                    "account": account,
                    "our_balance": _money(ours),
                    "their_balance": _money(theirs),
                    "difference": _money(ours - theirs),
                    "agrees": ours == theirs,
                }
                for counterparty, account, ours, theirs in intercompany
            ],
            "pnl_accounts": {
                line.account: {
                    "name": chart.ACCOUNT_NAMES[line.account],
                    "actual": _money(line.actual_minor),
                    "budget": _money(line.budget_minor),
                    "prior": _money(line.prior_minor),
                    "variance_budget": _money(line.variance_budget_minor),
                    "variance_budget_pct": _pct(line.variance_budget_pct),
                    "flagged": line.flagged,
                }
                for line in pnl
            },
            "variance_thresholds": {
                "amount": _money(VARIANCE_THRESHOLD_MINOR),
                "pct": str(VARIANCE_THRESHOLD_PCT),
            },
            "flagged_accounts": [line.account for line in pnl if line.flagged],
        },
    }


def _pct(value: Decimal | None) -> str | None:
    return None if value is None else str(value)
