"""The cumulative position of a contract, rebuilt from every certificate certified before the one under test.

A certificate is a statement *to date*; the only independent record of what was paid is the chain of certified
certificates before it. `opening_position` is the position before certificate 1; `advance_position` folds one
certified certificate into it. A certificate held for a violation is not certified, so it never moves the position:
the next certificate is tested against the last certified one (see `countersign.certificates.assessment`).

Beside the lines and the sum certified, the position remembers every variation ever certified (with the certificate
that certified it) and, per bill line, the materials on site by quantity, so the invariants can compare a statement
with everything certified before it and name the certificate they compare with.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from countersign.certificates.model import (
    Certificate,
    CertificateLine,
    Contract,
    MaterialsItem,
    ValuationRounding,
    Variation,
)
from countersign.money.units import minor_per_unit


@dataclass(frozen=True)
class LinePosition:
    quantity_centi: int
    value_minor: int
    certificate: str | None = None
    """The certificate that last certified this line's figures (None before any did)."""
    unrounded_value_centiminor: int = 0
    """Value to date before rounding, in hundredths of a minor unit: the sum of each certified period's quantity x
    the rate then in force. Under `ValuationRounding.CUMULATIVE` the value to date is this, rounded once."""


@dataclass(frozen=True)
class CertifiedVariation:
    """A variation as it was certified: the figures every later statement must carry forward or reverse."""

    id: str
    instruction_ref: str | None
    amount_minor: int
    boq_line: str | None
    quantity_change_centi: int
    reverses: str | None
    certificate: str
    """The certificate that certified these figures (the first to list it, or the last to revalue it)."""
    limit_minor: int | None = None
    """The instruction's own ceiling as first certified (`Variation.limit_minor`), if the document carried one."""


@dataclass(frozen=True)
class MaterialsPosition:
    """A materials item on site on the last certified certificate."""

    boq_line: str
    quantity_centi: int
    line_quantity_when_listed_centi: int
    """The cumulative quantity of its bill line on the first certified certificate that listed the item."""
    description: str
    amount_minor: int
    certificate: str
    """The first certified certificate that listed the item."""
    stock_ahead_centi: int = 0
    """The other materials on its line on that certificate: work may draw on them first, so the item is incorporated
    only once the work has passed them too (counting them all errs towards no false hold)."""

    @property
    def incorporated_at_centi(self) -> int:
        return self.line_quantity_when_listed_centi + self.stock_ahead_centi + self.quantity_centi


@dataclass(frozen=True)
class LineMaterials:
    """The materials on site for one bill line on the last certified certificate (none, once it lists none)."""

    boq_line: str
    quantity_centi: int
    value_minor: int
    line_quantity_centi: int
    """The line's certified work to date on that certificate."""
    certificate: str


@dataclass(frozen=True)
class Position:
    contract: str
    certified_count: int
    last_certificate: str | None
    net_to_date_minor: int
    """What was actually certified to date: "previously certified" for the next certificate."""
    lines: Mapping[str, LinePosition]
    certified_variations: Mapping[str, CertifiedVariation]
    materials: Mapping[str, MaterialsPosition]
    """Materials items on site on the last certified certificate, by id."""
    materials_by_line: Mapping[str, LineMaterials]
    """Per bill line that ever had materials on site, those on site on the last certified certificate."""
    retention_released_minor: int
    release_events: tuple[str, ...]
    advance_repaid_minor: int

    def line(self, line_id: str) -> LinePosition:
        return self.lines.get(line_id, _NOTHING)

    @property
    def variation_ids(self) -> frozenset[str]:
        return frozenset(self.certified_variations)


_NOTHING = LinePosition(quantity_centi=0, value_minor=0)


def opening_position(contract: Contract) -> Position:
    return Position(
        contract=contract.id,
        certified_count=0,
        last_certificate=None,
        net_to_date_minor=0,
        lines={},
        certified_variations={},
        materials={},
        materials_by_line={},
        retention_released_minor=0,
        release_events=(),
        advance_repaid_minor=0,
    )


