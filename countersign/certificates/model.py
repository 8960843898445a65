"""The payment-certificate domain's records: a contract and the cumulative certificates issued under it.

Money is integer minor units (`*_minor`), quantities integer hundredths of a unit (`*_centi`); both cross the
file boundary as decimal strings. `parse_contract` and `parse_certificate` take parsed JSON mappings and raise
`CertificateDataError` naming the offending field.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from datetime import date
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from enum import StrEnum
from itertools import pairwise
from typing import Any, TypeVar

from countersign.money.units import DEFAULT_MINOR_UNITS, minor_units

FORMS = ("CSB", "CSE", "CSI", "CSD", "CSM")
PRACTICAL_COMPLETION = "practical_completion"
DEFECTS_END = "defects_end"
RELEASE_EVENTS = (PRACTICAL_COMPLETION, DEFECTS_END)

QUANTITY_PLACES = 2
"""Quantities are read in hundredths (`*_centi`), whatever the currency."""
_QUANTITY = re.compile(r"^-?\d{1,12}\.\d{2}$")
_FRACTION = re.compile(r"^\d\.\d{1,6}$")
_CURRENCY = re.compile(r"^[A-Z]{3}$")
_PERIOD = re.compile(r"^\d{4}-(0[1-9]|1[0-2])$")


class ValuationRounding(StrEnum):
    """How a line's value to date is rounded (a contract convention)."""

    PER_PERIOD = "per_period"
    """Each period's quantity x the rate in force is rounded, and the periods add up (the default)."""
    CUMULATIVE = "cumulative"
    """Value to date is the cumulative quantity x the rate, rounded once: a period's value may differ by a penny."""
    WHOLE_UNITS = "whole_units"
    """Every figure is valued in whole units of the currency (whole pounds): a line's value to date is its cumulative
    value rounded to the unit, and retention, its release and the advance's repayment are rounded to the unit."""


class MaterialsConsumption(StrEnum):
    """Which stock a line's work is taken to draw on first (a contract convention)."""

    MATERIALS_FIRST = "materials_first"
    """Work done after materials are listed consumes them first: each unit of work reduces them (the default)."""
    OTHER_STOCK_FIRST = "other_stock_first"
    """Work draws on other stock first: materials stay on site until work plus materials reach the line's allowance."""


class ApplicationNumbering(StrEnum):
    """Where a contractor's application (invoice) numbers are unique (a contract convention)."""

    VENDOR = "vendor"
    """One series across all of the contractor's contracts (the default): the same number twice is a re-submission."""
    CONTRACT = "contract"
    """Numbers restart on each contract: the same number on two contracts is two applications."""


@dataclass(frozen=True)
class Conventions:
    """Practices that legitimately vary between contracts, declared in the contract's `conventions` (all optional)."""

    valuation_rounding: ValuationRounding = ValuationRounding.PER_PERIOD
    materials_consumption: MaterialsConsumption = MaterialsConsumption.MATERIALS_FIRST
    application_numbering: ApplicationNumbering = ApplicationNumbering.VENDOR
    declared: frozenset[str] = frozenset()
    """The conventions the contract's own `conventions` block states; the others are read from its documents
    (`countersign.certificates.conventions`). `Conventions.declaring` builds one with the choices it is given
    declared; a plain `Conventions(...)` declares nothing, so its values are only defaults."""

    @classmethod
    def declaring(
        cls,
        *,
        valuation_rounding: ValuationRounding | None = None,
        materials_consumption: MaterialsConsumption | None = None,
        application_numbering: ApplicationNumbering | None = None,
    ) -> Conventions:
        """The conventions a contract states: each choice given is declared, the others take the defaults."""
        choices = {
            "valuation_rounding": valuation_rounding,
            "materials_consumption": materials_consumption,
            "application_numbering": application_numbering,
        }
        given = {key: value for key, value in choices.items() if value is not None}
        return cls(**given, declared=frozenset(given))  # type: ignore[arg-type]


