"""The cumulative position of a contract, rebuilt from every certificate certified before the one under test.

A certificate is a statement *to date*; the only independent record of what was paid is the chain of certified
certificates before it. `opening_position` is the position before certificate 1; `advance_position` folds one
certified certificate into it. A certificate held for a violation is not certified, so it never moves the position:
the next certificate is tested against the last certified one (see `certificates.assessment`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from certificates.model import Certificate, CertificateLine, Contract


@dataclass(frozen=True)
class LinePosition:
    quantity_centi: int
    value_minor: int


@dataclass(frozen=True)
class MaterialsPosition:
    boq_line: str
    quantity_centi: int
    line_quantity_when_listed_centi: int
    """The cumulative quantity of its bill line on the first certified certificate that listed the item."""

    @property
    def incorporated_at_centi(self) -> int:
        return self.line_quantity_when_listed_centi + self.quantity_centi


@dataclass(frozen=True)
class Position:
    contract: str
    certified_count: int
    last_certificate: str | None
    net_to_date_minor: int
    lines: Mapping[str, LinePosition]
    variation_ids: frozenset[str]
    materials: Mapping[str, MaterialsPosition]
    retention_released_minor: int
    release_events: tuple[str, ...]
    advance_repaid_minor: int

    def line(self, line_id: str) -> LinePosition:
        return self.lines.get(line_id, _NOTHING)


_NOTHING = LinePosition(quantity_centi=0, value_minor=0)


def opening_position(contract: Contract) -> Position:
    return Position(
        contract=contract.id,
        certified_count=0,
        last_certificate=None,
        net_to_date_minor=0,
        lines={},
        variation_ids=frozenset(),
        materials={},
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


def advance_position(position: Position, contract: Contract, certificate: Certificate) -> Position:
    """The position after `certificate` is certified."""
    owned = owned_lines(contract, certificate)
    lines = dict(position.lines)
    for line_id, line in owned.items():
        lines[line_id] = LinePosition(quantity_centi=line.quantity_to_date_centi, value_minor=line.value_to_date_minor)
    materials: dict[str, MaterialsPosition] = {}
    for item in certificate.materials_on_site:
        known = position.materials.get(item.id)
        if known is not None:
            materials[item.id] = known
        else:
            materials[item.id] = MaterialsPosition(
                boq_line=item.boq_line,
                quantity_centi=item.quantity_centi,
                line_quantity_when_listed_centi=lines.get(item.boq_line, _NOTHING).quantity_centi,
            )
    return Position(
        contract=position.contract,
        certified_count=position.certified_count + 1,
        last_certificate=certificate.id,
        net_to_date_minor=certificate.totals.net_to_date_minor,
        lines=lines,
        variation_ids=position.variation_ids | {v.id for v in certificate.variations},
        materials=materials,
        retention_released_minor=sum(r.amount_minor for r in certificate.retention_releases),
        release_events=tuple(r.event for r in certificate.retention_releases),
        advance_repaid_minor=certificate.totals.advance_repaid_minor,
    )