def owned_lines(contract: Contract, certificate: Certificate) -> dict[str, CertificateLine]:
    """The certificate's lines billed through the package that owns them, first statement per bill line.

    A line billed through any other package is a second billing of its scope (`scope_billed_through_one_package`)
    and takes no part in the line position.
    """
    owned: dict[str, CertificateLine] = {}
    for line in certificate.lines:
        if contract.owner_package(line.boq_line) == line.package and line.boq_line not in owned:
            owned[line.boq_line] = line
    return owned


def rounded_centiminor(value_centiminor: int) -> int:
    """Hundredths of a minor unit rounded half away from zero to a minor unit (as `model.value_of` rounds)."""
    magnitude = (abs(value_centiminor) + 50) // 100
    return magnitude if value_centiminor >= 0 else -magnitude


def period_value_at_rate(contract: Contract, known: LinePosition, period_quantity_centi: int, rate_minor: int) -> int:
    """The value of a period's quantity at `rate_minor`, rounded as the contract's convention says.

    PER_PERIOD rounds the period's own quantity x rate. CUMULATIVE rounds the value to date once, so the period's
    value is the rounded new value to date less the rounded value to date certified before (it may differ from the
    period's own product by a penny).
    """
    if contract.conventions.valuation_rounding is ValuationRounding.CUMULATIVE:
        before = known.unrounded_value_centiminor
        return rounded_centiminor(before + period_quantity_centi * rate_minor) - rounded_centiminor(before)
    return rounded_centiminor(period_quantity_centi * rate_minor)


def accepted_period_values(contract: Contract, known: LinePosition, period_quantity_centi: int, rate: int) -> set[int]:
    """The period values that price `period_quantity_centi` at `rate`. Under PER_PERIOD rounding, the period's own
    product rounded. Under CUMULATIVE, the value to date rounded once (which may differ by a penny) and, since a
    contract that rounds cumulatively still prices each period at that rate, the period's own product rounded too."""
    accepted = {rounded_centiminor(period_quantity_centi * rate)}
    if contract.conventions.valuation_rounding is ValuationRounding.CUMULATIVE:
        accepted.add(period_value_at_rate(contract, known, period_quantity_centi, rate))
    if contract.conventions.valuation_rounding is ValuationRounding.WHOLE_UNITS:
        # the value to date at the rates in force rounded to the unit (from the penny figure, or from the exact one)
        exact = known.unrounded_value_centiminor + period_quantity_centi * rate
        to_date_minor = rounded_centiminor(exact)
        for whole in (_to_unit(to_date_minor, contract.currency), _to_unit_from_centiminor(exact, contract.currency)):
            accepted.add(whole - known.value_minor)
    return accepted