@dataclass(frozen=True)
class PaymentTerms:
    """When a certificate's payment falls due and when the payer's notices must be served, in calendar days.

    The defaults are those of the Scheme for Construction Contracts (England and Wales) Regulations 1998 as amended in
    2011, which apply where a contract is silent: due 7 days after the valuation, final date 17 days after the due
    date, the payment notice within 5 days of the due date, a pay-less notice no later than 7 days before the final
    date (Housing Grants, Construction and Regeneration Act 1996, ss. 110A-111).
    """

    due_date_days: int = 7
    """Days after the certificate's valuation date that payment falls due."""
    final_date_days: int = 17
    """Days after the due date that is the final date for payment."""
    payment_notice_days: int = 5
    """The payer's payment notice is served no later than this many days after the due date."""
    pay_less_notice_days: int = 7
    """A pay-less notice is served no later than this many days before the final date for payment."""
    duplicate_window_days: int | None = None
    """How far apart two submissions may be and still be compared as a re-submission; None derives it from the
    payment cycle (`countersign.certificates.duplicates`)."""


_Choice = TypeVar("_Choice", bound=StrEnum)


class CertificateDataError(ValueError):
    """A contract or certificate mapping is malformed: `record` names it, `field` the offending key."""

    def __init__(self, record: str, field: str, reason: str) -> None:
        self.record = record
        self.field = field
        self.reason = reason
        super().__init__(f"{record}: {field}: {reason}")


@dataclass(frozen=True)
class BoqLine:
    id: str
    package: str
    description: str
    unit: str
    quantity_centi: int
    rate_minor: int


@dataclass(frozen=True)
class RateVersion:
    version: str
    effective_from: date
    rates_minor: Mapping[str, int]
    """BoQ line id -> rate; a version lists only the lines whose rate it sets or supersedes."""


@dataclass(frozen=True)
class PackageScope:
    id: str
    name: str
    scope_hashes: Mapping[str, str]
    """BoQ line id -> scope hash, for every line this package owns."""


@dataclass(frozen=True)
class RetentionTerms:
    rate: Decimal
    cap_minor: int
    release_at_practical_completion: Decimal
    defects_period_months: int


@dataclass(frozen=True)
class AdvanceTerms:
    amount_minor: int
    start_fraction: Decimal
    """Repayment starts once the value of work reaches this fraction of the contract sum."""
    rate: Decimal
    """Repaid per unit of value above the start."""
    repaid_by_fraction: Decimal
    """Fully repaid once the value of work reaches this fraction of the contract sum."""


@dataclass(frozen=True)
class Contract:
    id: str
    form: str
    title: str
    vendor_id: str
    vendor_name: str
    currency: str
    start_period: str
    boq: tuple[BoqLine, ...]
    rate_versions: tuple[RateVersion, ...]
    retention: RetentionTerms
    advance: AdvanceTerms
    packages: tuple[PackageScope, ...]
    practical_completion: date | None
    clause_refs: Mapping[str, str]
    conventions: Conventions = Conventions()
    payment_terms: PaymentTerms = PaymentTerms()

    _lines: Mapping[str, BoqLine] = dataclass_field(init=False, repr=False, compare=False)
    _owners: Mapping[str, tuple[str, str]] = dataclass_field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_lines", {line.id: line for line in self.boq})
        owners = {
            line_id: (package.id, scope_hash)
            for package in self.packages
            for line_id, scope_hash in package.scope_hashes.items()
        }
        object.__setattr__(self, "_owners", owners)

    @property
    def contract_sum_minor(self) -> int:
        """The bill priced at its original rates."""
        return sum(value_of(line.quantity_centi, line.rate_minor) for line in self.boq)

    def line(self, line_id: str) -> BoqLine | None:
        return self._lines.get(line_id)

    def owner_package(self, line_id: str) -> str | None:
        owner = self._owners.get(line_id)
        return None if owner is None else owner[0]

    def scope_hash(self, line_id: str) -> str | None:
        owner = self._owners.get(line_id)
        return None if owner is None else owner[1]

    def rate_in_force(self, line_id: str, on: date) -> tuple[str, int] | None:
        """(version, rate) of the latest version effective on `on` that sets this line's rate."""
        found: tuple[str, int] | None = None
        for version in self.rate_versions:  # ordered by effective date
            if version.effective_from > on:
                break
            if line_id in version.rates_minor:
                found = (version.version, version.rates_minor[line_id])
        return found

    def superseded_rates(self, line_id: str, on: date) -> tuple[tuple[str, int], ...]:
        """Rates for this line that a later version effective on `on` has replaced, newest first."""
        history = [
            (v.version, v.rates_minor[line_id])
            for v in self.rate_versions
            if v.effective_from <= on and line_id in v.rates_minor
        ]
        return tuple(reversed(history[:-1]))


