"""The sum a quantity surveyor would certify instead of the claimed one, and why the two differ.

`reconstructed_amount_due` rebuilds the valuation from the statement with each over-claim the invariants find taken
out, in a fixed order, on the contract's own terms:

1. the amount due as its own parts add up (a statement that does not foot);
2. previously certified as actually certified (the position's net to date);
3. lines billed through a package that does not own them, or not in the bill, dropped;
4. each line's quantity capped at what the line allows to date, then its period priced at the rate in force (as the
   contract rounds), so a line both over quantity and at the wrong rate is not counted twice;
5. certified variations dropped without a reversal restored, and restated ones put back at their certified figures;
6. variations valued without an instruction dropped (a credit without one is kept: it is not an over-claim);
7. materials kept after the work consumed them reduced (under the contract's consumption order), then materials
   beyond what the line allows beside the corrected work capped;
8. retention at the contract rate within its cap on the corrected base; releases limited to the entitlement;
9. the advance repaid per the schedule on the corrected value of work.

Each step is one `CorrectionItem` per invariant and subject, whose amount is how much less is due because of it
(negative: more is due). The items add up exactly to `difference_minor`, because each is the change in the sum due
that its step makes. A certificate with nothing to correct is reconstructed at its claimed sum with no items.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal

from countersign.certificates import invariants as inv
from countersign.certificates.invariants import advance_schedule_minor, money, retention_entitlement_minor
from countersign.certificates.model import (
    Certificate,
    CertificateLine,
    Contract,
    MaterialsConsumption,
    amount_text,
    fraction_of,
)
from countersign.certificates.reconstruction import (
    Position,
    accepted_period_values,
    consumed_materials,
    instructed_quantity_changes,
    line_allowance_centi,
    period_value_at_rate,
    pro_rata_minor,
    revalued_by_instruction,
    reversed_by_instruction,
)


@dataclass(frozen=True)
class CorrectionItem:
    invariant: str
    """The invariant whose over-claim this removes."""
    description: str
    """What was corrected, in plain words with the amounts and their currency."""
    amount_minor: int
    """How much less is due because of this correction (negative: more is due)."""
    lines: tuple[str, ...]
    clause_ids: tuple[str, ...]


@dataclass(frozen=True)
class Correction:
    currency: str
    claimed_minor: int
    """The certificate's own amount due."""
    reconstructed_minor: int
    """The corrected net to date less what was actually certified before (the position's net to date)."""
    items: tuple[CorrectionItem, ...]

    @property
    def difference_minor(self) -> int:
        """Claimed less reconstructed: the sum of the items."""
        return self.claimed_minor - self.reconstructed_minor


@dataclass
class _MaterialsOnLine:
    quantity_centi: int
    value_minor: int


@dataclass
class _Valuation:
    """The figures of the statement being corrected; `due` is the amount due they imply."""

    lines: dict[int, int]
    """Statement line index -> value to date (a dropped line is removed)."""
    variations: dict[str, int]
    """Variation id -> amount (a dropped variation is removed)."""
    materials: dict[str, _MaterialsOnLine]
    """Bill line -> positive materials on site for it."""
    other_materials_minor: int
    """Negative or zero-quantity materials items, left as stated (not an over-claim)."""
    retention_deducted_minor: int
    retention_released_minor: int
    advance_repaid_minor: int
    previously_certified_minor: int

    def net_minor(self) -> int:
        gross = (
            sum(self.lines.values())
            + sum(self.variations.values())
            + sum(m.value_minor for m in self.materials.values())
            + self.other_materials_minor
        )
        held = self.retention_deducted_minor - self.retention_released_minor
        return gross - held - self.advance_repaid_minor

    def due_minor(self) -> int:
        return self.net_minor() - self.previously_certified_minor

    def work_base_minor(self) -> int:
        return sum(self.lines.values()) + sum(self.variations.values())

    def retention_base_minor(self) -> int:
        return self.work_base_minor() + sum(m.value_minor for m in self.materials.values()) + self.other_materials_minor


@dataclass
class _Ledger:
    contract: Contract
    valuation: _Valuation
    items: list[CorrectionItem] = field(default_factory=list)

    def due_minor(self) -> int:
        return self.valuation.due_minor()

    def record(self, invariant: str, due_before_minor: int, description: str, lines: Iterable[str] = ()) -> None:
        amount = due_before_minor - self.valuation.due_minor()
        if amount == 0:
            return
        topics = inv.CLAUSE_TOPICS[invariant]
        self.items.append(
            CorrectionItem(
                invariant=invariant,
                description=description,
                amount_minor=amount,
                lines=tuple(dict.fromkeys(lines)),
                clause_ids=tuple(self.contract.clause_refs.get(topic, topic) for topic in topics),
            )
        )

    def text(self, minor: int) -> str:
        return amount_text(money(minor, self.contract.currency), self.contract.currency)


