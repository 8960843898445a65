"""generate_third_style: certificates written the way another firm writes them, for the certificate eval.

A third generator, written before the rules it measures were changed and from how interim valuations are written
under JCT and NEC contracts, not from the checks. What sets it apart from the first two styles:

- contracts carry no `conventions` block: a firm's practice is only visible in its documents;
- JCT contracts (form CSB) describe a "gross valuation"; NEC contracts (form CSE) an assessment of the "price for
  work done to date", with compensation events (`CE-001`) under project manager's instructions (`PMI 001`);
- application (invoice) numbers restart on each contract for half the firms (`INV-001` on every contract) and run
  in one series across the firm's contracts for the other half (`HAR/0412`);
- a third of contracts are valued in whole pounds: each line's value to date is its cumulative quantity at the rates
  in force rounded to the pound, and retention, its release and the advance's repayment are rounded to the pound;
- variations are valued as work proceeds: a quoted variation is certified provisionally and later restated at the
  agreed figure under the same instruction (never above the quotation, carried as `limit`); dayworks grow month by
  month; an omission credit may be re-measured;
- half the retention is released at practical completion and the balance at the end of the defects period, listed
  on every later certificate;
- materials on site are drawn down by the line's work and leave when it has used them;
- the JSON records are written with their keys in another order.

Planted errors: the eleven classes the eval knows, plus `variation_revalued_beyond_limit` (a quoted variation
restated above its quotation) and `variation_sign_reversed` (an addition restated as a credit, or the reverse), each
held by the certifier, sometimes followed by a corrected re-submission that names it in `supersedes`. Duplicates: the
same application sent again, and the same application re-sent under a fresh number. Ground truth lists `faults`,
`duplicates` and `tricky` legitimate certificates a correct checker must neither flag nor hold.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass, field, replace
from datetime import date, timedelta
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

from countersign.synthetic.construction_profile import MAX_MONTHS, MIN_MONTHS, ConstructionProfile
from countersign.synthetic.ground_truth import GROUND_TRUTH_FILE
from countersign.synthetic.money import format_minor
from countersign.synthetic.profile import ProfileError

STYLE = "third"
CONTRACTS_FILE = "contracts.json"
CERTIFICATES_FILE = "certificates.jsonl"
CONTRACTS_SCHEMA = "countersign.construction-contracts/1"
GROUND_TRUTH_SCHEMA = "countersign.construction-ground-truth/2"

QUANTITY_BEYOND_BILL = "quantity_beyond_bill"
SUPERSEDED_RATE = "superseded_rate"
RETENTION_RELEASED_TWICE = "retention_released_twice"
SCOPE_IN_TWO_PACKAGES = "scope_in_two_packages"
MIXED_BASIS_STATEMENT = "mixed_basis_statement"
ADVANCE_NOT_AMORTISED = "advance_not_amortised"
MATERIALS_NOT_REVERSED = "materials_not_reversed"
ARITHMETIC_NOT_FOOTING = "arithmetic_not_footing"
VARIATION_DROPPED = "variation_dropped"
MATERIALS_PARTLY_INCORPORATED_KEPT = "materials_partly_incorporated_kept"
MATERIALS_RELISTED = "materials_relisted"
VARIATION_REVALUED_BEYOND_LIMIT = "variation_revalued_beyond_limit"
VARIATION_SIGN_REVERSED = "variation_sign_reversed"
FAULT_CLASSES: tuple[str, ...] = (
    QUANTITY_BEYOND_BILL,
    SUPERSEDED_RATE,
    RETENTION_RELEASED_TWICE,
    SCOPE_IN_TWO_PACKAGES,
    MIXED_BASIS_STATEMENT,
    ADVANCE_NOT_AMORTISED,
    MATERIALS_NOT_REVERSED,
    ARITHMETIC_NOT_FOOTING,
    VARIATION_DROPPED,
    MATERIALS_PARTLY_INCORPORATED_KEPT,
    MATERIALS_RELISTED,
    VARIATION_REVALUED_BEYOND_LIMIT,
    VARIATION_SIGN_REVERSED,
)

DUPLICATE_SUBMISSION = "duplicate_submission"
RESENT_SAME_NUMBER = "resent_same_number"
RESENT_RENUMBERED = "resent_renumbered"
DUPLICATE_KINDS: tuple[str, ...] = (RESENT_SAME_NUMBER, RESENT_RENUMBERED)

VARIATION_AGREED_WITHIN_QUOTATION = "variation_agreed_within_quotation"
VARIATION_VALUED_AS_WORK_PROCEEDS = "variation_valued_as_work_proceeds"
OMISSION_REMEASURED = "omission_remeasured"
INVOICE_NUMBER_ON_ANOTHER_CONTRACT = "invoice_number_on_another_contract"
VALUED_IN_WHOLE_POUNDS = "valued_in_whole_pounds"
RETENTION_RELEASED_AT_COMPLETION = "retention_released_at_practical_completion"
RETENTION_BALANCE_RELEASED = "retention_balance_released"
RATE_REVISED = "rate_revised"
MATERIALS_DRAWN_DOWN = "materials_drawn_down"
CORRECTED_RESUBMISSION = "corrected_resubmission"
TRICKY_KINDS: tuple[str, ...] = (
    VARIATION_AGREED_WITHIN_QUOTATION,
    VARIATION_VALUED_AS_WORK_PROCEEDS,
    OMISSION_REMEASURED,
    INVOICE_NUMBER_ON_ANOTHER_CONTRACT,
    VALUED_IN_WHOLE_POUNDS,
    RETENTION_RELEASED_AT_COMPLETION,
    RETENTION_BALANCE_RELEASED,
    RATE_REVISED,
    MATERIALS_DRAWN_DOWN,
    CORRECTED_RESUBMISSION,
)

PRACTICAL_COMPLETION = "practical_completion"
DEFECTS_END = "defects_end"
JCT = "CSB"
NEC = "CSE"
CORRECTION_SHARE = 0.4
INVOICE_REUSE_DAYS = 120
"""A per-contract invoice number that another of the firm's contracts used this many days before is listed tricky."""