@dataclass(frozen=True)
class CertificateLine:
    boq_line: str
    package: str
    scope_hash: str
    quantity_to_date_centi: int
    value_to_date_minor: int
    previous_quantity_centi: int
    previous_value_minor: int

    @property
    def period_quantity_centi(self) -> int:
        return self.quantity_to_date_centi - self.previous_quantity_centi

    @property
    def period_value_minor(self) -> int:
        return self.value_to_date_minor - self.previous_value_minor


@dataclass(frozen=True)
class PackageTotal:
    package: str
    value_to_date_minor: int


@dataclass(frozen=True)
class Variation:
    id: str
    instruction_ref: str | None
    description: str
    amount_minor: int
    boq_line: str | None
    quantity_change_centi: int
    """A remeasurement instructed against a bill line: + adds to its billed quantity, - omits from it."""
    reverses: str | None = None
    """The id of a variation certified earlier that this one reverses (it needs its own instruction)."""
    limit_minor: int | None = None
    """The instruction's own ceiling, when the document carries one (a quotation accepted up to a sum, a
    not-to-exceed figure): a later valuation of the variation may restate it up to this and no further."""


@dataclass(frozen=True)
class MaterialsItem:
    id: str
    boq_line: str
    description: str
    quantity_centi: int
    amount_minor: int


@dataclass(frozen=True)
class RetentionRelease:
    event: str
    amount_minor: int


@dataclass(frozen=True)
class CertificateTotals:
    work_to_date_minor: int
    variations_to_date_minor: int
    materials_on_site_minor: int
    gross_minor: int
    retention_deducted_minor: int
    retention_released_minor: int
    retention_held_minor: int
    advance_repaid_minor: int
    net_to_date_minor: int
    previously_certified_minor: int
    amount_due_minor: int


@dataclass(frozen=True)
class Certificate:
    id: str
    contract: str
    number: int
    period: str
    date: date
    invoice_number: str
    vendor: str
    description: str
    lines: tuple[CertificateLine, ...]
    packages: tuple[PackageTotal, ...]
    variations: tuple[Variation, ...]
    materials_on_site: tuple[MaterialsItem, ...]
    retention_releases: tuple[RetentionRelease, ...]
    totals: CertificateTotals
    supersedes: str | None = None
    """The id of an earlier certificate this one corrects and replaces (a corrected re-submission, not a duplicate)."""
    sources: Mapping[str, str] = dataclass_field(default_factory=dict)
    """Where each figure came from, when the certificate was read from a spreadsheet or a PDF: a field path such as
    `totals.amount_due` or `lines[3].quantity_to_date` -> "app.xlsx, sheet Summary, row 12"."""


def amount_text(amount: Decimal, currency: str) -> str:
    """An amount as a person reads it in the domain's explanations: `(Decimal("-82213.5"), "GBP")` ->
    `"GBP -82,213.50"`; `(Decimal("1250000"), "JPY")` -> `"JPY 1,250,000"`. The code, then the figure to the
    currency's ISO 4217 minor units, as
    `countersign.money.formatting.format_money` writes
    it in en_GB (a test holds the two together); the domain stays pure, so it does not load Babel's locale data."""
    return f"{currency} {amount:,.{minor_units(currency)}f}"


def value_of(quantity_centi: int, rate_minor: int) -> int:
    """Quantity (hundredths) x rate (minor units), rounded half away from zero to a minor unit."""
    product = quantity_centi * rate_minor
    magnitude = (abs(product) + 50) // 100
    return magnitude if product >= 0 else -magnitude


def fraction_of(amount_minor: int, fraction: Decimal) -> int:
    """amount x fraction rounded half up to a minor unit (exact: Decimal, never float)."""
    return int((Decimal(amount_minor) * fraction).quantize(Decimal(1), rounding=ROUND_HALF_UP))