def reconstructed_amount_due(contract: Contract, position: Position, certificate: Certificate) -> Correction:
    """The sum due on `certificate` with every over-claim against `position` (everything certified before) removed."""
    totals = certificate.totals
    valuation = _Valuation(
        lines={index: line.value_to_date_minor for index, line in enumerate(certificate.lines)},
        variations={},
        materials={},
        other_materials_minor=0,
        retention_deducted_minor=totals.retention_deducted_minor,
        retention_released_minor=sum(r.amount_minor for r in certificate.retention_releases),
        advance_repaid_minor=totals.advance_repaid_minor,
        previously_certified_minor=totals.previously_certified_minor,
    )
    variation_total: dict[str, int] = {}
    for variation in certificate.variations:
        variation_total[variation.id] = variation_total.get(variation.id, 0) + variation.amount_minor
    valuation.variations = variation_total
    for item in certificate.materials_on_site:
        if item.quantity_centi > 0 and item.amount_minor >= 0:
            on_line = valuation.materials.setdefault(item.boq_line, _MaterialsOnLine(0, 0))
            on_line.quantity_centi += item.quantity_centi
            on_line.value_minor += item.amount_minor
        else:
            valuation.other_materials_minor += item.amount_minor
    ledger = _Ledger(contract, valuation)
    claimed = totals.amount_due_minor

    parts_due = ledger.due_minor()
    if parts_due != claimed:
        topics = inv.CLAUSE_TOPICS[inv.STATEMENT_FOOTS]
        ledger.items.append(
            CorrectionItem(
                invariant=inv.STATEMENT_FOOTS,
                description=f"the amount due is stated as {ledger.text(claimed)} but its parts add to "
                f"{ledger.text(parts_due)}",
                amount_minor=claimed - parts_due,
                lines=(),
                clause_ids=tuple(contract.clause_refs.get(topic, topic) for topic in topics),
            )
        )

    before = ledger.due_minor()
    valuation.previously_certified_minor = position.net_to_date_minor
    source = (
        "nothing was certified before"
        if position.last_certificate is None
        else f"{ledger.text(position.net_to_date_minor)} was certified to date by certificate "
        f"{position.last_certificate}"
    )
    ledger.record(
        inv.PREVIOUSLY_CERTIFIED_CARRIED_FORWARD,
        before,
        f"previously certified is stated as {ledger.text(totals.previously_certified_minor)}; {source}",
    )

    corrected_work = _correct_lines(ledger, contract, position, certificate)
    _correct_variations(ledger, position, certificate)
    _correct_materials(ledger, contract, position, certificate, corrected_work)
    _correct_retention_and_advance(ledger, contract, certificate)

    reconstructed = valuation.net_minor() - position.net_to_date_minor
    assert claimed - sum(item.amount_minor for item in ledger.items) == reconstructed, "items must add up"
    return Correction(
        currency=contract.currency,
        claimed_minor=claimed,
        reconstructed_minor=reconstructed,
        items=tuple(ledger.items),
    )


def _correct_lines(ledger: _Ledger, contract: Contract, position: Position, certificate: Certificate) -> dict[str, int]:
    """Steps 3 and 4; returns the corrected quantity to date of every owned line."""
    valuation = ledger.valuation
    changes = instructed_quantity_changes(position, certificate)
    corrected: dict[str, int] = {}
    for index, line in enumerate(certificate.lines):
        owner = contract.owner_package(line.boq_line)
        before = ledger.due_minor()
        if owner is None:
            del valuation.lines[index]
            ledger.record(
                inv.QUANTITY_WITHIN_BILL,
                before,
                f"line {line.boq_line} is not a line of the bill: its {ledger.text(line.value_to_date_minor)} "
                "to date is left out",
                [line.boq_line],
            )
            continue
        if owner != line.package:
            del valuation.lines[index]
            ledger.record(
                inv.SCOPE_BILLED_THROUGH_ONE_PACKAGE,
                before,
                f"line {line.boq_line} belongs to package {owner}: its billing through package {line.package} "
                f"({ledger.text(line.value_to_date_minor)} to date) is left out",
                [f"{line.package}/{line.boq_line}"],
            )
            continue
        if line.boq_line in corrected:
            continue  # a second statement of the line in its own package: as the invariants, left as stated
        corrected[line.boq_line] = _correct_line(ledger, contract, position, line, index, changes, certificate.date)
    return corrected


