"""Crafted violations: one mutation per invariant, applied to a certificate that passed, so each can be caught.

The seeded fault classes exercise eight invariants; these mutations give every one of the sixteen a planted case,
which is what makes the negative control meaningful (disable any invariant and its planted cases go uncaught).
A mutated certificate is restated so it still adds up, except where adding up is what the mutation breaks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

from countersign.certificates import invariants as inv
from countersign.certificates.model import (
    PRACTICAL_COMPLETION,
    Certificate,
    CertificateLine,
    Contract,
    MaterialsConsumption,
    MaterialsItem,
    PackageTotal,
    RetentionRelease,
    Variation,
)
from countersign.certificates.reconstruction import (
    Position,
    instructed_quantity_changes,
    line_allowance_centi,
    omitted_this_period,
    owned_lines,
)
from countersign.money.units import minor_per_unit


def _one_unit(contract: Contract) -> int:
    """One whole unit of the contract's currency (a pound, a yen, a dinar) in its minor units."""
    return minor_per_unit(contract.currency)


ONE_UNIT_CENTI = 100

Mutation = Callable[[Contract, Position, Certificate], Certificate | None]


def restate_totals(certificate: Certificate) -> Certificate:
    """Recompute every derived total from the parts; retention deducted, advance and previous stay as stated."""
    by_package: dict[str, int] = {}
    for line in certificate.lines:
        by_package[line.package] = by_package.get(line.package, 0) + line.value_to_date_minor
    stated_order = [p.package for p in certificate.packages]
    order = stated_order + sorted(set(by_package) - set(stated_order))
    packages = tuple(PackageTotal(p, by_package[p]) for p in order if p in by_package)
    totals = certificate.totals
    work = sum(by_package.values())
    variations = sum(v.amount_minor for v in certificate.variations)
    materials = sum(m.amount_minor for m in certificate.materials_on_site)
    gross = work + variations + materials
    released = sum(r.amount_minor for r in certificate.retention_releases)
    held = totals.retention_deducted_minor - released
    net = gross - held - totals.advance_repaid_minor
    return replace(
        certificate,
        packages=packages,
        totals=replace(
            totals,
            work_to_date_minor=work,
            variations_to_date_minor=variations,
            materials_on_site_minor=materials,
            gross_minor=gross,
            retention_released_minor=released,
            retention_held_minor=held,
            net_to_date_minor=net,
            amount_due_minor=net - totals.previously_certified_minor,
        ),
    )


def _replace_line(certificate: Certificate, old: CertificateLine, new: CertificateLine) -> Certificate:
    return replace(certificate, lines=tuple(new if line is old else line for line in certificate.lines))


def _break_footing(contract: Contract, position: Position, certificate: Certificate) -> Certificate | None:
    totals = certificate.totals
    return replace(certificate, totals=replace(totals, amount_due_minor=totals.amount_due_minor + _one_unit(contract)))


def _break_carry_forward(contract: Contract, position: Position, certificate: Certificate) -> Certificate | None:
    totals = certificate.totals
    changed = replace(totals, previously_certified_minor=totals.previously_certified_minor - _one_unit(contract))
    return restate_totals(replace(certificate, totals=changed))


def _restate_previous(contract: Contract, position: Position, certificate: Certificate) -> Certificate | None:
    for line in owned_lines(contract, certificate).values():
        if position.line(line.boq_line).value_minor > 0:
            new = replace(
                line,
                previous_value_minor=line.previous_value_minor - _one_unit(contract),
                value_to_date_minor=line.value_to_date_minor - _one_unit(contract),
            )
            return restate_totals(_replace_line(certificate, line, new))
    return None


