"""Variance specialist: flag budget variances and explain them in prose that cites only queried figures.

Which lines are flagged, and every figure, come from deterministic code. The narrative is drafted from a template
(`handle`) or written by a model behind the narration guards, with the template as its fallback
(`handle_with_model`); either way it is grounded against the input line values before it is returned.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from countersign.specialists.errors import SpecialistInputError
from countersign.specialists.grounding import extract_figures, ground_figures
from countersign.specialists.narration import SOURCE_FALLBACK, NarrationEscalation, Narrator, model_off, narrate

NARRATIVE_TEMPLATE = "variance_narrative"
OPENING_TEXT = "The following accounts exceeded the variance thresholds this period."
NOTHING_FLAGGED_TEXT = "No account exceeded the variance thresholds this period."
LINE_TEMPLATE = (
    "{name} is {direction} budget this period: actual {actual} against a budget of {budget}, "
    "a variance of {variance_budget}{percent_clause}. "
    "Against the prior period's {prior}, the variance is {variance_prior}."
)

_MONEY_PATTERN = re.compile(r"-?[0-9]+(?:\.[0-9]{1,2})?")
_NUMBER_PATTERN = re.compile(r"-?[0-9]+(?:\.[0-9]+)?")
_PERIOD_PATTERN = re.compile(r"[0-9]{4}-(?:0[1-9]|1[0-2])")
# Rounding a percentage to 1 dp, in any rounding mode, moves it by at most half a unit in that place.
_PERCENT_ROUNDING_SLACK = Decimal("0.05")


@dataclass(frozen=True)
class VarianceLine:
    account: str
    name: str
    actual: Decimal
    prior: Decimal
    budget: Decimal
    variance_prior: Decimal
    variance_budget: Decimal
    variance_budget_pct: Decimal | None  # None when there is no budget to compare with

    def cited_values(self) -> list[Decimal]:
        values = [self.actual, self.prior, self.budget, self.variance_prior, self.variance_budget]
        if self.variance_budget_pct is not None:
            values.append(self.variance_budget_pct)
        return values


@dataclass(frozen=True)
class VarianceAnalysis:
    """The deterministic part: which lines are flagged and which values a narrative may cite."""

    period: str
    raw_lines: list[Any]
    lines: list[VarianceLine]
    flagged_indexes: list[int]
    allowed: list[Decimal]
    grounding_tolerance: Decimal

    @property
    def flagged_lines(self) -> list[VarianceLine]:
        return [self.lines[index] for index in self.flagged_indexes]

    def result(self, narrative: str) -> dict[str, Any]:
        """Today's result keys; raises UngroundedFigureError if the narrative cites an unqueried figure."""
        figures = ground_figures(narrative, self.allowed, self.grounding_tolerance)
        return {
            "flagged": [self.raw_lines[index] for index in self.flagged_indexes],
            "narrative": narrative,
            "figures": [{"raw": figure.raw, "value": str(figure.value)} for figure in figures],
        }


def handle(payload: dict[str, Any]) -> dict[str, Any]:
    """The template path: the deterministic narrative, grounded."""
    analysis = analyse(payload)
    return analysis.result(draft_narrative(analysis.flagged_lines))


async def handle_with_model(payload: dict[str, Any], narrator: Narrator) -> dict[str, Any]:
    """The model path: the same flags and figures; the narrative from the model behind the narration guards.

    A narration escalation (a bound, no recorded response, a provider failure) halts the task with that reason. On
    the attempt after a person approved such an escalation (`model_off` in the payload), the model is not asked:
    the template narrative ships, flagged `<reason>_fallback`.
    """
    off = model_off(payload)
    analysis = analyse(payload)
    fallback = draft_narrative(analysis.flagged_lines)
    names = sorted({line.name for line in analysis.flagged_lines})
    try:
        narration = await narrate(
            narrator.provider,
            template=narrator.template(NARRATIVE_TEMPLATE),
            model=narrator.model,
            facts=narrative_facts(analysis, names),
            quoted=names,
            allowed_values=analysis.allowed,
            tolerance=analysis.grounding_tolerance,
            fallback=fallback,
            limits=narrator.limits,
            guards=narrator.guards,
            off=off,
        )
    except NarrationEscalation as escalation:
        return {
            **analysis.result(fallback),
            "halted": True,
            "escalation": escalation.reason,
            "halt_reason": f"variance narrative: {escalation.detail}",
            "narrative_source": SOURCE_FALLBACK,
            "narrative_flags": [f"{escalation.reason}_escalation"],
            "model_steps": [dict(step) for step in escalation.steps],
        }
    text = narration.text
    result = analysis.result(text) if narrator.guards else _unchecked_result(analysis, text)
    result.update(
        {
            "narrative_source": narration.source,
            "narrative_flags": list(narration.flags),
            "narrative_model": narration.model,
            "narrative_template_hash": narration.template_hash,
            "model_steps": [dict(step) for step in narration.steps],
        }
    )
    # Guards off (the eval's negative control only): whatever else the model said reaches the result.
    result.update(narration.extra)
    return result