def _correct_line(
    ledger: _Ledger,
    contract: Contract,
    position: Position,
    line: CertificateLine,
    index: int,
    changes: dict[str, int],
    on: date,
) -> int:
    valuation = ledger.valuation
    known = position.line(line.boq_line)
    in_force = contract.rate_in_force(line.boq_line, on)
    bill = contract.line(line.boq_line)
    rate = in_force[1] if in_force is not None else 0
    allowance = line_allowance_centi(contract, changes, line.boq_line)
    quantity = line.quantity_to_date_centi
    if allowance is not None and quantity > max(allowance, line.previous_quantity_centi):
        capped = max(allowance, line.previous_quantity_centi)
        priced = rate if in_force is not None else (bill.rate_minor if bill is not None else 0)
        removed = period_value_at_rate(contract, known, line.period_quantity_centi, priced) - period_value_at_rate(
            contract, known, capped - line.previous_quantity_centi, priced
        )
        before = ledger.due_minor()
        valuation.lines[index] -= removed
        ledger.record(
            inv.QUANTITY_WITHIN_BILL,
            before,
            f"line {line.boq_line} is capped at the {_qty(allowance)} it allows to date: the "
            f"{_qty(quantity - capped)} beyond it, worth {ledger.text(removed)}, is left out",
            [line.boq_line],
        )
        quantity = capped
    period_quantity = quantity - line.previous_quantity_centi
    expected = period_value_at_rate(contract, known, period_quantity, rate)
    stated_period = valuation.lines[index] - line.previous_value_minor
    accepted = accepted_period_values(contract, known, period_quantity, rate) if in_force is not None else {0}
    if stated_period not in accepted:
        before = ledger.due_minor()
        valuation.lines[index] = line.previous_value_minor + expected
        where = "with no rate in force" if in_force is None else f"at the rate {ledger.text(rate)} in force"
        ledger.record(
            inv.PERIOD_WORK_AT_RATE_IN_FORCE,
            before,
            f"line {line.boq_line}'s {_qty(period_quantity)} this period is valued {where}: "
            f"{ledger.text(expected)}, not {ledger.text(stated_period)}",
            [line.boq_line],
        )
    return quantity


def _correct_variations(ledger: _Ledger, position: Position, certificate: Certificate) -> None:
    """Steps 5 and 6."""
    valuation = ledger.valuation
    listed = {variation.id: variation for variation in certificate.variations}
    reversals = reversed_by_instruction(certificate)
    for certified in sorted(position.certified_variations.values(), key=lambda v: v.id):
        if certified.id in reversals:
            continue
        stated = listed.get(certified.id)
        before = ledger.due_minor()
        if stated is None:
            valuation.variations[certified.id] = certified.amount_minor
            ledger.record(
                inv.CERTIFIED_VARIATIONS_CARRIED_FORWARD,
                before,
                f"variation {certified.id} ({ledger.text(certified.amount_minor)}) certified on certificate "
                f"{certified.certificate} is restored: no instruction reverses it",
                [certified.id],
            )
            continue
        reinstructed = revalued_by_instruction(stated, certified)
        if not reinstructed and valuation.variations.get(certified.id) != certified.amount_minor:
            stated_amount = valuation.variations[certified.id]
            valuation.variations[certified.id] = certified.amount_minor
            ledger.record(
                inv.CERTIFIED_VARIATIONS_CARRIED_FORWARD,
                before,
                f"variation {certified.id} is put back at the {ledger.text(certified.amount_minor)} certified on "
                f"certificate {certified.certificate}, not the restated {ledger.text(stated_amount)}",
                [certified.id],
            )
    for variation in certificate.variations:
        if variation.id in position.certified_variations or variation.id not in valuation.variations:
            continue
        instructed = bool(variation.instruction_ref and variation.instruction_ref.strip())
        if instructed or variation.amount_minor <= 0:
            continue
        before = ledger.due_minor()
        del valuation.variations[variation.id]
        ledger.record(
            inv.VARIATIONS_HAVE_INSTRUCTIONS,
            before,
            f"variation {variation.id} ({ledger.text(variation.amount_minor)}) has no instruction and is left out",
            [variation.id],
        )