def _reduce_quantity(contract: Contract, position: Position, certificate: Certificate) -> Certificate | None:
    """A line falls by one unit more than this certificate's omissions on it cover."""
    omitted = omitted_this_period(position, certificate)
    for line in owned_lines(contract, certificate).values():
        known = position.line(line.boq_line)
        fall = omitted.get(line.boq_line, 0) + ONE_UNIT_CENTI
        if known.quantity_centi > fall:
            new = replace(line, quantity_to_date_centi=known.quantity_centi - fall)
            return _replace_line(certificate, line, new)
    return None


def _exceed_bill(contract: Contract, position: Position, certificate: Certificate) -> Certificate | None:
    for line in owned_lines(contract, certificate).values():
        bill = contract.line(line.boq_line)
        if bill is None:
            continue
        instructed = sum(
            v.quantity_change_centi for v in certificate.variations if v.boq_line == line.boq_line and v.instruction_ref
        )
        new = replace(line, quantity_to_date_centi=bill.quantity_centi + instructed + ONE_UNIT_CENTI)
        return _replace_line(certificate, line, new)
    return None


def _misprice_period(contract: Contract, position: Position, certificate: Certificate) -> Certificate | None:
    for line in owned_lines(contract, certificate).values():
        if line.period_quantity_centi > 0:
            new = replace(line, value_to_date_minor=line.value_to_date_minor + _one_unit(contract))
            return restate_totals(_replace_line(certificate, line, new))
    return None


def _move_package(contract: Contract, position: Position, certificate: Certificate) -> Certificate | None:
    if len(contract.packages) < 2:
        return None
    for line in owned_lines(contract, certificate).values():
        other = next(p.id for p in contract.packages if p.id != line.package)
        return restate_totals(_replace_line(certificate, line, replace(line, package=other)))
    return None


def _uninstructed_variation(contract: Contract, position: Position, certificate: Certificate) -> Certificate | None:
    extra = Variation(
        id="V-CRAFTED",
        instruction_ref=None,
        description="Work without an instruction",
        amount_minor=_one_unit(contract),
        boq_line=None,
        quantity_change_centi=0,
    )
    return restate_totals(replace(certificate, variations=(*certificate.variations, extra)))


def _over_cap_retention(contract: Contract, position: Position, certificate: Certificate) -> Certificate | None:
    totals = replace(certificate.totals, retention_deducted_minor=contract.retention.cap_minor + _one_unit(contract))
    return restate_totals(replace(certificate, totals=totals))


def _release_twice(contract: Contract, position: Position, certificate: Certificate) -> Certificate | None:
    if not certificate.retention_releases:
        return None
    first = certificate.retention_releases[0]
    return restate_totals(replace(certificate, retention_releases=(*certificate.retention_releases, first)))


def _release_early(contract: Contract, position: Position, certificate: Certificate) -> Certificate | None:
    completion = contract.practical_completion
    if certificate.retention_releases or (completion is not None and certificate.date >= completion):
        return None
    release = RetentionRelease(event=PRACTICAL_COMPLETION, amount_minor=_one_unit(contract))
    return restate_totals(replace(certificate, retention_releases=(release,)))


def _skip_amortisation(contract: Contract, position: Position, certificate: Certificate) -> Certificate | None:
    totals = certificate.totals
    if totals.advance_repaid_minor == 0:
        return None
    changed = replace(totals, advance_repaid_minor=totals.advance_repaid_minor - _one_unit(contract))
    return restate_totals(replace(certificate, totals=changed))


def _over_repay_advance(contract: Contract, position: Position, certificate: Certificate) -> Certificate | None:
    changed = replace(certificate.totals, advance_repaid_minor=contract.advance.amount_minor + _one_unit(contract))
    return restate_totals(replace(certificate, totals=changed))