def _to_unit(minor: int, currency: str) -> int:
    """Minor units rounded half away from zero to a whole unit of `currency` (a pound; for JPY the yen itself)."""
    unit = minor_per_unit(currency)
    magnitude = (abs(minor) + unit // 2) // unit * unit
    return magnitude if minor >= 0 else -magnitude


def _to_unit_from_centiminor(centiminor: int, currency: str) -> int:
    """Hundredths of a minor unit rounded once, half away from zero, to a whole unit of `currency`."""
    unit = minor_per_unit(currency)
    magnitude = (abs(centiminor) + 50 * unit) // (100 * unit) * unit
    return magnitude if centiminor >= 0 else -magnitude


def standing_variations(position: Position, certificate: Certificate) -> tuple[Variation | CertifiedVariation, ...]:
    """The variations that stand on this statement. A certified variation stands at its certified figures until an
    instruction reverses it or a new instruction re-values it: left off the statement without a reversal, or restated
    under its old instruction, it still stands as certified. Every other listed variation stands as listed."""
    reversed_ids = reversed_by_instruction(certificate)
    kept: list[Variation | CertifiedVariation] = []
    for variation in certificate.variations:
        certified = position.certified_variations.get(variation.id)
        if certified is None or revalued_by_instruction(variation, certified):
            kept.append(variation)
        else:
            kept.append(variation if revaluation_problem(variation, certified) is None else certified)
    listed_ids = {v.id for v in certificate.variations}
    for certified in position.certified_variations.values():
        if certified.id not in listed_ids and certified.id not in reversed_ids:
            kept.append(certified)
    return tuple(kept)


def _known_limit(earlier: CertifiedVariation | None, stated: Variation) -> int | None:
    """The lower of the limits known for a variation: a restatement cannot raise its instruction's ceiling."""
    known = (None if earlier is None else earlier.limit_minor, stated.limit_minor)
    limits = [limit for limit in known if limit is not None]
    return min(limits) if limits else None


def revaluation_problem(stated: Variation, certified: CertifiedVariation) -> str | None:
    """Why a certified variation restated at other figures under its own instruction is not a revaluation, or None
    when it is one. Under JCT and NEC a variation is valued as the work proceeds (provisional to agreed, more of it
    done), so a new sum alone needs no new instruction. What the instruction itself fixes does: the bill line and
    the quantity it adds or omits. So a restatement is held where it moves the variation to another line, changes
    its instructed quantity, reverses the sign of its sum, takes it to or from nil, or exceeds the instruction's own
    limit (the lower of the limits its certified and its stated document carry)."""
    if stated.boq_line != certified.boq_line:
        return "moves it to another bill line"
    if stated.quantity_change_centi != certified.quantity_change_centi:
        return "changes the quantity its instruction adds or omits"
    if _sign(stated.amount_minor) != _sign(certified.amount_minor):
        return "reverses its sign" if stated.amount_minor and certified.amount_minor else "changes it to or from nil"
    limits = [v for v in (certified.limit_minor, stated.limit_minor) if v is not None]
    if limits and abs(stated.amount_minor) > min(limits):
        return "exceeds the instruction's limit"
    return None


def _sign(value: int) -> int:
    return (value > 0) - (value < 0)


def revalued_by_instruction(stated: Variation, certified: CertifiedVariation) -> bool:
    """A certified variation stated under a new instruction reference: the instruction that re-values it."""
    return bool(stated.instruction_ref and stated.instruction_ref.strip()) and (
        stated.instruction_ref != certified.instruction_ref
    )


def reversed_by_instruction(certificate: Certificate) -> dict[str, str]:
    """Variation id -> the id of a listed variation with an instruction that reverses it."""
    return {
        v.reverses: v.id
        for v in certificate.variations
        if v.reverses is not None and v.instruction_ref is not None and v.instruction_ref.strip()
    }


def omitted_this_period(position: Position, certificate: Certificate) -> dict[str, int]:
    """Bill line -> how far its quantity may fall on this statement: omissions first listed here, plus the additions
    certified before that this statement reverses by instruction and leaves off (they no longer stand)."""
    omitted: dict[str, int] = {}
    for variation in certificate.variations:
        if variation.boq_line and variation.quantity_change_centi < 0 and variation.id not in position.variation_ids:
            omitted[variation.boq_line] = omitted.get(variation.boq_line, 0) - variation.quantity_change_centi
    listed = {variation.id for variation in certificate.variations}
    for reversed_id in reversed_by_instruction(certificate):
        certified = position.certified_variations.get(reversed_id)
        if certified and certified.boq_line and certified.quantity_change_centi > 0 and reversed_id not in listed:
            omitted[certified.boq_line] = omitted.get(certified.boq_line, 0) + certified.quantity_change_centi
    return omitted


def instructed_quantity_changes(position: Position, certificate: Certificate) -> dict[str, int]:
    """Bill line -> the quantity change instructed to date: standing variations with an instruction."""
    changes: dict[str, int] = {}
    for variation in standing_variations(position, certificate):
        if variation.boq_line and variation.instruction_ref and variation.instruction_ref.strip():
            changes[variation.boq_line] = changes.get(variation.boq_line, 0) + variation.quantity_change_centi
    return changes


def line_allowance_centi(contract: Contract, changes: Mapping[str, int], line_id: str) -> int | None:
    """What a bill line allows to date: its billed quantity plus instructed changes (None if not a line of the bill)."""
    bill = contract.line(line_id)
    return None if bill is None else bill.quantity_centi + changes.get(line_id, 0)


def pro_rata_minor(amount_minor: int, part_centi: int, whole_centi: int) -> int:
    """`amount_minor` x part / whole, rounded half up to a minor unit (exact integers; the whole amount if whole is
    not positive)."""
    if whole_centi <= 0:
        return amount_minor
    return (2 * amount_minor * part_centi + whole_centi) // (2 * whole_centi)


@dataclass(frozen=True)
class ConsumedMaterials:
    """Carried materials on one bill line that the work to date has incorporated (materials-first consumption)."""

    boq_line: str
    incorporated: tuple[MaterialsItem, ...]
    """The line's one carried item, when the work has passed it since it was first listed: reversed in full."""
    partly: tuple[MaterialsItem, ...]
    """The other carried items on the line."""
    partly_excess_centi: int
    """How much of `partly` the work since the last certified certificate has consumed beyond what they dropped."""
    partly_excess_minor: int
    """Its value, pro rata of the partly consumed items' amounts."""
    on_site_before: LineMaterials | None
    """The line's materials on the last certified certificate."""
    work_since_centi: int
    remaining_centi: int
    """What may still be on site of those materials."""

    @property
    def excess_centi(self) -> int:
        return sum(item.quantity_centi for item in self.incorporated) + self.partly_excess_centi

    @property
    def excess_minor(self) -> int:
        return sum(item.amount_minor for item in self.incorporated) + self.partly_excess_minor


def consumed_materials(
    position: Position, certificate: Certificate, work_centi: Mapping[str, int]
) -> tuple[ConsumedMaterials, ...]:
    """Per bill line with carried materials (ids the last certified certificate listed), what the work to date
    (`work_centi`: bill line -> quantity to date; a line not in it has done no work since) has consumed of them, when
    work consumes materials first. Lines with nothing consumed are left out."""
    carried: dict[str, list[MaterialsItem]] = {}
    for item in certificate.materials_on_site:
        if item.id in position.materials and item.quantity_centi >= 0 and item.amount_minor >= 0:
            carried.setdefault(item.boq_line, []).append(item)
    found: list[ConsumedMaterials] = []
    for line_id, items in sorted(carried.items()):
        done = work_centi.get(line_id, position.line(line_id).quantity_centi)
        # An item alone on its line is incorporated once the work passes it; among several, which the work drew on
        # is not known, so only their total is bounded (below).
        sole = items[0] if len(items) == 1 else None
        incorporated = (sole,) if sole and done >= position.materials[sole.id].incorporated_at_centi else ()
        partly = tuple(item for item in items if item not in incorporated)
        before = position.materials_by_line.get(line_id)
        since = 0 if before is None else max(0, done - before.line_quantity_centi)
        remaining = 0 if before is None else max(0, before.quantity_centi - since)
        extra = 0
        extra_minor = 0
        if before is not None and partly:
            claimed = sum(item.quantity_centi for item in items)
            extra = max(0, max(0, claimed - remaining) - sum(item.quantity_centi for item in incorporated))
            whole = sum(item.quantity_centi for item in partly)
            extra = min(extra, whole)
            extra_minor = pro_rata_minor(sum(item.amount_minor for item in partly), extra, whole) if extra else 0
        if incorporated or extra:
            found.append(ConsumedMaterials(line_id, incorporated, partly, extra, extra_minor, before, since, remaining))
    return tuple(found)


def advance_position(
    position: Position,
    contract: Contract,
    certificate: Certificate,
    *,
    certified_amount_minor: int | None = None,
) -> Position:
    """The position after `certificate` is certified.

    `certified_amount_minor` is the sum actually certified for it (the reconstructed sum, when a person certified
    that instead of the claim); by default the certificate's own amount due. The position's net to date is the sum of
    what was certified, so "previously certified" for the next certificate is what was certified, not what was
    claimed.
    """
    owned = owned_lines(contract, certificate)
    lines = dict(position.lines)
    for line_id, line in owned.items():
        known = position.line(line_id)
        in_force = contract.rate_in_force(line_id, certificate.date)
        rate = 0 if in_force is None else in_force[1]
        period = line.quantity_to_date_centi - known.quantity_centi
        lines[line_id] = LinePosition(
            quantity_centi=line.quantity_to_date_centi,
            value_minor=line.value_to_date_minor,
            certificate=certificate.id,
            unrounded_value_centiminor=known.unrounded_value_centiminor + period * rate,
        )
    variations = dict(position.certified_variations)
    for variation in certificate.variations:
        earlier = variations.get(variation.id)
        figures = (variation.amount_minor, variation.quantity_change_centi, variation.boq_line)
        if earlier is None or figures != (earlier.amount_minor, earlier.quantity_change_centi, earlier.boq_line):
            # first certified, or revalued on a certificate that passed: the figures later statements carry forward
            variations[variation.id] = CertifiedVariation(
                id=variation.id,
                instruction_ref=variation.instruction_ref,
                amount_minor=variation.amount_minor,
                boq_line=variation.boq_line,
                quantity_change_centi=variation.quantity_change_centi,
                reverses=variation.reverses,
                certificate=certificate.id,
                limit_minor=_known_limit(earlier, variation),
            )
    materials: dict[str, MaterialsPosition] = {}
    for item in certificate.materials_on_site:
        known_item = position.materials.get(item.id)
        if known_item is not None:
            materials[item.id] = known_item
        else:
            materials[item.id] = MaterialsPosition(
                boq_line=item.boq_line,
                quantity_centi=item.quantity_centi,
                line_quantity_when_listed_centi=lines.get(item.boq_line, _NOTHING).quantity_centi,
                description=item.description,
                amount_minor=item.amount_minor,
                certificate=certificate.id,
                stock_ahead_centi=sum(
                    other.quantity_centi
                    for other in certificate.materials_on_site
                    if other.boq_line == item.boq_line and other.id != item.id
                ),
            )
    materials_by_line = dict(position.materials_by_line)
    for line_id in sorted({item.boq_line for item in certificate.materials_on_site} | set(materials_by_line)):
        on_line = [item for item in certificate.materials_on_site if item.boq_line == line_id]
        materials_by_line[line_id] = LineMaterials(
            boq_line=line_id,
            quantity_centi=sum(item.quantity_centi for item in on_line),
            value_minor=sum(item.amount_minor for item in on_line),
            line_quantity_centi=lines.get(line_id, _NOTHING).quantity_centi,
            certificate=certificate.id,
        )
    certified = certificate.totals.amount_due_minor if certified_amount_minor is None else certified_amount_minor
    return Position(
        contract=position.contract,
        certified_count=position.certified_count + 1,
        last_certificate=certificate.id,
        net_to_date_minor=position.net_to_date_minor + certified,
        lines=lines,
        certified_variations=variations,
        materials=materials,
        materials_by_line=materials_by_line,
        retention_released_minor=sum(r.amount_minor for r in certificate.retention_releases),
        release_events=tuple(r.event for r in certificate.retention_releases),
        advance_repaid_minor=certificate.totals.advance_repaid_minor,
    )