# --- parsing ---------------------------------------------------------------------------------------------------


def parse_contract(data: object) -> Contract:
    record = "contract"
    mapping = _mapping(data, record, "<root>")
    contract_id = _text(mapping, record, "id")
    record = f"contract {contract_id}"
    form = _text(mapping, record, "form")
    if form not in FORMS:
        raise CertificateDataError(record, "form", f"expected one of {', '.join(FORMS)}, got {form!r}")
    currency = _text(mapping, record, "currency")
    if not _CURRENCY.match(currency):
        raise CertificateDataError(record, "currency", f"expected a 3-letter ISO code, got {currency!r}")
    places = minor_units(currency)
    start_period = _text(mapping, record, "start_period")
    if not _PERIOD.match(start_period):
        raise CertificateDataError(record, "start_period", f"expected YYYY-MM, got {start_period!r}")
    contractor = _mapping(mapping.get("contractor"), record, "contractor")

    boq: list[BoqLine] = []
    for index, item in enumerate(_list(mapping, record, "boq")):
        field = f"boq[{index}]"
        line = _mapping(item, record, field)
        boq.append(
            BoqLine(
                id=_text(line, record, "id", field),
                package=_text(line, record, "package", field),
                description=_text(line, record, "description", field),
                unit=_text(line, record, "unit", field),
                quantity_centi=_quantity(line, record, "quantity", field, minimum=0),
                rate_minor=_amount(line, record, "rate", field, places=places, minimum=0),
            )
        )
    line_ids = {line.id for line in boq}
    if len(line_ids) != len(boq):
        raise CertificateDataError(record, "boq", "line ids must be unique")

    versions: list[RateVersion] = []
    for index, item in enumerate(_list(mapping, record, "rate_versions")):
        field = f"rate_versions[{index}]"
        version = _mapping(item, record, field)
        rates = _mapping(version.get("rates"), record, f"{field}.rates")
        parsed_rates: dict[str, int] = {}
        for line_id in rates:
            if line_id not in line_ids:
                raise CertificateDataError(record, f"{field}.rates.{line_id}", "not a line of the bill")
            parsed_rates[line_id] = _amount(rates, record, line_id, f"{field}.rates", places=places, minimum=0)
        versions.append(
            RateVersion(
                version=_text(version, record, "version", field),
                effective_from=_date(version, record, "effective_from", field),
                rates_minor=parsed_rates,
            )
        )
    if any(b.effective_from < a.effective_from for a, b in pairwise(versions)):
        raise CertificateDataError(record, "rate_versions", "must be ordered by effective_from")

    retention = _mapping(mapping.get("retention"), record, "retention")
    advance = _mapping(mapping.get("advance"), record, "advance")
    packages: list[PackageScope] = []
    owned: set[str] = set()
    for index, item in enumerate(_list(mapping, record, "packages")):
        field = f"packages[{index}]"
        package = _mapping(item, record, field)
        scope = _mapping(package.get("scope"), record, f"{field}.scope")
        hashes: dict[str, str] = {}
        for line_id in scope:
            if line_id not in line_ids:
                raise CertificateDataError(record, f"{field}.scope.{line_id}", "not a line of the bill")
            if line_id in owned:
                raise CertificateDataError(record, f"{field}.scope.{line_id}", "line already owned by a package")
            owned.add(line_id)
            hashes[line_id] = _text(scope, record, line_id, f"{field}.scope")
        packages.append(
            PackageScope(
                id=_text(package, record, "id", field), name=_text(package, record, "name", field), scope_hashes=hashes
            )
        )
    refs = _mapping(mapping.get("clause_refs"), record, "clause_refs")
    clause_refs = {str(topic): _text(refs, record, topic, "clause_refs") for topic in refs}
    completion = mapping.get("practical_completion")
    conventions = _conventions(mapping.get("conventions"), record)
    payment_terms = _payment_terms(mapping.get("payment_terms"), record)
    return Contract(
        id=contract_id,
        form=form,
        title=_text(mapping, record, "title"),
        vendor_id=_text(contractor, record, "vendor_id", "contractor"),
        vendor_name=_text(contractor, record, "name", "contractor"),
        currency=currency,
        start_period=start_period,
        boq=tuple(boq),
        rate_versions=tuple(versions),
        retention=RetentionTerms(
            rate=_fraction(retention, record, "rate", "retention"),
            cap_minor=_amount(retention, record, "cap", "retention", places=places, minimum=0),
            release_at_practical_completion=_fraction(
                retention, record, "release_at_practical_completion", "retention"
            ),
            defects_period_months=_count(retention, record, "defects_period_months", "retention"),
        ),
        advance=AdvanceTerms(
            amount_minor=_amount(advance, record, "amount", "advance", places=places, minimum=0),
            start_fraction=_fraction(advance, record, "start_pct", "advance"),
            rate=_fraction(advance, record, "rate", "advance"),
            repaid_by_fraction=_fraction(advance, record, "repaid_by_pct", "advance"),
        ),
        packages=tuple(packages),
        practical_completion=None if completion is None else _date(mapping, record, "practical_completion"),
        clause_refs=clause_refs,
        conventions=conventions,
        payment_terms=payment_terms,
    )