def narrative_facts(analysis: VarianceAnalysis, names: Sequence[str]) -> dict[str, Any]:
    """What the model may cite: the flagged lines' figures; each name is a pointer into the quoted data."""
    return {
        "period": analysis.period,
        "currency": "GBP",
        "flagged": [
            {
                "account": line.account,
                "name": f"data[{names.index(line.name)}]",
                "direction": "above" if line.variance_budget > 0 else "below",
                "actual": str(line.actual),
                "budget": str(line.budget),
                "variance_budget": str(line.variance_budget),
                "variance_budget_pct": None if line.variance_budget_pct is None else str(line.variance_budget_pct),
                "prior": str(line.prior),
                "variance_prior": str(line.variance_prior),
            }
            for line in analysis.flagged_lines
        ],
    }


def analyse(payload: dict[str, Any]) -> VarianceAnalysis:
    if not isinstance(payload, Mapping):
        raise SpecialistInputError("payload", f"expected an object, got {type(payload).__name__}")
    period = payload.get("period")
    if not isinstance(period, str) or not _PERIOD_PATTERN.fullmatch(period):
        raise SpecialistInputError("period", f"expected a period string YYYY-MM, got {period!r}")
    threshold_amount = _non_negative(payload, "threshold_amount", _MONEY_PATTERN)
    threshold_pct = _non_negative(payload, "threshold_pct", _NUMBER_PATTERN)
    grounding_tolerance = _non_negative(payload, "grounding_tolerance", _NUMBER_PATTERN)
    raw_lines = payload.get("lines")
    if not isinstance(raw_lines, list):
        raise SpecialistInputError("lines", "expected a list of variance lines")
    lines = [_parse_line(raw, f"lines[{index}]") for index, raw in enumerate(raw_lines)]
    flagged_indexes = [index for index, line in enumerate(lines) if is_flagged(line, threshold_amount, threshold_pct)]
    allowed = [value for line in lines for value in line.cited_values()]
    # Account names are input too; a digit in a name ("Unit 4 rent") must not read as an invented figure.
    allowed += [figure.value for line in lines for figure in extract_figures(line.name)]
    return VarianceAnalysis(period, raw_lines, lines, flagged_indexes, allowed, grounding_tolerance)


def _unchecked_result(analysis: VarianceAnalysis, narrative: str) -> dict[str, Any]:
    """Guards off: the narrative ships without the grounding check (the eval's negative control only)."""
    return {
        "flagged": [analysis.raw_lines[index] for index in analysis.flagged_indexes],
        "narrative": narrative,
        "figures": [{"raw": figure.raw, "value": str(figure.value)} for figure in extract_figures(narrative)],
    }


def is_flagged(line: VarianceLine, threshold_amount: Decimal, threshold_pct: Decimal) -> bool:
    if abs(line.variance_budget) <= threshold_amount:
        return False
    return line.variance_budget_pct is None or abs(line.variance_budget_pct) > threshold_pct


