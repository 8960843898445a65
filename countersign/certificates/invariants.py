"""The sixteen invariants a payment certificate must satisfy against the reconstructed position.

Each check is pure arithmetic over the contract, the position rebuilt from every certified certificate before this
one, and the certificate itself. Each returns an `InvariantResult` with a verdict, the amounts involved (Decimal, in
the contract currency), the certificate lines, a deterministic explanation, the clauses it rests on (topic keys,
and the clause ids of the contract's form via its `clause_refs`) and, where it compares with the position, the
earlier certificates it compares with. Checks honour the contract's declared conventions (valuation rounding,
materials consumption order) and, for those it does not declare, the ones its documents show
(`countersign.certificates.conventions`). Nothing here reads a file or calls a model.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from typing import Literal

from countersign.certificates.conventions import half_unit_minor, read_conventions, whole_unit_minor
from countersign.certificates.model import (
    DEFECTS_END,
    Certificate,
    Contract,
    MaterialsConsumption,
    MaterialsItem,
    ValuationRounding,
    amount_text,
    fraction_of,
    value_of,
)
from countersign.certificates.reconstruction import (
    Position,
    accepted_period_values,
    consumed_materials,
    instructed_quantity_changes,
    line_allowance_centi,
    omitted_this_period,
    owned_lines,
    period_value_at_rate,
    pro_rata_minor,
    revaluation_problem,
    revalued_by_instruction,
    reversed_by_instruction,
)
from countersign.money.units import minor_units

Verdict = Literal["pass", "violation"]
PASS: Verdict = "pass"
VIOLATION: Verdict = "violation"

STATEMENT_FOOTS = "statement_foots"
PREVIOUSLY_CERTIFIED_CARRIED_FORWARD = "previously_certified_carried_forward"
LINES_STATED_CUMULATIVELY = "lines_stated_cumulatively"
QUANTITIES_NEVER_DECREASE_WITHOUT_VARIATION = "quantities_never_decrease_without_variation"
QUANTITY_WITHIN_BILL = "quantity_within_bill"
PERIOD_WORK_AT_RATE_IN_FORCE = "period_work_at_rate_in_force"
SCOPE_BILLED_THROUGH_ONE_PACKAGE = "scope_billed_through_one_package"
VARIATIONS_HAVE_INSTRUCTIONS = "variations_have_instructions"
RETENTION_AT_RATE_WITHIN_CAP = "retention_at_rate_within_cap"
RETENTION_RELEASED_ONCE = "retention_released_once"
RETENTION_RELEASED_AFTER_PRACTICAL_COMPLETION = "retention_released_after_practical_completion"
ADVANCE_AMORTISED_PER_SCHEDULE = "advance_amortised_per_schedule"
ADVANCE_REPAID_WITHIN_ADVANCE = "advance_repaid_within_advance"
MATERIALS_ON_SITE_REVERSED_ON_INCORPORATION = "materials_on_site_reversed_on_incorporation"
CERTIFIED_VARIATIONS_CARRIED_FORWARD = "certified_variations_carried_forward"
MATERIALS_WITHIN_LINE_ALLOWANCE = "materials_within_line_allowance"

INVARIANTS: tuple[str, ...] = (
    STATEMENT_FOOTS,
    PREVIOUSLY_CERTIFIED_CARRIED_FORWARD,
    LINES_STATED_CUMULATIVELY,
    QUANTITIES_NEVER_DECREASE_WITHOUT_VARIATION,
    QUANTITY_WITHIN_BILL,
    PERIOD_WORK_AT_RATE_IN_FORCE,
    SCOPE_BILLED_THROUGH_ONE_PACKAGE,
    VARIATIONS_HAVE_INSTRUCTIONS,
    RETENTION_AT_RATE_WITHIN_CAP,
    RETENTION_RELEASED_ONCE,
    RETENTION_RELEASED_AFTER_PRACTICAL_COMPLETION,
    ADVANCE_AMORTISED_PER_SCHEDULE,
    ADVANCE_REPAID_WITHIN_ADVANCE,
    MATERIALS_ON_SITE_REVERSED_ON_INCORPORATION,
    CERTIFIED_VARIATIONS_CARRIED_FORWARD,
    MATERIALS_WITHIN_LINE_ALLOWANCE,
)

CLAUSE_TOPICS: Mapping[str, tuple[str, ...]] = {
    STATEMENT_FOOTS: ("certified.arithmetic", "payment.certificate_content"),
    PREVIOUSLY_CERTIFIED_CARRIED_FORWARD: ("certified.previous",),
    LINES_STATED_CUMULATIVELY: ("valuation.cumulative_basis", "certified.previous"),
    QUANTITIES_NEVER_DECREASE_WITHOUT_VARIATION: ("valuation.cumulative_basis", "variations.omissions"),
    QUANTITY_WITHIN_BILL: ("valuation.quantity_overrun", "variations.instruction"),
    PERIOD_WORK_AT_RATE_IN_FORCE: ("rates.versions", "rates.superseded"),
    SCOPE_BILLED_THROUGH_ONE_PACKAGE: ("certified.packages", "certified.duplicate"),
    VARIATIONS_HAVE_INSTRUCTIONS: ("variations.instruction", "variations.unauthorised"),
    RETENTION_AT_RATE_WITHIN_CAP: ("retention.rate", "retention.cap"),
    RETENTION_RELEASED_ONCE: ("retention.release_practical_completion", "retention.release_defects_end"),
    RETENTION_RELEASED_AFTER_PRACTICAL_COMPLETION: (
        "retention.release_practical_completion",
        "completion.practical",
    ),
    ADVANCE_AMORTISED_PER_SCHEDULE: (
        "advance.amortisation_start",
        "advance.amortisation_rate",
        "advance.full_repayment",
    ),
    ADVANCE_REPAID_WITHIN_ADVANCE: ("advance.amount", "advance.full_repayment"),
    MATERIALS_ON_SITE_REVERSED_ON_INCORPORATION: ("materials.on_site", "materials.incorporation"),
    CERTIFIED_VARIATIONS_CARRIED_FORWARD: ("variations.instruction", "variations.omissions", "certified.previous"),
    MATERIALS_WITHIN_LINE_ALLOWANCE: ("materials.on_site", "valuation.quantity_overrun"),
}


@dataclass(frozen=True)
class InvariantResult:
    name: str
    verdict: Verdict
    amounts: Mapping[str, Decimal]
    lines: tuple[str, ...]
    explanation: str
    clause_topics: tuple[str, ...]
    clause_ids: tuple[str, ...]
    compared_with: tuple[str, ...] = ()
    """The earlier certified certificates a violation was found against (the position's figures it compared with)."""
    notes: tuple[str, ...] = ()
    """What a passing check accepted that the approver should see (a variation revalued from one sum to another)."""

    @property
    def violated(self) -> bool:
        return self.verdict == VIOLATION


Check = Callable[[Contract, Position, Certificate], InvariantResult]


def check_certificate(
    contract: Contract,
    position: Position,
    certificate: Certificate,
    *,
    disabled: Iterable[str] = (),
    read_documents: bool = True,
) -> tuple[InvariantResult, ...]:
    """Every invariant not in `disabled`, in `INVARIANTS` order, under the conventions the contract declares and,
    for those it does not, the ones its documents show (`conventions.read_conventions`; `read_documents=False`
    keeps the documented defaults, for the eval's control)."""
    skip = frozenset(disabled)
    unknown = sorted(skip - set(INVARIANTS))
    if unknown:
        raise ValueError(f"unknown invariant {unknown[0]!r} (known: {', '.join(INVARIANTS)})")
    if read_documents:
        contract = read_conventions(contract, position, certificate).contract
    return tuple(CHECKS[name](contract, position, certificate) for name in INVARIANTS if name not in skip)


# --- helpers ---------------------------------------------------------------------------------------------------


def within_rounding(contract: Contract, stated: int, expected: int) -> bool:
    """`stated` is `expected` as the contract rounds: to the penny, or under whole-unit valuation the figure rounded
    to the unit (a whole unit within half a unit of it)."""
    if stated == expected:
        return True
    if contract.conventions.valuation_rounding is not ValuationRounding.WHOLE_UNITS:
        return False
    unit = whole_unit_minor(contract.currency)
    return stated % unit == 0 and abs(stated - expected) <= half_unit_minor(contract.currency)


def money(minor: int, currency: str) -> Decimal:
    """`minor` minor units of `currency` as an amount: `(125050, "GBP")` -> `Decimal("1250.50")`, `(1250000, "JPY")` ->
    `Decimal("1250000")`, `(1250500, "BHD")` -> `Decimal("1250.500")`."""
    return Decimal(minor).scaleb(-minor_units(currency))


def _text(minor: int, contract: Contract) -> str:
    """The figure alone, grouped, to the minor units of the contract's currency (`1,250.50` in GBP, `1,250,000` in
    JPY, `1,250.500` in BHD): the sentence of a violation writes its amounts bare."""
    return f"{money(minor, contract.currency):,.{minor_units(contract.currency)}f}"


def _qty(centi: int) -> str:
    return f"{Decimal(centi).scaleb(-2):,.2f}"


def _result(
    name: str,
    contract: Contract,
    problems: list[str],
    amounts: Mapping[str, int],
    lines: Iterable[str] = (),
    passed: str = "",
    compared_with: Iterable[str | None] = (),
    notes: Iterable[str] = (),
) -> InvariantResult:
    topics = CLAUSE_TOPICS[name]
    clause_ids = tuple(contract.clause_refs.get(topic, topic) for topic in topics)
    verdict: Verdict = VIOLATION if problems else PASS
    explanation = "; ".join(problems) if problems else passed
    explanation = f"{explanation} ({', '.join(clause_ids)})"
    return InvariantResult(
        name=name,
        verdict=verdict,
        amounts={key: money(value, contract.currency) for key, value in amounts.items()},
        lines=tuple(dict.fromkeys(lines)),
        explanation=explanation,
        clause_topics=topics,
        clause_ids=clause_ids,
        compared_with=tuple(dict.fromkeys(c for c in compared_with if c)) if problems else (),
        notes=tuple(notes),
    )


def work_base_minor(certificate: Certificate) -> int:
    """Value of work executed to date as itemised: every stated line plus every variation."""
    return sum(line.value_to_date_minor for line in certificate.lines) + sum(
        v.amount_minor for v in certificate.variations
    )


def add_months(day: date, months: int) -> date:
    month_index = day.year * 12 + day.month - 1 + months
    year, month = divmod(month_index, 12)
    return date(year, month + 1, min(day.day, 28))


def advance_schedule_minor(contract: Contract, base_minor: int) -> int:
    """Advance repaid to date once the value of work reaches `base_minor` (the contract's amortisation schedule)."""
    terms = contract.advance
    if terms.amount_minor == 0:
        return 0
    contract_sum = contract.contract_sum_minor
    start = fraction_of(contract_sum, terms.start_fraction)
    if base_minor <= start:
        return 0
    if base_minor >= fraction_of(contract_sum, terms.repaid_by_fraction):
        return terms.amount_minor
    return min(terms.amount_minor, fraction_of(base_minor - start, terms.rate))


def retention_entitlement_minor(contract: Contract, deducted_minor: int, on: date) -> int:
    """How much retention may have been released by `on`: a share at practical completion, the rest after defects."""
    completion = contract.practical_completion
    if completion is None or on < completion:
        return 0
    defects_end = add_months(completion, contract.retention.defects_period_months)
    if on >= defects_end:
        return deducted_minor
    return fraction_of(deducted_minor, contract.retention.release_at_practical_completion)


def _amount(minor: int, contract: Contract) -> str:
    return amount_text(money(minor, contract.currency), contract.currency)


# --- the sixteen -----------------------------------------------------------------------------------------------


def statement_foots(contract: Contract, position: Position, certificate: Certificate) -> InvariantResult:
    totals = certificate.totals
    problems: list[str] = []
    amounts: dict[str, int] = {}
    lines: list[str] = []

    def compare(label: str, stated: int, computed: int, line: str | None = None) -> None:
        if stated != computed:
            problems.append(
                f"{label} is stated as {_text(stated, contract)} but its parts add to {_text(computed, contract)}"
            )
            amounts.setdefault("stated", stated)
            amounts.setdefault("computed", computed)
            amounts.setdefault("difference", stated - computed)
            if line is not None:
                lines.append(line)

    by_package: dict[str, int] = {}
    for line in certificate.lines:
        by_package[line.package] = by_package.get(line.package, 0) + line.value_to_date_minor
    stated_packages = {p.package: p.value_to_date_minor for p in certificate.packages}
    for package in sorted(set(by_package) | set(stated_packages)):
        compare(
            f"package {package} to date",
            stated_packages.get(package, 0),
            by_package.get(package, 0),
            line=f"package:{package}",
        )
    work = sum(line.value_to_date_minor for line in certificate.lines)
    compare("work to date", totals.work_to_date_minor, work)
    compare("the package totals", sum(stated_packages.values()), totals.work_to_date_minor)
    compare("variations to date", totals.variations_to_date_minor, sum(v.amount_minor for v in certificate.variations))
    compare(
        "materials on site",
        totals.materials_on_site_minor,
        sum(m.amount_minor for m in certificate.materials_on_site),
    )
    compare(
        "gross valuation",
        totals.gross_minor,
        totals.work_to_date_minor + totals.variations_to_date_minor + totals.materials_on_site_minor,
    )
    compare(
        "retention released",
        totals.retention_released_minor,
        sum(r.amount_minor for r in certificate.retention_releases),
    )
    compare(
        "retention held", totals.retention_held_minor, totals.retention_deducted_minor - totals.retention_released_minor
    )
    compare(
        "net to date",
        totals.net_to_date_minor,
        totals.gross_minor - totals.retention_held_minor - totals.advance_repaid_minor,
    )
    compare("amount due", totals.amount_due_minor, totals.net_to_date_minor - totals.previously_certified_minor)
    amounts.setdefault("amount_due", totals.amount_due_minor)
    return _result(STATEMENT_FOOTS, contract, problems, amounts, lines, passed="every total adds up from its parts")


def previously_certified_carried_forward(
    contract: Contract, position: Position, certificate: Certificate
) -> InvariantResult:
    stated = certificate.totals.previously_certified_minor
    reconstructed = position.net_to_date_minor
    problems = []
    if stated != reconstructed:
        source = (
            "no certificate has been certified before"
            if position.last_certificate is None
            else f"certificate {position.last_certificate} certified {_text(reconstructed, contract)} to date"
        )
        problems.append(f"previously certified is stated as {_text(stated, contract)} but {source}")
    amounts = {"stated": stated, "reconstructed": reconstructed, "difference": stated - reconstructed}
    return _result(
        PREVIOUSLY_CERTIFIED_CARRIED_FORWARD,
        contract,
        problems,
        amounts,
        passed=f"previously certified {_text(stated, contract)} matches the certified history",
        compared_with=[position.last_certificate],
    )


def lines_stated_cumulatively(contract: Contract, position: Position, certificate: Certificate) -> InvariantResult:
    owned = owned_lines(contract, certificate)
    problems: list[str] = []
    lines: list[str] = []
    compared: list[str | None] = []
    stated_total = reconstructed_total = 0
    for line_id in sorted(set(position.lines) | set(owned)):
        known = position.line(line_id)
        line = owned.get(line_id)
        if line is None:
            if known.quantity_centi or known.value_minor:
                problems.append(
                    f"line {line_id} was certified to date before ({_qty(known.quantity_centi)} / "
                    f"{_amount(known.value_minor, contract)} on certificate {known.certificate}) "
                    "and is missing from the statement"
                )
                lines.append(line_id)
                compared.append(known.certificate)
                reconstructed_total += known.value_minor
            continue
        if line.previous_quantity_centi != known.quantity_centi or line.previous_value_minor != known.value_minor:
            problems.append(
                f"line {line_id} states previous {_qty(line.previous_quantity_centi)} / "
                f"{_text(line.previous_value_minor, contract)} but {_qty(known.quantity_centi)} / "
                f"{_text(known.value_minor, contract)} "
                "was certified to date"
            )
            lines.append(line_id)
            compared.append(known.certificate)
            stated_total += line.previous_value_minor
            reconstructed_total += known.value_minor
    amounts = {
        "stated_previous": stated_total,
        "reconstructed_previous": reconstructed_total,
        "difference": stated_total - reconstructed_total,
    }
    return _result(
        LINES_STATED_CUMULATIVELY,
        contract,
        problems,
        amounts,
        lines,
        passed="every line carries its certified position forward",
        compared_with=compared,
    )


def quantities_never_decrease_without_variation(
    contract: Contract, position: Position, certificate: Certificate
) -> InvariantResult:
    omitted = omitted_this_period(position, certificate)
    problems: list[str] = []
    lines: list[str] = []
    compared: list[str | None] = []
    value_lost = 0
    for line_id, line in sorted(owned_lines(contract, certificate).items()):
        known = position.line(line_id)
        drop = known.quantity_centi - line.quantity_to_date_centi
        if drop > omitted.get(line_id, 0):
            compared.append(known.certificate)
            covered = omitted.get(line_id, 0)
            problems.append(
                f"line {line_id} falls from {_qty(known.quantity_centi)} to {_qty(line.quantity_to_date_centi)}"
                + (f" with only {_qty(covered)} omitted by variation" if covered else " with no recorded variation")
            )
            lines.append(line_id)
            value_lost += known.value_minor - line.value_to_date_minor
    return _result(
        QUANTITIES_NEVER_DECREASE_WITHOUT_VARIATION,
        contract,
        problems,
        {"value_reduction": value_lost},
        lines,
        passed="no cumulative quantity fell without an omission",
        compared_with=compared,
    )


def quantity_within_bill(contract: Contract, position: Position, certificate: Certificate) -> InvariantResult:
    """A line's quantity to date stays within its bill quantity plus the quantity changes instructed to date: the
    instructed variations on the statement and every certified one it drops without a reversal (it still stands)."""
    instructed = instructed_quantity_changes(position, certificate)
    problems: list[str] = []
    lines: list[str] = []
    excess_value = 0
    for line in certificate.lines:
        bill = contract.line(line.boq_line)
        if bill is None:
            if line.quantity_to_date_centi > 0:
                problems.append(f"line {line.boq_line} is not a line of the bill")
                lines.append(line.boq_line)
                excess_value += line.value_to_date_minor
            continue
        if contract.owner_package(line.boq_line) != line.package:
            continue
        allowed = bill.quantity_centi + instructed.get(line.boq_line, 0)
        if line.quantity_to_date_centi > allowed:
            excess = line.quantity_to_date_centi - allowed
            problems.append(
                f"line {line.boq_line} is certified at {_qty(line.quantity_to_date_centi)} {bill.unit} to date, "
                f"{_qty(excess)} beyond the {_qty(allowed)} billed and instructed"
            )
            lines.append(line.boq_line)
            excess_value += value_of(excess, bill.rate_minor)
    return _result(
        QUANTITY_WITHIN_BILL,
        contract,
        problems,
        {"excess_value": excess_value},
        lines,
        passed="every quantity is within its bill line and instructed changes",
    )


def period_work_at_rate_in_force(contract: Contract, position: Position, certificate: Certificate) -> InvariantResult:
    problems: list[str] = []
    lines: list[str] = []
    stated_total = expected_total = 0
    for line_id, line in sorted(owned_lines(contract, certificate).items()):
        in_force = contract.rate_in_force(line_id, certificate.date)
        if in_force is None:
            if line.period_value_minor:
                problems.append(f"line {line_id} has no rate in force on {certificate.date.isoformat()}")
                lines.append(line_id)
                stated_total += line.period_value_minor
            continue
        version, rate = in_force
        known = position.line(line_id)
        expected = period_value_at_rate(contract, known, line.period_quantity_centi, rate)
        if line.period_value_minor not in accepted_period_values(contract, known, line.period_quantity_centi, rate):
            problem = (
                f"line {line_id} values {_qty(line.period_quantity_centi)} this period at "
                f"{_text(line.period_value_minor, contract)}, not {_text(expected, contract)} "
                f"at the rate {_text(rate, contract)} of version {version}"
            )
            superseded = [
                (old, old_rate)
                for old, old_rate in contract.superseded_rates(line_id, certificate.date)
                if line.period_value_minor
                in accepted_period_values(contract, known, line.period_quantity_centi, old_rate)
            ]
            if superseded:
                problem += (
                    f" (it matches the superseded rate "
                    f"{_text(superseded[0][1], contract)} of version {superseded[0][0]})"
                )
            problems.append(problem)
            lines.append(line_id)
            stated_total += line.period_value_minor
            expected_total += expected
    amounts = {"stated": stated_total, "at_rate_in_force": expected_total, "difference": stated_total - expected_total}
    return _result(
        PERIOD_WORK_AT_RATE_IN_FORCE,
        contract,
        problems,
        amounts,
        lines,
        passed="this period's work is valued at the rates in force",
    )


def scope_billed_through_one_package(
    contract: Contract, position: Position, certificate: Certificate
) -> InvariantResult:
    problems: list[str] = []
    lines: list[str] = []
    overlap = 0
    packages_by_scope: dict[str, set[str]] = {}
    for line in certificate.lines:
        packages_by_scope.setdefault(line.scope_hash, set()).add(line.package)
    for line in certificate.lines:
        owner = contract.owner_package(line.boq_line)
        contract_hash = contract.scope_hash(line.boq_line)
        if owner is not None and line.package != owner:
            problems.append(
                f"line {line.boq_line} belongs to package {owner} but is billed through package {line.package} "
                f"for {_text(line.period_value_minor, contract)} this period"
            )
            lines.append(f"{line.package}/{line.boq_line}")
            overlap += line.period_value_minor
        elif contract_hash is not None and line.scope_hash != contract_hash:
            problems.append(f"line {line.boq_line} carries a scope hash its package does not own")
            lines.append(f"{line.package}/{line.boq_line}")
            overlap += line.period_value_minor
        elif len(packages_by_scope[line.scope_hash]) > 1:
            others = ", ".join(sorted(packages_by_scope[line.scope_hash] - {line.package}))
            problems.append(f"the scope of line {line.boq_line} is also billed through package {others}")
            lines.append(f"{line.package}/{line.boq_line}")
    return _result(
        SCOPE_BILLED_THROUGH_ONE_PACKAGE,
        contract,
        problems,
        {"overlap": overlap},
        lines,
        passed="every scope is billed through the one package that owns it",
    )


def variations_have_instructions(contract: Contract, position: Position, certificate: Certificate) -> InvariantResult:
    problems: list[str] = []
    lines: list[str] = []
    unauthorised = 0
    for variation in certificate.variations:
        valued = variation.amount_minor != 0 or variation.quantity_change_centi != 0
        if valued and not (variation.instruction_ref and variation.instruction_ref.strip()):
            problems.append(
                f"variation {variation.id} is valued at "
                f"{_text(variation.amount_minor, contract)} without an instruction"
            )
            lines.append(variation.id)
            unauthorised += variation.amount_minor
    return _result(
        VARIATIONS_HAVE_INSTRUCTIONS,
        contract,
        problems,
        {"unauthorised": unauthorised},
        lines,
        passed="every valued variation rests on an instruction",
    )


def retention_at_rate_within_cap(contract: Contract, position: Position, certificate: Certificate) -> InvariantResult:
    terms = contract.retention
    base = work_base_minor(certificate) + sum(m.amount_minor for m in certificate.materials_on_site)
    expected = min(fraction_of(base, terms.rate), terms.cap_minor)
    deducted = certificate.totals.retention_deducted_minor
    problems = []
    if deducted > terms.cap_minor:
        problems.append(
            f"retention deducted {_text(deducted, contract)} is above its cap of {_text(terms.cap_minor, contract)}"
        )
    elif not within_rounding(contract, deducted, expected):
        problems.append(
            f"retention deducted {_text(deducted, contract)} is not {terms.rate * 100:g}% of {_text(base, contract)} "
            f"within the cap of {_text(terms.cap_minor, contract)}, which is {_text(expected, contract)}"
        )
    amounts = {"deducted": deducted, "expected": expected, "cap": terms.cap_minor, "difference": deducted - expected}
    return _result(
        RETENTION_AT_RATE_WITHIN_CAP,
        contract,
        problems,
        amounts,
        passed=f"retention {_text(deducted, contract)} is at the contract rate within its cap",
    )


def retention_released_once(contract: Contract, position: Position, certificate: Certificate) -> InvariantResult:
    releases = certificate.retention_releases
    released = sum(r.amount_minor for r in releases)
    problems: list[str] = []
    lines: list[str] = []
    for event, count in sorted(Counter(r.event for r in releases).items()):
        if count > 1:
            problems.append(f"retention is released {count} times for {event.replace('_', ' ')}")
            lines.append(f"retention:{event}")
    completion = contract.practical_completion
    entitlement = retention_entitlement_minor(contract, certificate.totals.retention_deducted_minor, certificate.date)
    if (
        completion is not None
        and certificate.date >= completion
        and released > entitlement
        and not within_rounding(contract, released, entitlement)
    ):
        problems.append(
            f"retention released {_text(released, contract)} exceeds the "
            f"{_text(entitlement, contract)} releasable by now"
        )
        lines.extend(f"retention:{r.event}" for r in releases)
    amounts = {"released": released, "entitlement": entitlement, "excess": max(0, released - entitlement)}
    return _result(
        RETENTION_RELEASED_ONCE,
        contract,
        problems,
        amounts,
        lines,
        passed="each retention release happens once and within its share",
    )


def retention_released_after_practical_completion(
    contract: Contract, position: Position, certificate: Certificate
) -> InvariantResult:
    released = sum(r.amount_minor for r in certificate.retention_releases)
    completion = contract.practical_completion
    problems = []
    if released and (completion is None or certificate.date < completion):
        when = "before practical completion is certified" if completion is None else f"before {completion.isoformat()}"
        problems.append(f"retention of {_text(released, contract)} is released {when}")
    defects_releases = [r for r in certificate.retention_releases if r.event == DEFECTS_END]
    if defects_releases and completion is not None and certificate.date >= completion:
        defects_end = add_months(completion, contract.retention.defects_period_months)
        if certificate.date < defects_end:
            problems.append(f"the defects-period retention is released before {defects_end.isoformat()}")
    return _result(
        RETENTION_RELEASED_AFTER_PRACTICAL_COMPLETION,
        contract,
        problems,
        {"released": released},
        [f"retention:{r.event}" for r in certificate.retention_releases] if problems else [],
        passed="no retention is released before it falls due",
    )


def advance_amortised_per_schedule(contract: Contract, position: Position, certificate: Certificate) -> InvariantResult:
    base = work_base_minor(certificate)
    expected = advance_schedule_minor(contract, base)
    stated = certificate.totals.advance_repaid_minor
    problems = []
    if not within_rounding(contract, stated, expected):
        problems.append(
            f"advance repaid to date is {_text(stated, contract)} but the schedule requires "
            f"{_text(expected, contract)} "
            f"at a value of work of {_text(base, contract)}"
            + (
                f" (nothing more repaid since certificate {position.last_certificate})"
                if stated == position.advance_repaid_minor and position.last_certificate
                else ""
            )
        )
    amounts = {"stated": stated, "scheduled": expected, "difference": stated - expected}
    return _result(
        ADVANCE_AMORTISED_PER_SCHEDULE,
        contract,
        problems,
        amounts,
        passed=f"advance repaid {_text(stated, contract)} follows the schedule",
        compared_with=[position.last_certificate] if stated == position.advance_repaid_minor else [],
    )


def advance_repaid_within_advance(contract: Contract, position: Position, certificate: Certificate) -> InvariantResult:
    stated = certificate.totals.advance_repaid_minor
    advance = contract.advance.amount_minor
    problems = []
    if stated > advance:
        problems.append(
            f"advance repaid {_text(stated, contract)} is more than the advance of {_text(advance, contract)}"
        )
    elif stated < 0:
        problems.append(f"advance repaid {_text(stated, contract)} is negative")
    return _result(
        ADVANCE_REPAID_WITHIN_ADVANCE,
        contract,
        problems,
        {"repaid": stated, "advance": advance, "excess": max(0, stated - advance)},
        passed=f"advance repaid {_text(stated, contract)} is within the advance",
    )


def materials_on_site_reversed_on_incorporation(
    contract: Contract, position: Position, certificate: Certificate
) -> InvariantResult:
    """Materials on site leave the valuation as the work incorporates them.

    Under `MaterialsConsumption.MATERIALS_FIRST` (the default) the work done on a line since its materials were
    listed consumes them: an item the line's work has passed is reversed in full, and the materials carried forward on
    a line never exceed what was on site on the last certified certificate less the work done since. Under
    `OTHER_STOCK_FIRST` work draws on other stock first, so only `materials_within_line_allowance` bounds them.
    """
    problems: list[str] = []
    lines: list[str] = []
    compared: list[str | None] = []
    unreversed = 0
    for item in certificate.materials_on_site:
        if item.amount_minor < 0 or item.quantity_centi < 0:
            problems.append(f"materials item {item.id} is negative ({_text(item.amount_minor, contract)})")
            lines.append(item.id)
            unreversed += item.amount_minor
    if contract.conventions.materials_consumption is MaterialsConsumption.MATERIALS_FIRST:
        work = {line_id: line.quantity_to_date_centi for line_id, line in owned_lines(contract, certificate).items()}
        for consumed in consumed_materials(position, certificate, work):
            reached = work.get(consumed.boq_line, position.line(consumed.boq_line).quantity_centi)
            for item in consumed.incorporated:
                known = position.materials[item.id]
                problems.append(
                    f"materials item {item.id} ("
                    f"{_text(item.amount_minor, contract)}) for line {item.boq_line} is still "
                    f"claimed after the line reached {_qty(reached)}, which incorporates it "
                    f"(listed at {_qty(known.line_quantity_when_listed_centi)} for {_qty(item.quantity_centi)})"
                )
                lines.append(item.id)
                compared.append(known.certificate)
            before = consumed.on_site_before
            if consumed.partly_excess_centi and before is not None:
                claimed = sum(item.quantity_centi for item in consumed.incorporated + consumed.partly)
                problems.append(
                    f"materials on line {consumed.boq_line} ({', '.join(i.id for i in consumed.partly)}) are "
                    f"carried at {_qty(claimed)} but only {_qty(consumed.remaining_centi)} of the "
                    f"{_qty(before.quantity_centi)} on site on certificate {before.certificate} remain after "
                    f"{_qty(consumed.work_since_centi)} of work since, which consumes them first: "
                    f"{_qty(consumed.partly_excess_centi)} worth {_amount(consumed.partly_excess_minor, contract)} "
                    "is not reversed"
                )
                lines.extend(i.id for i in consumed.partly)
                compared.append(before.certificate)
            unreversed += consumed.excess_minor
    return _result(
        MATERIALS_ON_SITE_REVERSED_ON_INCORPORATION,
        contract,
        problems,
        {"not_reversed": unreversed},
        lines,
        passed="materials on site are positive and reversed once incorporated",
        compared_with=compared,
    )


def certified_variations_carried_forward(
    contract: Contract, position: Position, certificate: Certificate
) -> InvariantResult:
    """Every variation certified before is on the statement, unless this statement lists an instructed variation that
    reverses it. Restated at other figures it is a revaluation (noted, with both sums), unless the restatement moves
    it to another line, reverses its sign, takes it to nil or exceeds its instruction's limit
    (`reconstruction.revaluation_problem`); under a new instruction reference any restatement stands."""
    listed = {variation.id: variation for variation in certificate.variations}
    reversals = reversed_by_instruction(certificate)
    problems: list[str] = []
    lines: list[str] = []
    compared: list[str | None] = []
    notes: list[str] = []
    dropped = changed = 0
    for certified in sorted(position.certified_variations.values(), key=lambda v: v.id):
        if certified.id in reversals:
            continue
        stated = listed.get(certified.id)
        if stated is None:
            problems.append(
                f"variation {certified.id} ({_amount(certified.amount_minor, contract)}) certified on certificate "
                f"{certified.certificate} is missing from the statement, and no instructed variation reverses it"
            )
            lines.append(certified.id)
            compared.append(certified.certificate)
            dropped += certified.amount_minor
            continue
        same = (stated.amount_minor, stated.quantity_change_centi, stated.boq_line) == (
            certified.amount_minor,
            certified.quantity_change_centi,
            certified.boq_line,
        )
        if same or revalued_by_instruction(stated, certified):
            continue
        why = revaluation_problem(stated, certified)
        if why is None:
            notes.append(
                f"Variation {certified.id} revalued from {_amount(certified.amount_minor, contract)} to "
                f"{_amount(stated.amount_minor, contract)} (certified on certificate {certified.certificate})"
            )
            continue
        problem = (
            f"variation {certified.id} certified on certificate {certified.certificate} at "
            f"{_amount(certified.amount_minor, contract)} is restated at {_amount(stated.amount_minor, contract)}"
        )
        if stated.quantity_change_centi != certified.quantity_change_centi or stated.boq_line != certified.boq_line:
            problem += (
                f" with a quantity change of {_qty(stated.quantity_change_centi)} on {stated.boq_line or 'no line'}"
                f" (certified {_qty(certified.quantity_change_centi)} on {certified.boq_line or 'no line'})"
            )
        limits = [v for v in (certified.limit_minor, stated.limit_minor) if v is not None]
        if limits and why == "exceeds the instruction's limit":
            why += f" of {_amount(min(limits), contract)}"
        problem += f", which {why},"
        problems.append(problem + " without a new instruction")
        lines.append(certified.id)
        compared.append(certified.certificate)
        changed += stated.amount_minor - certified.amount_minor
    return _result(
        CERTIFIED_VARIATIONS_CARRIED_FORWARD,
        contract,
        problems,
        {"dropped": dropped, "changed": changed, "overstated": changed - dropped},
        lines,
        passed="every variation certified before is carried forward or reversed by an instruction",
        compared_with=compared,
        notes=notes,
    )


def materials_within_line_allowance(
    contract: Contract, position: Position, certificate: Certificate
) -> InvariantResult:
    """Work to date plus materials on site for a bill line never exceed what the line allows: its billed quantity
    plus the quantity changes instructed to date. Whatever their ids, materials beyond that are materials the line
    cannot use (re-listed, or already incorporated); this holds under either materials consumption order. Under
    materials-first consumption, what `materials_on_site_reversed_on_incorporation` already reverses is not counted
    again here."""
    owned = owned_lines(contract, certificate)
    changes = instructed_quantity_changes(position, certificate)
    reversed_elsewhere: dict[str, tuple[int, int]] = {}
    if contract.conventions.materials_consumption is MaterialsConsumption.MATERIALS_FIRST:
        work_to_date = {line_id: line.quantity_to_date_centi for line_id, line in owned.items()}
        for consumed in consumed_materials(position, certificate, work_to_date):
            reversed_elsewhere[consumed.boq_line] = (consumed.excess_centi, consumed.excess_minor)
    by_line: dict[str, list[MaterialsItem]] = {}
    for item in certificate.materials_on_site:
        if item.quantity_centi > 0 and item.amount_minor >= 0:
            by_line.setdefault(item.boq_line, []).append(item)
    problems: list[str] = []
    lines: list[str] = []
    compared: list[str | None] = []
    excess_value = 0
    for line_id, items in sorted(by_line.items()):
        already_centi, already_minor = reversed_elsewhere.get(line_id, (0, 0))
        on_site = sum(item.quantity_centi for item in items) - already_centi
        value_on_site = sum(item.amount_minor for item in items) - already_minor
        ids = ", ".join(item.id for item in items)
        allowance = line_allowance_centi(contract, changes, line_id)
        if on_site <= 0:
            continue
        if allowance is None:
            problems.append(
                f"materials {ids} ({_amount(value_on_site, contract)}) are listed against {line_id}, "
                "which is not a line of the bill"
            )
            lines.extend(item.id for item in items)
            excess_value += value_on_site
            continue
        known = position.line(line_id)
        work = owned[line_id].quantity_to_date_centi if line_id in owned else known.quantity_centi
        if work + on_site <= allowance:
            continue
        excess = min(on_site, work + on_site - allowance)
        value = pro_rata_minor(value_on_site, excess, on_site)
        certified = (
            f" (certified at {_qty(known.quantity_centi)} on certificate {known.certificate})"
            if known.certificate is not None
            else ""
        )
        problems.append(
            f"line {line_id} has {_qty(work)} of work to date{certified} and {_qty(on_site)} of materials on site "
            f"({ids}), {_qty(excess)} beyond the {_qty(allowance)} the line allows: materials worth "
            f"{_amount(value, contract)} it cannot use"
        )
        lines.extend(item.id for item in items)
        compared.append(known.certificate)
        excess_value += value
    return _result(
        MATERIALS_WITHIN_LINE_ALLOWANCE,
        contract,
        problems,
        {"excess_value": excess_value},
        lines,
        passed="work and materials on site stay within each line's allowance",
        compared_with=compared,
    )


CHECKS: Mapping[str, Check] = {
    STATEMENT_FOOTS: statement_foots,
    PREVIOUSLY_CERTIFIED_CARRIED_FORWARD: previously_certified_carried_forward,
    LINES_STATED_CUMULATIVELY: lines_stated_cumulatively,
    QUANTITIES_NEVER_DECREASE_WITHOUT_VARIATION: quantities_never_decrease_without_variation,
    QUANTITY_WITHIN_BILL: quantity_within_bill,
    PERIOD_WORK_AT_RATE_IN_FORCE: period_work_at_rate_in_force,
    SCOPE_BILLED_THROUGH_ONE_PACKAGE: scope_billed_through_one_package,
    VARIATIONS_HAVE_INSTRUCTIONS: variations_have_instructions,
    RETENTION_AT_RATE_WITHIN_CAP: retention_at_rate_within_cap,
    RETENTION_RELEASED_ONCE: retention_released_once,
    RETENTION_RELEASED_AFTER_PRACTICAL_COMPLETION: retention_released_after_practical_completion,
    ADVANCE_AMORTISED_PER_SCHEDULE: advance_amortised_per_schedule,
    ADVANCE_REPAID_WITHIN_ADVANCE: advance_repaid_within_advance,
    MATERIALS_ON_SITE_REVERSED_ON_INCORPORATION: materials_on_site_reversed_on_incorporation,
    CERTIFIED_VARIATIONS_CARRIED_FORWARD: certified_variations_carried_forward,
    MATERIALS_WITHIN_LINE_ALLOWANCE: materials_within_line_allowance,
}
assert tuple(CHECKS) == INVARIANTS, "CHECKS must follow the INVARIANTS order"