def _correct_materials(
    ledger: _Ledger, contract: Contract, position: Position, certificate: Certificate, work: dict[str, int]
) -> None:
    """Step 7: materials the corrected work has consumed, then materials beyond each line's allowance."""
    valuation = ledger.valuation
    if contract.conventions.materials_consumption is MaterialsConsumption.MATERIALS_FIRST:
        for consumed in consumed_materials(position, certificate, work):
            line_id, excess, value = consumed.boq_line, consumed.excess_centi, consumed.excess_minor
            ids = [item.id for item in consumed.incorporated + consumed.partly]
            on_line = valuation.materials[line_id]
            before = ledger.due_minor()
            on_line.quantity_centi -= excess
            on_line.value_minor -= value
            ledger.record(
                inv.MATERIALS_ON_SITE_REVERSED_ON_INCORPORATION,
                before,
                f"materials on line {line_id} ({', '.join(ids)}) are reduced by the {_qty(excess)} the work since "
                f"has incorporated, worth {ledger.text(value)}",
                ids,
            )
    changes = instructed_quantity_changes(position, certificate)
    for line_id, on_line in sorted(valuation.materials.items()):
        if on_line.quantity_centi <= 0:
            continue
        allowance = line_allowance_centi(contract, changes, line_id)
        done = work.get(line_id, position.line(line_id).quantity_centi)
        room = 0 if allowance is None else max(0, allowance - done)
        if on_line.quantity_centi <= room:
            continue
        excess = on_line.quantity_centi - room
        value = pro_rata_minor(on_line.value_minor, excess, on_line.quantity_centi)
        before = ledger.due_minor()
        on_line.quantity_centi -= excess
        on_line.value_minor -= value
        reason = (
            "it is not a line of the bill"
            if allowance is None
            else f"the line allows {_qty(allowance)} and the work to date is {_qty(done)}"
        )
        ledger.record(
            inv.MATERIALS_WITHIN_LINE_ALLOWANCE,
            before,
            f"materials on line {line_id} are capped: {_qty(excess)} worth {ledger.text(value)} is left out, as "
            f"{reason}",
            [item.id for item in certificate.materials_on_site if item.boq_line == line_id],
        )


def _correct_retention_and_advance(ledger: _Ledger, contract: Contract, certificate: Certificate) -> None:
    """Steps 8 and 9, on the corrected base."""
    valuation = ledger.valuation
    terms = contract.retention
    base = valuation.retention_base_minor()
    expected = min(fraction_of(base, terms.rate), terms.cap_minor)
    before = ledger.due_minor()
    stated_deducted = valuation.retention_deducted_minor
    valuation.retention_deducted_minor = expected
    ledger.record(
        inv.RETENTION_AT_RATE_WITHIN_CAP,
        before,
        f"retention is {terms.rate * 100:g}% of the corrected {ledger.text(base)} within the cap of "
        f"{ledger.text(terms.cap_minor)}: {ledger.text(expected)}, not {ledger.text(stated_deducted)}",
    )
    entitlement = retention_entitlement_minor(contract, expected, certificate.date)
    released = valuation.retention_released_minor
    if released > entitlement:
        completion = contract.practical_completion
        early = completion is None or certificate.date < completion
        name = inv.RETENTION_RELEASED_AFTER_PRACTICAL_COMPLETION if early else inv.RETENTION_RELEASED_ONCE
        before = ledger.due_minor()
        valuation.retention_released_minor = entitlement
        ledger.record(
            name,
            before,
            f"retention released is limited to the {ledger.text(entitlement)} releasable by "
            f"{certificate.date.isoformat()}, not {ledger.text(released)}",
            [f"retention:{r.event}" for r in certificate.retention_releases],
        )
    work_base = valuation.work_base_minor()
    scheduled = advance_schedule_minor(contract, work_base)
    stated_advance = valuation.advance_repaid_minor
    name = (
        inv.ADVANCE_REPAID_WITHIN_ADVANCE
        if stated_advance > contract.advance.amount_minor or stated_advance < 0
        else inv.ADVANCE_AMORTISED_PER_SCHEDULE
    )
    before = ledger.due_minor()
    valuation.advance_repaid_minor = scheduled
    ledger.record(
        name,
        before,
        f"advance repaid to date follows the schedule at the corrected value of work {ledger.text(work_base)}: "
        f"{ledger.text(scheduled)}, not {ledger.text(stated_advance)}",
    )


def _qty(centi: int) -> str:
    return f"{Decimal(centi).scaleb(-2):,.2f}"