def draft_narrative(lines: Sequence[VarianceLine], currency_symbol: str = "£") -> str:
    """Deterministic prose for the flagged lines, naming accounts by name and citing only their values."""
    if not lines:
        return NOTHING_FLAGGED_TEXT
    paragraphs = [OPENING_TEXT]
    for line in lines:
        if line.variance_budget_pct is None:
            percent_clause = " (no percentage, as the budget is nil)"
        else:
            percent_clause = f" ({format_percent(line.variance_budget_pct)} of budget)"
        paragraphs.append(
            LINE_TEMPLATE.format(
                name=line.name,
                direction="above" if line.variance_budget > 0 else "below",
                actual=format_money(line.actual, currency_symbol),
                budget=format_money(line.budget, currency_symbol),
                variance_budget=format_money(line.variance_budget, currency_symbol),
                percent_clause=percent_clause,
                prior=format_money(line.prior, currency_symbol),
                variance_prior=format_money(line.variance_prior, currency_symbol),
            )
        )
    return "\n".join(paragraphs)


def format_money(amount: Decimal, currency_symbol: str = "£") -> str:
    """'£12,345.67', with negatives in accounting parentheses: '(£1,234.00)'."""
    magnitude = f"{currency_symbol}{abs(amount):,.2f}"
    return f"({magnitude})" if amount < 0 else magnitude


def format_percent(percent: Decimal) -> str:
    return f"{percent:.1f}%"


def _parse_line(raw: Any, where: str) -> VarianceLine:
    if not isinstance(raw, Mapping):
        raise SpecialistInputError(where, f"expected an object, got {type(raw).__name__}")
    line = VarianceLine(
        account=_text(raw, "account", where),
        name=_text(raw, "name", where),
        actual=_decimal(raw, "actual", where, _MONEY_PATTERN),
        prior=_decimal(raw, "prior", where, _MONEY_PATTERN),
        budget=_decimal(raw, "budget", where, _MONEY_PATTERN),
        variance_prior=_decimal(raw, "variance_prior", where, _MONEY_PATTERN),
        variance_budget=_decimal(raw, "variance_budget", where, _MONEY_PATTERN),
        variance_budget_pct=(
            None
            if raw.get("variance_budget_pct") is None
            else _decimal(raw, "variance_budget_pct", where, _NUMBER_PATTERN)
        ),
    )
    _check_consistent(line, where)
    return line


def _check_consistent(line: VarianceLine, where: str) -> None:
    if line.variance_budget != line.actual - line.budget:
        raise SpecialistInputError(
            f"{where}.variance_budget",
            f"{line.variance_budget} is not actual - budget ({line.actual - line.budget})",
        )
    if line.variance_prior != line.actual - line.prior:
        raise SpecialistInputError(
            f"{where}.variance_prior",
            f"{line.variance_prior} is not actual - prior ({line.actual - line.prior})",
        )
    field = f"{where}.variance_budget_pct"
    if line.budget == 0:
        if line.variance_budget_pct is not None:
            raise SpecialistInputError(field, "must be null when budget is 0")
        return
    if line.variance_budget_pct is None:
        raise SpecialistInputError(field, "must not be null when budget is not 0")
    exact_pct = 100 * line.variance_budget / abs(line.budget)
    if abs(line.variance_budget_pct - exact_pct) > _PERCENT_ROUNDING_SLACK:
        raise SpecialistInputError(
            field, f"{line.variance_budget_pct} is not 100 * (actual - budget) / abs(budget) to 1 dp"
        )


def _text(source: Mapping[str, Any], key: str, where: str) -> str:
    value = source.get(key)
    if not isinstance(value, str) or not value.strip():
        raise SpecialistInputError(f"{where}.{key}", f"expected a non-empty string, got {value!r}")
    return value


def _decimal(source: Mapping[str, Any], key: str, where: str, pattern: re.Pattern[str]) -> Decimal:
    value = source.get(key)
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise SpecialistInputError(f"{where}.{key}", f"expected a decimal string like '1234.50', got {value!r}")
    return Decimal(value)


def _non_negative(payload: Mapping[str, Any], key: str, pattern: re.Pattern[str]) -> Decimal:
    value = payload.get(key)
    if not isinstance(value, str) or not pattern.fullmatch(value) or Decimal(value) < 0:
        raise SpecialistInputError(key, f"expected a non-negative decimal string, got {value!r}")
    return Decimal(value)
