from __future__ import annotations

from decimal import Decimal

from hypothesis import given
from hypothesis import strategies as st

from countersign.cards.evidence import Fact, evidence_for, halt_reason
from countersign.cards.formatting import money, share_percent, utc_time
from tests.cards.fixtures import BANK_HALT_GATE_ID, SUMMARY_BY_GATE, open_gate_cards


def test_escalation_summary_gives_the_halt_reason_and_the_result_figures() -> None:
    summary = SUMMARY_BY_GATE[BANK_HALT_GATE_ID]
    assert halt_reason(summary) == "account 1000: 17 of 17 bank lines unmatched (tolerance 55%)"
    (bank,) = evidence_for(summary)
    assert bank.title == "Bank accounts"
    assert bank.lines[0].startswith("Account 1000: 17 of 17 bank lines unmatched, 0 matched (100.0% unmatched)")
    assert bank.lines[0].endswith("— over tolerance")
    assert Fact("Unmatched bank lines", "17") in bank.facts


def test_accruals_summary_without_a_kind_is_recognised_by_its_journal() -> None:
    (accruals,) = evidence_for(open_gate_cards()["accruals"].summary)
    assert accruals.title == "Accrual journal"
    assert Fact("Total accrued", "82,213.52") in accruals.facts
    assert len(accruals.lines) == 9 and accruals.lines[-1] == "2100  -82,213.52  Accrued liabilities: GRNI"


def test_variance_summary_without_a_kind_keeps_flagged_lines_and_narrative() -> None:
    (variance,) = evidence_for(open_gate_cards()["variance"].summary)
    assert len(variance.lines) == 4
    assert variance.lines[3] == (
        "6600 Marketing: actual 255,599.15 against budget 330,829.86, variance -75,230.71 (-22.7% of budget)"
    )
    assert variance.narrative is not None and variance.narrative.startswith("The following accounts")


def test_signoff_summary_lists_tasks_and_journals() -> None:
    tasks, journals = evidence_for(open_gate_cards()["signoff"].summary)
    assert Fact("Tasks done", "6 of 7") in tasks.facts
    assert "Bank reconciliation: done (attempt 2)" in tasks.lines
    assert journals.lines == ("Journal 1: Accrual for goods received not invoiced, October 2026 — debits 82,213.52",)


def test_malformed_summary_values_are_shown_not_raised() -> None:
    (bank,) = evidence_for({"kind": "bank", "accounts": [{"account": "1000", "bank_lines": "many"}, "junk"]})
    assert bank.lines == ("Account 1000: bank lines —, matched —",)
    assert evidence_for({}) == ()
    assert evidence_for({"kind": "custom", "note": "12.00", "nested": {"a": 1}}) == (
        evidence_for({"kind": "custom", "note": "12.00"})
    )


@given(st.decimals(min_value=Decimal("-1e12"), max_value=Decimal("1e12"), places=2))
def test_money_adds_thousands_separators_and_keeps_the_exact_amount(amount: Decimal) -> None:
    shown = money(str(amount))
    assert Decimal(shown.replace(",", "")) == amount
    whole = shown.lstrip("-").split(".")[0]
    assert all(len(group) == 3 for group in whole.split(",")[1:])


@given(st.decimals(min_value=0, max_value=1, places=4))
def test_share_percent_is_the_share_times_100_to_one_place(share: Decimal) -> None:
    shown = share_percent(str(share))
    assert shown.endswith("%")
    assert abs(Decimal(shown[:-1]) - share * 100) <= Decimal("0.05")


def test_money_and_share_leave_non_numbers_visible() -> None:
    assert money(None) == "—" and money("n/a") == "n/a" and money("NaN") == "NaN" and money(True) == "True"
    assert share_percent(None) == "—"


def test_times_are_shown_in_utc_whatever_the_offset() -> None:
    assert utc_time("2026-12-01T06:11:30.224569+02:00") == "2026-12-01 04:11 UTC"
    assert utc_time("2026-12-01T04:11:30") == "2026-12-01 04:11 UTC"
    assert utc_time("next Tuesday") == "next Tuesday"