def _choice(block: Mapping[str, Any], record: str, key: str, parent: str, kind: type[_Choice]) -> _Choice:
    value = block.get(key)
    try:
        if not isinstance(value, str):
            raise ValueError
        return kind(value)
    except ValueError:
        known = ", ".join(member.value for member in kind)
        raise CertificateDataError(record, f"{parent}.{key}", f"expected one of {known}, got {value!r}") from None


def _conventions(value: object, record: str) -> Conventions:
    """The contract's `conventions` block; absent keys take the documented defaults."""
    if value is None:
        return Conventions()
    block = _mapping(value, record, "conventions")
    unknown = sorted(set(block) - {f for f in Conventions.__dataclass_fields__ if f != "declared"})
    if unknown:
        raise CertificateDataError(record, f"conventions.{unknown[0]}", "not a known convention")
    return Conventions.declaring(
        valuation_rounding=_choice(block, record, "valuation_rounding", "conventions", ValuationRounding)
        if "valuation_rounding" in block
        else None,
        materials_consumption=_choice(block, record, "materials_consumption", "conventions", MaterialsConsumption)
        if "materials_consumption" in block
        else None,
        application_numbering=_choice(block, record, "application_numbering", "conventions", ApplicationNumbering)
        if "application_numbering" in block
        else None,
    )


MAX_TERM_DAYS = 366


def _payment_terms(value: object, record: str) -> PaymentTerms:
    """The contract's `payment_terms` block (whole days, 0-366); absent keys take the Scheme's defaults."""
    if value is None:
        return PaymentTerms()
    block = _mapping(value, record, "payment_terms")
    known = set(PaymentTerms.__dataclass_fields__)
    unknown = sorted(set(block) - known)
    if unknown:
        raise CertificateDataError(record, f"payment_terms.{unknown[0]}", "not a known payment term")
    days: dict[str, Any] = {}
    for key in block:
        if key == "duplicate_window_days" and block[key] is None:
            continue
        count = _count(block, record, key, "payment_terms")
        if count > MAX_TERM_DAYS:
            raise CertificateDataError(record, f"payment_terms.{key}", f"expected at most {MAX_TERM_DAYS} days")
        days[key] = count
    terms = PaymentTerms(**days)
    if terms.pay_less_notice_days > terms.final_date_days:
        raise CertificateDataError(
            record, "payment_terms.pay_less_notice_days", "a pay-less notice cannot fall due before the due date"
        )
    return terms


