"""Contract conventions read from the documents when the contract does not declare them.

Real contracts carry no `conventions` block: whether a firm values in whole pounds, and whether its invoice numbers
restart on each contract, shows only in what it sends. A convention the contract declares is taken as declared;
one it does not is read here from the contract's own history (the figures already certified and the statement
itself), deterministically. Where the documents cannot tell, the documented default stands and `questions` says,
in words, what the approver is asked to confirm at the gate. Nothing here reads a file or calls a model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from countersign.certificates.model import ApplicationNumbering, Certificate, Contract, ValuationRounding
from countersign.certificates.reconstruction import Position
from countersign.money.units import minor_per_unit


def whole_unit_minor(currency: str) -> int:
    """One whole unit of `currency` (a pound, a yen, a dinar) in its minor units: 100, 1, 1000."""
    return minor_per_unit(currency)


def half_unit_minor(currency: str) -> int:
    """How far a figure rounded to the unit may stand from its value to the minor unit (none for a currency with no
    minor unit: its figures are already whole)."""
    return whole_unit_minor(currency) // 2


MIN_WHOLE_FIGURES = 2
"""Non-zero figures, all in whole units, that show a contract is valued to the unit: a contract valued to the penny
writes two whole-pound figures by chance one time in ten thousand."""
_DIGITS = re.compile(r"(\d+)\D*$")


@dataclass(frozen=True)
class ConventionReading:
    """The contract as its checks see it (declared conventions kept, the others read) and what could not be read."""

    contract: Contract
    questions: tuple[str, ...] = ()


def figures_minor(position: Position, certificate: Certificate) -> list[int]:
    """The non-zero money figures the contract's documents have shown so far: each certified line's value to date,
    and this statement's line values, variations, materials, retention deducted and advance repaid."""
    found = [line.value_minor for line in position.lines.values()]
    found += [line.value_to_date_minor for line in certificate.lines]
    found += [variation.amount_minor for variation in certificate.variations]
    found += [item.amount_minor for item in certificate.materials_on_site]
    found += [certificate.totals.retention_deducted_minor, certificate.totals.advance_repaid_minor]
    return [figure for figure in found if figure]


def _unit_words(currency: str) -> str:
    return "whole pounds" if currency == "GBP" else f"whole units of {currency}"


def _minor_words(currency: str) -> str:
    return "penny" if currency == "GBP" else f"minor unit of {currency}"


def read_valuation_rounding(
    contract: Contract, position: Position, certificate: Certificate
) -> tuple[ValuationRounding, str | None]:
    """The rounding the documents show, and a question when they cannot show it. A currency with no minor unit (JPY)
    writes every figure whole, so its figures cannot show it: the declared or default rounding stands, unasked."""
    if "valuation_rounding" in contract.conventions.declared:
        return contract.conventions.valuation_rounding, None
    figures = figures_minor(position, certificate)
    unit = whole_unit_minor(contract.currency)
    if not figures or unit == 1 or any(figure % unit for figure in figures):
        return contract.conventions.valuation_rounding, None
    if len(figures) >= MIN_WHOLE_FIGURES:
        return ValuationRounding.WHOLE_UNITS, None
    words = _unit_words(contract.currency)
    return contract.conventions.valuation_rounding, (
        f"Contract {contract.id} has shown one figure so far, in {words}: too few to tell whether it is valued in "
        f"{words}. Is it? Until that is recorded, its figures are checked to the {_minor_words(contract.currency)}."
    )


def invoice_number_tracks_application(certificate: Certificate) -> bool | None:
    """Whether the invoice number's last run of digits is the application's own number (`INV-003` on application
    3: a series that restarts on each contract); None when the invoice number carries no digits."""
    found = _DIGITS.search(certificate.invoice_number)
    if found is None:
        return None
    return int(found.group(1)) == certificate.number


def read_application_numbering(contract: Contract | None, certificate: Certificate) -> ApplicationNumbering | None:
    """Where the certificate's invoice number is unique: as the contract declares, else read from the number itself
    (it counts the contract's applications: per contract; it does not: one series across the contractor's
    contracts); None when neither can tell (a number without digits)."""
    if contract is not None and "application_numbering" in contract.conventions.declared:
        return contract.conventions.application_numbering
    tracks = invoice_number_tracks_application(certificate)
    if tracks is None:
        return None
    return ApplicationNumbering.CONTRACT if tracks else ApplicationNumbering.VENDOR


def numbering_question(contract: Contract | None, certificate: Certificate) -> str | None:
    if read_application_numbering(contract, certificate) is not None:
        return None
    return (
        f"Certificate {certificate.id}: invoice {certificate.invoice_number} carries no number, so it cannot be told "
        "whether the contractor's invoice numbers restart on each contract. Do they? Until that is recorded, the same "
        "number on another contract is not taken for the same invoice; the same work claimed twice still is."
    )


def read_conventions(contract: Contract, position: Position, certificate: Certificate) -> ConventionReading:
    """`contract` with the conventions its documents show in place of the defaults it did not declare."""
    rounding, rounding_question = read_valuation_rounding(contract, position, certificate)
    numbering = read_application_numbering(contract, certificate)
    conventions = replace(
        contract.conventions,
        valuation_rounding=rounding,
        application_numbering=numbering or contract.conventions.application_numbering,
    )
    questions = tuple(q for q in (rounding_question, numbering_question(contract, certificate)) if q is not None)
    read = contract if conventions == contract.conventions else replace(contract, conventions=conventions)
    return ConventionReading(contract=read, questions=questions)