_FIRMS = (
    ("Harcourt Building", "HAR"),
    ("Pennine Civils", "PEN"),
    ("Tamar Construction", "TAM"),
    ("Ouse Valley Contractors", "OVC"),
    ("Greystone Groundworks", "GRY"),
    ("Medway Interiors", "MED"),
    ("Calder Mechanical", "CAL"),
    ("Brecon Roofing", "BRE"),
    ("Kestrel Steel Frames", "KES"),
    ("Solway Electrical", "SOL"),
)
_WORKS = (
    ("Excavation", "m3", 1200, 4500),
    ("Concrete foundations", "m3", 9000, 16000),
    ("Blockwork", "m2", 3500, 7500),
    ("Steel frame", "t", 180000, 260000),
    ("Roof coverings", "m2", 4500, 9800),
    ("First fix electrical", "pt", 2500, 6500),
    ("Plastering", "m2", 1800, 3200),
    ("Drainage runs", "m", 6000, 14000),
    ("Screeds", "m2", 1500, 2800),
    ("Windows", "nr", 45000, 98000),
    ("Ductwork", "m", 5500, 12500),
    ("Kerbs", "m", 2200, 4800),
)
_SCHEMES = ("Riverside School", "Mill Lane Depot", "Quarry Road Homes", "Northgate Clinic", "Harbour Offices")
_PACKAGES = (("SUB", "Substructure"), ("SUP", "Superstructure"), ("FIN", "Finishes and services"))
_QUOTED = ("Additional drainage to car park", "Upgraded fire doors", "Extra ducting to plant room", "New ramp")
_DAYWORKS = ("Dayworks: temporary protection", "Dayworks: clearing obstructions", "Attendance on statutory undertaker")
_OMISSIONS = ("Omit feature paving", "Omit external canopy", "Omit second lift car")


@dataclass(frozen=True)
class ThirdStyleManifest:
    out_dir: Path
    profile: str
    seed: int
    contracts: int
    months: int
    applications: int
    faults: int
    duplicates: int
    tricky: int
    files: dict[str, str]


# --- money -------------------------------------------------------------------------------------------------------


def _pence(product: int) -> int:
    """quantity (hundredths) x rate (pence) -> pence, half away from zero."""
    magnitude = (abs(product) + 50) // 100
    return magnitude if product >= 0 else -magnitude


def _pounds(minor: int) -> int:
    """Pence rounded to whole pounds, half away from zero."""
    magnitude = (abs(minor) + 50) // 100 * 100
    return magnitude if minor >= 0 else -magnitude


def _share(amount: int, fraction: Decimal, whole_pounds: bool) -> int:
    exact = (Decimal(amount) * fraction).quantize(Decimal(1), rounding=ROUND_HALF_UP)
    return _pounds(int(exact)) if whole_pounds else int(exact)


# --- the contract ------------------------------------------------------------------------------------------------


@dataclass
class _Line:
    id: str
    package: str
    description: str
    unit: str
    bill: int
    rate: int
    scope_hash: str
    start: int
    length: int


@dataclass
class _Instruction:
    variation: str
    reference: str
    kind: str  # quoted | dayworks | omission
    description: str
    issued: int
    amounts: dict[int, int]
    """Month -> the figure the variation is valued at from that month on."""
    limit: int | None = None

    def value(self, month: int) -> int | None:
        known = [m for m in self.amounts if m <= month]
        return None if not known else self.amounts[max(known)]


@dataclass
class _Delivery:
    id: str
    line: str
    month: int
    quantity: int
    rate: int


@dataclass
class _Firm:
    name: str
    code: str
    per_contract: bool


@dataclass
class _Site:
    id: str
    form: str
    title: str
    firm: _Firm
    start: date
    whole_pounds: bool
    lines: list[_Line]
    revisions: list[tuple[str, date, dict[str, int]]]
    retention_rate: Decimal
    retention_cap: int
    release_share: Decimal
    defects_months: int
    completion_month: int
    advance: int
    advance_start: Decimal
    advance_rate: Decimal
    advance_repaid_by: Decimal
    instructions: list[_Instruction] = field(default_factory=list)
    deliveries: list[_Delivery] = field(default_factory=list)

    @property
    def contract_sum(self) -> int:
        return sum(_pence(line.bill * line.rate) for line in self.lines)

    def valuation_date(self, month: int) -> date:
        first = _add_months(self.start, month)
        return first.replace(day=25 if self.form == JCT else 28)

    @property
    def completion(self) -> date:
        return _add_months(self.start, self.completion_month).replace(day=15)

    def rate_on(self, line: _Line, on: date) -> int:
        rate = line.rate
        for _version, effective, rates in self.revisions:
            if effective <= on and line.id in rates:
                rate = rates[line.id]
        return rate

    def superseded_on(self, line: _Line, on: date) -> int | None:
        history = [line.rate] + [r[line.id] for _v, e, r in self.revisions if e <= on and line.id in r]
        return history[-2] if len(history) > 1 else None

    def work(self, line: _Line, month: int) -> int:
        if month < line.start:
            return 0
        x = Decimal(min(1, (month - line.start + 1) / line.length))
        fraction = x * x * (3 - 2 * x)
        return int((Decimal(line.bill) * fraction).quantize(Decimal(1), rounding=ROUND_HALF_UP))