def parse_certificate(data: object, *, currency: str | None = None) -> Certificate:
    """A certificate's record, its money read in `currency`'s minor units (its contract's currency; None: two places,
    a hundredth)."""
    places = DEFAULT_MINOR_UNITS if currency is None else minor_units(currency)
    record = "certificate"
    mapping = _mapping(data, record, "<root>")
    certificate_id = _text(mapping, record, "id")
    record = f"certificate {certificate_id}"
    period = _text(mapping, record, "period")
    if not _PERIOD.match(period):
        raise CertificateDataError(record, "period", f"expected YYYY-MM, got {period!r}")

    lines = []
    for index, item in enumerate(_list(mapping, record, "lines")):
        field = f"lines[{index}]"
        line = _mapping(item, record, field)
        lines.append(
            CertificateLine(
                boq_line=_text(line, record, "boq_line", field),
                package=_text(line, record, "package", field),
                scope_hash=_text(line, record, "scope_hash", field),
                quantity_to_date_centi=_quantity(line, record, "quantity_to_date", field),
                value_to_date_minor=_amount(line, record, "value_to_date", field, places=places),
                previous_quantity_centi=_quantity(line, record, "previous_quantity", field),
                previous_value_minor=_amount(line, record, "previous_value", field, places=places),
            )
        )
    packages = []
    for index, item in enumerate(_list(mapping, record, "packages")):
        field = f"packages[{index}]"
        package = _mapping(item, record, field)
        packages.append(
            PackageTotal(
                package=_text(package, record, "package", field),
                value_to_date_minor=_amount(package, record, "value_to_date", field, places=places),
            )
        )
    variations = []
    for index, item in enumerate(_list(mapping, record, "variations")):
        field = f"variations[{index}]"
        variation = _mapping(item, record, field)
        instruction = variation.get("instruction_ref")
        boq_line = variation.get("boq_line")
        change = variation.get("quantity_change")
        reverses = variation.get("reverses")
        limit = variation.get("limit")
        variations.append(
            Variation(
                id=_text(variation, record, "id", field),
                instruction_ref=None if instruction is None else _text(variation, record, "instruction_ref", field),
                description=_text(variation, record, "description", field),
                amount_minor=_amount(variation, record, "amount", field, places=places),
                boq_line=None if boq_line is None else _text(variation, record, "boq_line", field),
                quantity_change_centi=0 if change is None else _quantity(variation, record, "quantity_change", field),
                reverses=None if reverses is None else _text(variation, record, "reverses", field),
                limit_minor=None
                if limit is None
                else _amount(variation, record, "limit", field, places=places, minimum=0),
            )
        )
    materials = []
    for index, item in enumerate(_list(mapping, record, "materials_on_site")):
        field = f"materials_on_site[{index}]"
        material = _mapping(item, record, field)
        materials.append(
            MaterialsItem(
                id=_text(material, record, "id", field),
                boq_line=_text(material, record, "boq_line", field),
                description=_text(material, record, "description", field),
                quantity_centi=_quantity(material, record, "quantity", field),
                amount_minor=_amount(material, record, "amount", field, places=places),
            )
        )
    releases = []
    for index, item in enumerate(_list(mapping, record, "retention_releases")):
        field = f"retention_releases[{index}]"
        release = _mapping(item, record, field)
        event = _text(release, record, "event", field)
        if event not in RELEASE_EVENTS:
            raise CertificateDataError(record, f"{field}.event", f"expected one of {', '.join(RELEASE_EVENTS)}")
        releases.append(
            RetentionRelease(event=event, amount_minor=_amount(release, record, "amount", field, places=places))
        )
    totals = _mapping(mapping.get("totals"), record, "totals")
    supersedes = mapping.get("supersedes")
    sources = mapping.get("sources")
    source_map: dict[str, str] = {}
    if sources is not None:
        for key in _mapping(sources, record, "sources"):
            source_map[str(key)] = _text(sources, record, key, "sources")
    number = mapping.get("number")
    if isinstance(number, bool) or not isinstance(number, int) or number < 1:
        raise CertificateDataError(record, "number", f"expected a positive integer, got {number!r}")
    return Certificate(
        id=certificate_id,
        contract=_text(mapping, record, "contract"),
        number=number,
        period=period,
        date=_date(mapping, record, "date"),
        invoice_number=_text(mapping, record, "invoice_number"),
        vendor=_text(mapping, record, "vendor"),
        description=_text(mapping, record, "description"),
        lines=tuple(lines),
        packages=tuple(packages),
        variations=tuple(variations),
        materials_on_site=tuple(materials),
        retention_releases=tuple(releases),
        totals=CertificateTotals(
            **{f"{key}_minor": _amount(totals, record, key, "totals", places=places) for key in TOTAL_KEYS},
        ),
        supersedes=None if supersedes is None else _text(mapping, record, "supersedes"),
        sources=source_map,
    )