def _keep_materials(contract: Contract, position: Position, certificate: Certificate) -> Certificate | None:
    """Under materials-first consumption, an item the work has passed is claimed again; a contract whose work draws on
    other stock first keeps materials until the allowance says otherwise, so there a negative item is planted."""
    owned = owned_lines(contract, certificate)
    if contract.conventions.materials_consumption is MaterialsConsumption.OTHER_STOCK_FIRST:
        for line_id in sorted(owned):
            item = MaterialsItem(
                id="M-CRAFTED",
                boq_line=line_id,
                description="Materials credited back",
                quantity_centi=ONE_UNIT_CENTI,
                amount_minor=-_one_unit(contract),
            )
            return restate_totals(replace(certificate, materials_on_site=(*certificate.materials_on_site, item)))
        return None
    listed = {item.id for item in certificate.materials_on_site}
    for item_id, known in sorted(position.materials.items()):
        line = owned.get(known.boq_line)
        if item_id in listed or line is None or line.quantity_to_date_centi < known.incorporated_at_centi:
            continue
        item = MaterialsItem(
            id=item_id,
            boq_line=known.boq_line,
            description="Materials kept after incorporation",
            quantity_centi=known.quantity_centi,
            amount_minor=_one_unit(contract),
        )
        return restate_totals(replace(certificate, materials_on_site=(*certificate.materials_on_site, item)))
    return None


def _drop_certified_variation(contract: Contract, position: Position, certificate: Certificate) -> Certificate | None:
    listed = [v for v in certificate.variations if v.id in position.certified_variations]
    if not listed:
        return None
    dropped = listed[0]
    kept = tuple(v for v in certificate.variations if v is not dropped)
    return restate_totals(replace(certificate, variations=kept))


def _materials_beyond_line(contract: Contract, position: Position, certificate: Certificate) -> Certificate | None:
    changes = instructed_quantity_changes(position, certificate)
    for line_id, line in sorted(owned_lines(contract, certificate).items()):
        allowance = line_allowance_centi(contract, changes, line_id)
        if allowance is None:
            continue
        on_site = sum(m.quantity_centi for m in certificate.materials_on_site if m.boq_line == line_id)
        beyond = max(ONE_UNIT_CENTI, allowance - line.quantity_to_date_centi - on_site + ONE_UNIT_CENTI)
        item = MaterialsItem(
            id="M-CRAFTED",
            boq_line=line_id,
            description="Materials re-listed beyond what the line allows",
            quantity_centi=beyond,
            amount_minor=_one_unit(contract),
        )
        return restate_totals(replace(certificate, materials_on_site=(*certificate.materials_on_site, item)))
    return None


MUTATIONS: Mapping[str, Mutation] = {
    inv.STATEMENT_FOOTS: _break_footing,
    inv.PREVIOUSLY_CERTIFIED_CARRIED_FORWARD: _break_carry_forward,
    inv.LINES_STATED_CUMULATIVELY: _restate_previous,
    inv.QUANTITIES_NEVER_DECREASE_WITHOUT_VARIATION: _reduce_quantity,
    inv.QUANTITY_WITHIN_BILL: _exceed_bill,
    inv.PERIOD_WORK_AT_RATE_IN_FORCE: _misprice_period,
    inv.SCOPE_BILLED_THROUGH_ONE_PACKAGE: _move_package,
    inv.VARIATIONS_HAVE_INSTRUCTIONS: _uninstructed_variation,
    inv.RETENTION_AT_RATE_WITHIN_CAP: _over_cap_retention,
    inv.RETENTION_RELEASED_ONCE: _release_twice,
    inv.RETENTION_RELEASED_AFTER_PRACTICAL_COMPLETION: _release_early,
    inv.ADVANCE_AMORTISED_PER_SCHEDULE: _skip_amortisation,
    inv.ADVANCE_REPAID_WITHIN_ADVANCE: _over_repay_advance,
    inv.MATERIALS_ON_SITE_REVERSED_ON_INCORPORATION: _keep_materials,
    inv.CERTIFIED_VARIATIONS_CARRIED_FORWARD: _drop_certified_variation,
    inv.MATERIALS_WITHIN_LINE_ALLOWANCE: _materials_beyond_line,
}
assert tuple(MUTATIONS) == inv.INVARIANTS, "one mutation per invariant, in INVARIANTS order"