def _add_months(day: date, months: int) -> date:
    index = day.year * 12 + day.month - 1 + months
    year, month = divmod(index, 12)
    return date(year, month + 1, 1)


def _hash(*parts: object) -> str:
    return hashlib.sha256("/".join(str(p) for p in parts).encode()).hexdigest()[:16]


def _plan(rng: random.Random, n: int, profile: ConstructionProfile, firm: _Firm, seed: int) -> _Site:
    months = profile.months
    form = rng.choice((JCT, NEC))
    whole = rng.random() < 1 / 3
    year, month = (int(x) for x in profile.start_period.split("-"))
    start = _add_months(date(year, month, 1), rng.randrange(0, 3))
    count = rng.randint(profile.min_boq_lines, profile.max_boq_lines)
    completion = max(4, int(months * rng.uniform(0.55, 0.7)))
    works = rng.sample(_WORKS, min(count, len(_WORKS)))
    lines = []
    for index, (description, unit, low, high) in enumerate(works):
        length = rng.randint(2, max(2, completion - 1))
        begin = rng.randint(0, max(0, completion - length))
        line_id = f"{index + 1:02d}.{rng.randint(1, 9)}"
        lines.append(
            _Line(
                id=line_id,
                package=_PACKAGES[min(index * len(_PACKAGES) // len(works), len(_PACKAGES) - 1)][0],
                description=description,
                unit=unit,
                bill=rng.randint(40, 900) * 100 + rng.choice((0, 0, 50, 25)),
                rate=rng.randint(low, high),
                scope_hash=_hash(seed, n, line_id, description),
                start=begin,
                length=length,
            )
        )
    revisions: list[tuple[str, date, dict[str, int]]] = []
    if rng.random() < 0.4:
        at = rng.randint(2, max(2, completion - 2))
        revised = rng.sample(lines, max(1, len(lines) // 3))
        rates = {line.id: int(line.rate * rng.uniform(1.02, 1.08)) for line in revised}
        revisions.append(("Fluctuations 1", _add_months(start, at).replace(day=rng.randint(1, 20)), rates))
    site = _Site(
        id=f"TS-{seed % 1000:03d}-{n + 1:03d}",
        form=form,
        title=f"{rng.choice(_SCHEMES)} {'works' if form == JCT else 'project'} {n + 1}",
        firm=firm,
        start=start,
        whole_pounds=whole,
        lines=lines,
        revisions=revisions,
        retention_rate=rng.choice((Decimal("0.03"), Decimal("0.05"))),
        retention_cap=0,
        release_share=Decimal("0.5"),
        defects_months=rng.choice((3, 4, 6)),
        completion_month=completion,
        advance=0,
        advance_start=Decimal("0.2"),
        advance_rate=Decimal("0"),
        advance_repaid_by=Decimal("0.8"),
    )
    total = site.contract_sum
    site.retention_cap = rng.choice((_pounds(total * 3 // 100), total))
    if rng.random() < 0.5:
        site.advance = _pounds(total * rng.randint(5, 10) // 100)
        span = (site.advance_repaid_by - site.advance_start) * total
        site.advance_rate = (Decimal(site.advance) / span).quantize(Decimal("0.001"), rounding="ROUND_UP")
    _plan_instructions(rng, site, months)
    _plan_deliveries(rng, site)
    return site


def _money(rng: random.Random, low: int, high: int, whole: bool) -> int:
    amount = rng.randint(low, high) * 100 + (0 if whole else rng.randint(0, 99))
    return amount


def _plan_instructions(rng: random.Random, site: _Site, months: int) -> None:
    whole = site.whole_pounds
    prefix, reference = ("V-", "AI ") if site.form == JCT else ("CE-", "PMI ")
    for k in range(rng.randint(2, 5)):
        issued = rng.randint(1, max(1, site.completion_month - 1))
        kind = rng.choices(("quoted", "dayworks", "omission"), weights=(55, 25, 20))[0]
        amounts: dict[int, int] = {}
        limit = None
        if kind == "quoted":
            limit = _money(rng, 2000, 40000, whole)
            amounts[issued] = _share(limit, Decimal(rng.randint(50, 80)) / 100, whole)
            agreed = min(limit, _share(limit, Decimal(rng.randint(85, 100)) / 100, whole))
            amounts[min(months - 1, issued + rng.randint(1, 4))] = agreed
            description = rng.choice(_QUOTED)
        elif kind == "dayworks":
            final = _money(rng, 800, 9000, whole)
            steps = rng.randint(2, 4)
            for step in range(steps):
                amounts[min(months - 1, issued + step)] = (
                    final * (step + 1) // steps if not whole else _pounds(final * (step + 1) // steps)
                )
            description = rng.choice(_DAYWORKS)
        else:
            credit = -_money(rng, 1000, 12000, whole)
            amounts[issued] = credit
            if rng.random() < 0.5:
                amounts[min(months - 1, issued + rng.randint(1, 3))] = -_share(
                    -credit, Decimal(rng.randint(80, 120)) / 100, whole
                )
            description = rng.choice(_OMISSIONS)
        site.instructions.append(
            _Instruction(
                variation=f"{prefix}{k + 1:03d}" if site.form == NEC else f"{prefix}{k + 1:02d}",
                reference=f"{reference}{k + 1:03d}",
                kind=kind,
                description=description,
                issued=issued,
                amounts=amounts,
                limit=limit,
            )
        )


def _plan_deliveries(rng: random.Random, site: _Site) -> None:
    if rng.random() > 0.5:
        return
    for n, line in enumerate(rng.sample(site.lines, min(len(site.lines), rng.randint(1, 2)))):
        month = line.start + rng.randint(0, max(0, line.length - 2))
        left = line.bill - site.work(line, month)
        quantity = min(left, int(line.bill * rng.uniform(0.15, 0.35)))
        if quantity > 100:
            site.deliveries.append(_Delivery(f"MOS-{n + 1:02d}", line.id, month, quantity, line.rate))


# --- the certifier's ledger and one month's application ------------------------------------------------------------


@dataclass
class _Ledger:
    """What was certified last: line figures (with the exact cumulative product), variations, net to date."""

    lines: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    """line -> (quantity to date, value to date, exact quantity x rate to date in hundredths of a penny)."""
    variations: dict[str, int] = field(default_factory=dict)
    materials: dict[str, int] = field(default_factory=dict)
    """materials item -> quantity carried on the last certified certificate."""
    net: int = 0
    number: int = 0
    applied: int = 0
    """Applications made so far: an application number counts applications, held ones too."""
    certified: dict[str, Any] | None = None


def _on_site(site: _Site, delivery: _Delivery, month: int) -> int:
    line = next(line for line in site.lines if line.id == delivery.line)
    if month < delivery.month:
        return 0
    used = site.work(line, month) - site.work(line, delivery.month)
    return max(0, delivery.quantity - used)


def _application(site: _Site, month: int, ledger: _Ledger, on: date, number: int) -> dict[str, Any]:
    whole = site.whole_pounds
    lines = []
    exact: dict[str, int] = {}
    for line in site.lines:
        quantity = site.work(line, month)
        previous_quantity, previous_value, previous_exact = ledger.lines.get(line.id, (0, 0, 0))
        if quantity == 0 and previous_quantity == 0:
            continue
        period = quantity - previous_quantity
        rate = site.rate_on(line, on)
        product = previous_exact + period * rate
        value = _pounds(_pence(product)) if whole else previous_value + _pence(period * rate)
        exact[line.id] = product
        lines.append(
            {
                "boq_line": line.id,
                "package": line.package,
                "scope_hash": line.scope_hash,
                "quantity_to_date": quantity,
                "value_to_date": value,
                "previous_quantity": previous_quantity,
                "previous_value": previous_value,
            }
        )
    variations = []
    for instruction in site.instructions:
        amount = instruction.value(month)
        if amount is None:
            continue
        variations.append(
            {
                "id": instruction.variation,
                "instruction_ref": instruction.reference,
                "description": instruction.description,
                "amount": amount,
                "limit": instruction.limit,
            }
        )
    materials = []
    for delivery in site.deliveries:
        left = _on_site(site, delivery, month)
        if left > 0:
            value = _pence(left * delivery.rate)
            materials.append(
                {
                    "id": delivery.id,
                    "boq_line": delivery.line,
                    "description": f"Materials on site for {delivery.line}",
                    "quantity": left,
                    "amount": _pounds(value) if whole else value,
                }
            )
    application = {
        "contract": site.id,
        "number": number,
        "period": f"{on.year:04d}-{on.month:02d}",
        "date": on.isoformat(),
        "vendor": site.firm.name + " Ltd",
        "description": _description(site, number),
        "lines": lines,
        "variations": variations,
        "materials_on_site": materials,
        "_exact": exact,
        "_month": month,
    }
    _total(site, application, ledger, on)
    return application


def _description(site: _Site, number: int) -> str:
    if site.form == NEC:
        return f"Payment assessment {number}: price for work done to date, {site.title}"
    return f"Interim valuation {number}: gross valuation, {site.title}"


def _total(site: _Site, application: dict[str, Any], ledger: _Ledger, on: date, *, keep_advance: bool = False) -> None:
    """Package sums, retention and its releases, the advance's repayment and the statement's totals."""
    whole = site.whole_pounds
    packages: dict[str, int] = {}
    for line in application["lines"]:
        packages[line["package"]] = packages.get(line["package"], 0) + line["value_to_date"]
    application["packages"] = [{"package": p, "value_to_date": v} for p, v in sorted(packages.items())]
    work = sum(line["value_to_date"] for line in application["lines"])
    variations = sum(v["amount"] for v in application["variations"])
    materials = sum(m["amount"] for m in application["materials_on_site"])
    gross = work + variations + materials
    deducted = min(site.retention_cap, _share(gross, site.retention_rate, whole))
    releases = []
    if on >= site.completion:
        at_completion = _share(deducted, site.release_share, whole)
        releases.append({"event": PRACTICAL_COMPLETION, "amount": at_completion})
        defects_end = _add_months(site.completion, site.defects_months).replace(day=site.completion.day)
        if on >= defects_end:
            releases.append({"event": DEFECTS_END, "amount": deducted - at_completion})
    application["retention_releases"] = application.get("_releases", releases)
    released = sum(r["amount"] for r in application["retention_releases"])
    repaid = application["totals"]["advance_repaid"] if keep_advance else _advance(site, work + variations)
    net = gross - (deducted - released) - repaid
    application["totals"] = {
        "work_to_date": work,
        "variations_to_date": variations,
        "materials_on_site": materials,
        "gross": gross,
        "retention_deducted": deducted,
        "retention_released": released,
        "retention_held": deducted - released,
        "advance_repaid": repaid,
        "net_to_date": net,
        "previously_certified": ledger.net,
        "amount_due": net - ledger.net,
    }


def _advance(site: _Site, base: int) -> int:
    if site.advance == 0:
        return 0
    total = site.contract_sum
    start = int((Decimal(total) * site.advance_start).quantize(Decimal(1), rounding=ROUND_HALF_UP))
    if base <= start:
        return 0
    if base >= int((Decimal(total) * site.advance_repaid_by).quantize(Decimal(1), rounding=ROUND_HALF_UP)):
        return site.advance
    return min(site.advance, _share(base - start, site.advance_rate, site.whole_pounds))


def _certify(ledger: _Ledger, application: dict[str, Any]) -> None:
    exact = application["_exact"]
    ledger.lines = {
        line["boq_line"]: (line["quantity_to_date"], line["value_to_date"], exact.get(line["boq_line"], 0))
        for line in application["lines"]
    }
    ledger.variations = {v["id"]: v["amount"] for v in application["variations"]}
    ledger.materials = {m["id"]: m["quantity"] for m in application["materials_on_site"]}
    ledger.net = application["totals"]["net_to_date"]
    ledger.number = application["number"]
    ledger.certified = application


# --- planted errors ------------------------------------------------------------------------------------------------


def _copy(application: dict[str, Any]) -> dict[str, Any]:
    copied: dict[str, Any] = json.loads(json.dumps({k: v for k, v in application.items() if k != "_exact"}))
    copied["_exact"] = dict(application["_exact"])
    return copied


def _options(site: _Site, ledger: _Ledger, clean: dict[str, Any], on: date) -> list[str]:
    """The classes that can be planted in this month's application (each one a real departure from the terms)."""
    if ledger.certified is None:
        return []
    found = [ARITHMETIC_NOT_FOOTING]
    moving = [line for line in clean["lines"] if line["quantity_to_date"] > line["previous_quantity"]]
    if moving:
        found += [QUANTITY_BEYOND_BILL, SCOPE_IN_TWO_PACKAGES]
    if any(_period_basis_falls(line) for line in moving):
        found.append(MIXED_BASIS_STATEMENT)
    by_id = {line.id: line for line in site.lines}
    if any(site.superseded_on(by_id[line["boq_line"]], on) is not None for line in moving):
        found.append(SUPERSEDED_RATE)
    if any(r["event"] == PRACTICAL_COMPLETION for r in clean["retention_releases"]):
        found.append(RETENTION_RELEASED_TWICE)
    previous = ledger.certified["totals"]["advance_repaid"]
    if clean["totals"]["advance_repaid"] > previous:
        found.append(ADVANCE_NOT_AMORTISED)
    if any(amount for amount in ledger.variations.values()):
        found.append(VARIATION_DROPPED)
    listed = {v["id"]: v for v in clean["variations"]}
    if any(listed[i]["limit"] is not None for i in ledger.variations if i in listed):
        found.append(VARIATION_REVALUED_BEYOND_LIMIT)
    if any(ledger.variations[i] != 0 and i in listed for i in ledger.variations):
        found.append(VARIATION_SIGN_REVERSED)
    carried = {m["id"]: m for m in clean["materials_on_site"]}
    for item, quantity in ledger.materials.items():
        if item not in carried:
            found.append(MATERIALS_NOT_REVERSED)
        elif carried[item]["quantity"] < quantity:
            found.append(MATERIALS_PARTLY_INCORPORATED_KEPT)
    if any(line["quantity_to_date"] >= by_id[line["boq_line"]].bill for line in clean["lines"]):
        found.append(MATERIALS_RELISTED)
    return found


def _period_basis_falls(line: dict[str, Any]) -> bool:
    """Stated for the period alone, the line would fall below what was certified (an over-claim later, when the
    certifier restores it): a smaller period than the quantity before it."""
    previous: int = line["previous_quantity"]
    period: int = line["quantity_to_date"] - previous
    return 0 < period < previous


def _plant(
    name: str, site: _Site, ledger: _Ledger, clean: dict[str, Any], on: date, rng: random.Random
) -> dict[str, Any]:
    wrong = _copy(clean)
    by_id = {line.id: line for line in site.lines}
    moving = [line for line in wrong["lines"] if line["quantity_to_date"] > line["previous_quantity"]]
    keep_advance = False
    if name == QUANTITY_BEYOND_BILL:
        line = rng.choice(moving)
        bill = by_id[line["boq_line"]]
        line["quantity_to_date"] = bill.bill + max(100, bill.bill * rng.randint(5, 15) // 100)
        period = line["quantity_to_date"] - line["previous_quantity"]
        line["value_to_date"] = line["previous_value"] + _pence(period * site.rate_on(bill, on))
    elif name == SUPERSEDED_RATE:
        line = next(x for x in moving if site.superseded_on(by_id[x["boq_line"]], on) is not None)
        old = site.superseded_on(by_id[line["boq_line"]], on)
        assert old is not None
        period = line["quantity_to_date"] - line["previous_quantity"]
        line["value_to_date"] = line["previous_value"] + _pence(period * old)
    elif name == SCOPE_IN_TWO_PACKAGES:
        line = rng.choice(moving)
        other = next(p for p, _ in _PACKAGES if p != line["package"])
        period = line["quantity_to_date"] - line["previous_quantity"]
        wrong["lines"].append(
            {
                **line,
                "package": other,
                "quantity_to_date": period,
                "previous_quantity": 0,
                "previous_value": 0,
                "value_to_date": _pence(period * site.rate_on(by_id[line["boq_line"]], on)),
            }
        )
    elif name == MIXED_BASIS_STATEMENT:
        line = rng.choice([x for x in moving if _period_basis_falls(x)])
        line["quantity_to_date"] -= line["previous_quantity"]
        line["value_to_date"] -= line["previous_value"]
    elif name == ADVANCE_NOT_AMORTISED:
        assert ledger.certified is not None
        wrong["totals"]["advance_repaid"] = ledger.certified["totals"]["advance_repaid"]
        keep_advance = True
    elif name == VARIATION_DROPPED:
        gone = rng.choice([i for i, amount in ledger.variations.items() if amount])
        wrong["variations"] = [v for v in wrong["variations"] if v["id"] != gone]
    elif name == VARIATION_REVALUED_BEYOND_LIMIT:
        quoted = [v for v in wrong["variations"] if v["limit"] is not None and v["id"] in ledger.variations]
        variation = rng.choice(quoted)
        variation["amount"] = _share(variation["limit"], Decimal(rng.randint(108, 130)) / 100, site.whole_pounds)
    elif name == VARIATION_SIGN_REVERSED:
        variation = rng.choice([v for v in wrong["variations"] if ledger.variations.get(v["id"])])
        variation["amount"] = -ledger.variations[variation["id"]]
    elif name in (MATERIALS_NOT_REVERSED, MATERIALS_PARTLY_INCORPORATED_KEPT):
        carried = {m["id"]: m for m in wrong["materials_on_site"]}
        assert ledger.certified is not None
        before = {m["id"]: m for m in ledger.certified["materials_on_site"]}
        if name == MATERIALS_NOT_REVERSED:
            item = rng.choice([i for i in ledger.materials if i not in carried])
            wrong["materials_on_site"].append(dict(before[item]))
        else:
            drawn = [i for i in ledger.materials if i in carried and carried[i]["quantity"] < ledger.materials[i]]
            item = rng.choice(drawn)
            carried[item]["quantity"] = before[item]["quantity"]
            carried[item]["amount"] = before[item]["amount"]
    elif name == MATERIALS_RELISTED:
        line = rng.choice([x for x in wrong["lines"] if x["quantity_to_date"] >= by_id[x["boq_line"]].bill])
        bill = by_id[line["boq_line"]]
        quantity = max(100, bill.bill * rng.randint(10, 30) // 100)
        value = _pence(quantity * bill.rate)
        wrong["materials_on_site"].append(
            {
                "id": f"MOS-R{rng.randint(10, 99)}",
                "boq_line": bill.id,
                "description": f"Materials on site for {bill.id}",
                "quantity": quantity,
                "amount": _pounds(value) if site.whole_pounds else value,
            }
        )
    if name == RETENTION_RELEASED_TWICE:
        first = next(r for r in wrong["retention_releases"] if r["event"] == PRACTICAL_COMPLETION)
        wrong["_releases"] = [*wrong["retention_releases"], dict(first)]
    if name != ARITHMETIC_NOT_FOOTING:
        _total(site, wrong, ledger, on, keep_advance=keep_advance)
    else:
        wrong["totals"]["amount_due"] += rng.choice((1, -1)) * rng.randint(500, 250000)
    wrong.pop("_releases", None)
    return wrong


# --- the run -------------------------------------------------------------------------------------------------------


def _overrides(profile: ConstructionProfile, *, contracts: int | None, months: int | None) -> ConstructionProfile:
    if contracts is not None:
        if isinstance(contracts, bool) or not isinstance(contracts, int) or contracts < 1:
            raise ProfileError(profile.source, "contracts", "override must be an integer >= 1")
        profile = replace(profile, contracts=contracts)
    if months is not None:
        if isinstance(months, bool) or not isinstance(months, int) or not MIN_MONTHS <= months <= MAX_MONTHS:
            raise ProfileError(profile.source, "months", f"override must be an integer {MIN_MONTHS}..{MAX_MONTHS}")
        profile = replace(profile, months=months)
    return profile


def _tricky_kinds(site: _Site, ledger: _Ledger, application: dict[str, Any], on: date) -> list[str]:
    kinds = []
    if site.whole_pounds:
        kinds.append(VALUED_IN_WHOLE_POUNDS)
    instructions = {i.variation: i for i in site.instructions}
    for variation in application["variations"]:
        before = ledger.variations.get(variation["id"])
        if before is None or before == variation["amount"]:
            continue
        kind = instructions[variation["id"]].kind
        kinds.append(
            VARIATION_AGREED_WITHIN_QUOTATION
            if kind == "quoted"
            else VARIATION_VALUED_AS_WORK_PROCEEDS
            if kind == "dayworks"
            else OMISSION_REMEASURED
        )
    certified = ledger.certified
    before_releases = set() if certified is None else {r["event"] for r in certified["retention_releases"]}
    events = {r["event"] for r in application["retention_releases"]}
    if PRACTICAL_COMPLETION in events - before_releases:
        kinds.append(RETENTION_RELEASED_AT_COMPLETION)
    if DEFECTS_END in events - before_releases:
        kinds.append(RETENTION_BALANCE_RELEASED)
    by_id = {line.id: line for line in site.lines}
    if any(
        line["quantity_to_date"] > line["previous_quantity"] and site.superseded_on(by_id[line["boq_line"]], on)
        for line in application["lines"]
    ):
        kinds.append(RATE_REVISED)
    carried = {m["id"]: m["quantity"] for m in application["materials_on_site"]}
    if any(item in carried and carried[item] < quantity for item, quantity in ledger.materials.items()):
        kinds.append(MATERIALS_DRAWN_DOWN)
    return list(dict.fromkeys(kinds))


def generate_third_style(
    profile: ConstructionProfile, seed: int, out_dir: Path, *, contracts: int | None = None, months: int | None = None
) -> ThirdStyleManifest:
    """Write contracts.json, certificates.jsonl and ground_truth.json of the third style into `out_dir`."""
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    profile = _overrides(profile, contracts=contracts, months=months)
    rng = random.Random(f"third-style/{seed}")
    firms = [
        _Firm(name, code, per_contract=index % 2 == 0)
        for index, (name, code) in enumerate(rng.sample(_FIRMS, len(_FIRMS)))
    ]
    firms = firms[: max(2, min(len(firms), profile.contracts // 3))]
    sites = [_plan(rng, n, profile, firms[n % len(firms)], seed) for n in range(profile.contracts)]
    fault_rate = float(profile.fault_rate)
    duplicate_rate = float(profile.duplicate_rate)
    seeded = dict.fromkeys(FAULT_CLASSES, 0)
    submissions: list[dict[str, Any]] = []
    faults: list[dict[str, Any]] = []
    tricky: dict[str, list[str]] = {}
    duplicates: list[dict[str, Any]] = []
    for site in sites:
        ledger = _Ledger()
        for month in range(profile.months):
            on = site.valuation_date(month)
            ledger.applied += 1
            clean = _application(site, month, ledger, on, ledger.applied)
            clean["id"] = f"{site.id}-A{month + 1:02d}"
            options = _options(site, ledger, clean, on)
            unseen = any(seeded[name] == 0 for name in options)
            if options and rng.random() < (0.5 if unseen else fault_rate * 1.4):
                name = min(options, key=lambda n: (seeded[n], rng.random()))
                seeded[name] += 1
                wrong = _plant(name, site, ledger, clean, on, rng)
                wrong["id"] = clean["id"]
                submissions.append(wrong)
                faults.append(
                    {"certificate": wrong["id"], "class": name, "contract": site.id, "number": wrong["number"]}
                )
                if rng.random() >= CORRECTION_SHARE:
                    continue
                later = on + timedelta(days=rng.randint(3, 10))
                corrected = _application(site, month, ledger, later, wrong["number"])
                corrected["id"] = f"{clean['id']}-C"
                corrected["supersedes"] = wrong["id"]
                corrected["_corrects"] = wrong
                clean = corrected
            kinds = _tricky_kinds(site, ledger, clean, date.fromisoformat(clean["date"]))
            if "supersedes" in clean:
                kinds.append(CORRECTED_RESUBMISSION)
            submissions.append(clean)
            if kinds:
                tricky[clean["id"]] = kinds
            _certify(ledger, clean)
            if month and clean["totals"]["amount_due"] > 0 and rng.random() < duplicate_rate:
                kind = rng.choice(DUPLICATE_KINDS)
                copy = _copy(clean)
                copy["id"] = f"{clean['id']}-D"
                copy["date"] = (date.fromisoformat(clean["date"]) + timedelta(days=rng.randint(2, 20))).isoformat()
                copy.pop("supersedes", None)
                copy["_duplicate_of"] = clean
                copy["_kind"] = kind
                if kind == RESENT_RENUMBERED:
                    copy["description"] = copy["description"].replace(":", " (re-issued):", 1)
                submissions.append(copy)
                duplicates.append(
                    {
                        "certificate": copy["id"],
                        "original": clean["id"],
                        "contract": site.id,
                        "number": clean["number"],
                        "class": DUPLICATE_SUBMISSION,
                        "kind": kind,
                    }
                )
    _number(submissions, {site.id: site for site in sites}, tricky)
    for held in [*duplicates, *faults]:
        tricky.pop(held["certificate"], None)
    return _write(profile, seed, out_dir, sites, submissions, faults, duplicates, tricky)


def _number(submissions: list[dict[str, Any]], sites: dict[str, _Site], tricky: dict[str, list[str]]) -> None:
    """Invoice numbers: restarting per contract (`INV-001`) or one series across the firm (`HAR/0412`)."""
    series: dict[str, int] = {}
    used: dict[tuple[str, str], list[tuple[str, date]]] = {}
    ordered = sorted(submissions, key=lambda a: (a["date"], a["contract"], a["number"], a["id"]))
    for application in ordered:
        site = sites[application["contract"]]
        firm = site.firm
        original = application.get("_duplicate_of") or application.get("_corrects")
        keeps_number = firm.per_contract or "_duplicate_of" in application
        if original is not None and application.get("_kind") != RESENT_RENUMBERED and keeps_number:
            application["invoice_number"] = original["invoice_number"]
            continue
        if firm.per_contract:
            number = f"INV-{application['number']:03d}"
            if application.get("_kind") == RESENT_RENUMBERED:
                number += "/R"
        else:
            series[firm.code] = series.get(firm.code, _series_start(firm.code)) + 1
            number = f"{firm.code}/{series[firm.code]:04d}"
        application["invoice_number"] = number
        on = date.fromisoformat(application["date"])
        key = (firm.code, number)
        if firm.per_contract and any(
            other != site.id and (on - then).days <= INVOICE_REUSE_DAYS for other, then in used.get(key, [])
        ):
            tricky.setdefault(application["id"], []).append(INVOICE_NUMBER_ON_ANOTHER_CONTRACT)
        used.setdefault(key, []).append((site.id, on))


def _series_start(code: str) -> int:
    """Where a firm's invoice series stood when the contracts began (a fixed number per firm)."""
    return int(hashlib.sha256(code.encode()).hexdigest()[:4], 16) % 900 + 100


def _record(application: dict[str, Any]) -> dict[str, Any]:
    """The JSON record with its keys in this firm's order: totals first, then the header, then the detail."""
    record: dict[str, Any] = {
        "totals": {key: format_minor(value) for key, value in application["totals"].items()},
        "invoice_number": application["invoice_number"],
        "vendor": application["vendor"],
        "contract": application["contract"],
        "id": application["id"],
        "number": application["number"],
        "date": application["date"],
        "period": application["period"],
        "description": application["description"],
        "retention_releases": [
            {"amount": format_minor(r["amount"]), "event": r["event"]} for r in application["retention_releases"]
        ],
        "variations": [
            {
                "description": v["description"],
                "amount": format_minor(v["amount"]),
                "id": v["id"],
                "instruction_ref": v["instruction_ref"],
                **({} if v["limit"] is None else {"limit": format_minor(v["limit"])}),
            }
            for v in application["variations"]
        ],
        "materials_on_site": [
            {
                "amount": format_minor(m["amount"]),
                "quantity": format_minor(m["quantity"]),
                "description": m["description"],
                "boq_line": m["boq_line"],
                "id": m["id"],
            }
            for m in application["materials_on_site"]
        ],
        "lines": [
            {
                "previous_value": format_minor(line["previous_value"]),
                "previous_quantity": format_minor(line["previous_quantity"]),
                "value_to_date": format_minor(line["value_to_date"]),
                "quantity_to_date": format_minor(line["quantity_to_date"]),
                "scope_hash": line["scope_hash"],
                "package": line["package"],
                "boq_line": line["boq_line"],
            }
            for line in application["lines"]
        ],
        "packages": [
            {"value_to_date": format_minor(p["value_to_date"]), "package": p["package"]}
            for p in application["packages"]
        ],
    }
    if application.get("supersedes"):
        record["supersedes"] = application["supersedes"]
    return record


def _contract(site: _Site, profile: ConstructionProfile) -> dict[str, Any]:
    return {
        "id": site.id,
        "form": site.form,
        "title": site.title,
        "contractor": {"vendor_id": site.firm.code, "name": site.firm.name + " Ltd"},
        "currency": profile.currency,
        "start_period": f"{site.start.year:04d}-{site.start.month:02d}",
        "boq": [
            {
                "id": line.id,
                "package": line.package,
                "description": line.description,
                "unit": line.unit,
                "quantity": format_minor(line.bill),
                "rate": format_minor(line.rate),
            }
            for line in site.lines
        ],
        "rate_versions": [
            {
                "version": "Tender",
                "effective_from": site.start.isoformat(),
                "rates": {line.id: format_minor(line.rate) for line in site.lines},
            },
            *(
                {
                    "version": version,
                    "effective_from": effective.isoformat(),
                    "rates": {line: format_minor(rate) for line, rate in rates.items()},
                }
                for version, effective, rates in site.revisions
            ),
        ],
        "retention": {
            "rate": str(site.retention_rate),
            "cap": format_minor(site.retention_cap),
            "release_at_practical_completion": str(site.release_share),
            "defects_period_months": site.defects_months,
        },
        "advance": {
            "amount": format_minor(site.advance),
            "start_pct": str(site.advance_start),
            "rate": str(site.advance_rate) if site.advance else "0.0",
            "repaid_by_pct": str(site.advance_repaid_by),
        },
        "packages": [
            {
                "id": package,
                "name": name,
                "scope": {line.id: line.scope_hash for line in site.lines if line.package == package},
            }
            for package, name in _PACKAGES
        ],
        "practical_completion": site.completion.isoformat(),
        "clause_refs": {},
    }


def _write(
    profile: ConstructionProfile,
    seed: int,
    out_dir: Path,
    sites: list[_Site],
    submissions: list[dict[str, Any]],
    faults: list[dict[str, Any]],
    duplicates: list[dict[str, Any]],
    tricky: dict[str, list[str]],
) -> ThirdStyleManifest:
    out_dir.mkdir(parents=True, exist_ok=True)
    contracts = {
        "schema": CONTRACTS_SCHEMA,
        "profile": profile.name,
        "style": STYLE,
        "seed": seed,
        "contracts": [_contract(site, profile) for site in sites],
    }
    ordered = sorted(submissions, key=lambda a: (a["contract"], a["date"], a["id"]))
    by_id = {a["id"]: a for a in submissions}
    truth = {
        "schema": GROUND_TRUTH_SCHEMA,
        "style": STYLE,
        "profile": profile.name,
        "seed": seed,
        "classes": list(FAULT_CLASSES),
        "faults": sorted(faults, key=lambda f: f["certificate"]),
        "duplicates": sorted(duplicates, key=lambda d: d["certificate"]),
        "tricky_kinds": list(TRICKY_KINDS),
        "tricky": [
            {"certificate": c, "contract": by_id[c]["contract"], "number": by_id[c]["number"], "kind": kind}
            for c in sorted(tricky)
            for kind in tricky[c]
        ],
    }
    files = {
        CONTRACTS_FILE: json.dumps(contracts, indent=1).encode() + b"\n",
        CERTIFICATES_FILE: b"".join(json.dumps(_record(a)).encode() + b"\n" for a in ordered),
        GROUND_TRUTH_FILE: json.dumps(truth, indent=1).encode() + b"\n",
    }
    for name, data in files.items():
        (out_dir / name).write_bytes(data)
    return ThirdStyleManifest(
        out_dir=out_dir,
        profile=profile.name,
        seed=seed,
        contracts=len(sites),
        months=profile.months,
        applications=len(submissions) - len(duplicates),
        faults=len(faults),
        duplicates=len(duplicates),
        tricky=sum(len(kinds) for kinds in tricky.values()),
        files={name: hashlib.sha256(data).hexdigest() for name, data in files.items()},
    )