TOTAL_KEYS = (
    "work_to_date",
    "variations_to_date",
    "materials_on_site",
    "gross",
    "retention_deducted",
    "retention_released",
    "retention_held",
    "advance_repaid",
    "net_to_date",
    "previously_certified",
    "amount_due",
)


def _where(parent: str | None, key: str) -> str:
    return key if parent is None else f"{parent}.{key}"


def _mapping(value: object, record: str, field: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise CertificateDataError(record, field, f"expected a mapping, got {type(value).__name__}")
    return value


def _list(mapping: Mapping[str, Any], record: str, key: str) -> list[Any]:
    value = mapping.get(key)
    if not isinstance(value, list):
        raise CertificateDataError(record, key, f"expected a list, got {type(value).__name__}")
    return value


def _text(mapping: Mapping[str, Any], record: str, key: str, parent: str | None = None) -> str:
    value = mapping.get(key)
    if not isinstance(value, str) or not value.strip():
        raise CertificateDataError(record, _where(parent, key), f"expected a non-empty string, got {value!r}")
    return value


def _count(mapping: Mapping[str, Any], record: str, key: str, parent: str | None = None) -> int:
    value = mapping.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise CertificateDataError(record, _where(parent, key), f"expected a non-negative integer, got {value!r}")
    return value


def _date(mapping: Mapping[str, Any], record: str, key: str, parent: str | None = None) -> date:
    value = mapping.get(key)
    try:
        if not isinstance(value, str):
            raise ValueError
        return date.fromisoformat(value)
    except ValueError:
        raise CertificateDataError(record, _where(parent, key), f"expected an ISO date, got {value!r}") from None


def _decimal_minor(
    mapping: Mapping[str, Any],
    record: str,
    key: str,
    parent: str | None,
    pattern: re.Pattern[str],
    what: str,
    places: int = QUANTITY_PLACES,
) -> int:
    """The figure as an integer count of its `places`-th parts (`"12.50"`, 2 -> 1250; `"1500"`, 0 -> 1500)."""
    value = mapping.get(key)
    if not isinstance(value, str) or not pattern.match(value):
        raise CertificateDataError(record, _where(parent, key), f"expected {what}, got {value!r}")
    return int(Decimal(value).scaleb(places))


def _amount_pattern(places: int) -> re.Pattern[str]:
    """An amount written to exactly `places` decimals (none: no decimal point)."""
    return re.compile(r"^-?\d{1,15}$" if places == 0 else rf"^-?\d{{1,15}}\.\d{{{places}}}$")


def _amount_example(places: int) -> str:
    return "'1250'" if places == 0 else f"'12.{'5'.ljust(places, '0')}'"


def _amount(
    mapping: Mapping[str, Any],
    record: str,
    key: str,
    parent: str | None = None,
    *,
    places: int,
    minimum: int | None = None,
) -> int:
    what = f"a decimal amount with {places} places like {_amount_example(places)}"
    minor = _decimal_minor(mapping, record, key, parent, _amount_pattern(places), what, places)
    if minimum is not None and minor < minimum:
        raise CertificateDataError(record, _where(parent, key), "must not be negative")
    return minor


def _quantity(
    mapping: Mapping[str, Any], record: str, key: str, parent: str | None = None, *, minimum: int | None = None
) -> int:
    centi = _decimal_minor(mapping, record, key, parent, _QUANTITY, "a decimal quantity with 2 places like '12.50'")
    if minimum is not None and centi < minimum:
        raise CertificateDataError(record, _where(parent, key), "must not be negative")
    return centi


def _fraction(mapping: Mapping[str, Any], record: str, key: str, parent: str | None = None) -> Decimal:
    value = mapping.get(key)
    try:
        if not isinstance(value, str) or not _FRACTION.match(value):
            raise InvalidOperation
        fraction = Decimal(value)
    except InvalidOperation:
        raise CertificateDataError(
            record, _where(parent, key), f"expected a fraction between 0 and 1 like '0.05', got {value!r}"
        ) from None
    if fraction > 1:
        raise CertificateDataError(record, _where(parent, key), f"must be at most 1, got {value}")
    return fraction
