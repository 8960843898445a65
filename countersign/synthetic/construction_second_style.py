"""generate_second_style: a second, independently written construction generator for the certificate eval.

It writes the same three files as `countersign.synthetic.construction` (contracts.json, certificates.jsonl,
ground_truth.json)
from the data format and from how a quantity surveyor values interim certificates, not from the checks. It is built
differently on purpose: the site is simulated month by month (an S-curve of physical progress per bill line, materials
delivered and drawn down by quantity, instructions issued, re-valued and reversed), and a certifier's ledger holds
what was certified last; each month's application is written from the site and the ledger, and an application seeded
with a fault is held (sometimes followed a few days later by a corrected re-submission that names it in
`supersedes`).

What it adds over the first style:

- variations of several kinds: lump-sum additions, omission credits (negative amounts), re-measurements against a
  bill line (quantity up or down), variations re-valued on a later certificate, and variations reversed by a later
  instruction that names them in `reverses` (the original is carried forward, the reversal beside it nets it off);
- rate revisions on per-period and cumulative valuation (`conventions.valuation_rounding`);
- retention at 2.5-5 %, caps of several kinds, release shares of 0.5 or 0.6 at practical completion and the balance
  released at the end of a short defects period;
- materials on site delivered, drawn down over several months and gone, under `materials_first` or
  `other_stock_first` (`conventions.materials_consumption`);
- application numbers in one vendor series or restarting per contract (`conventions.application_numbering`);
- contractor names with legal-form variants ("Ltd"/"Limited", "Co"/"Company", "&"/"and", punctuation);
- sister contracts (same contractor, same bill) whose retention releases are the same sum on nearly the same day.

Ground truth lists seeded `faults` (class per certificate), `duplicates` (re-submission -> original, with its kind)
and `tricky` legitimate certificates (kind per certificate) that a correct checker must neither flag nor hold.
Money is integer minor units, quantities integer hundredths, and both are decimal strings in the files.
"""

from __future__ import annotations

import calendar
import hashlib
import json
import random
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import date, timedelta
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

from countersign.synthetic.clause_topics import TOPICS
from countersign.synthetic.clauses import clause_ids_by_topic
from countersign.synthetic.construction_format import certificate_record
from countersign.synthetic.construction_profile import MAX_MONTHS, MIN_MONTHS, ConstructionProfile
from countersign.synthetic.ground_truth import GROUND_TRUTH_FILE
from countersign.synthetic.money import format_minor
from countersign.synthetic.period import parse_period
from countersign.synthetic.profile import ProfileError

STYLE = "second"
CONTRACTS_FILE = "contracts.json"
CERTIFICATES_FILE = "certificates.jsonl"
CONTRACTS_SCHEMA = "countersign.construction-contracts/1"
GROUND_TRUTH_SCHEMA = "countersign.construction-ground-truth/2"

# Fault classes (the first four are also seeded by the first style; written here again, independently).
QUANTITY_BEYOND_BILL = "quantity_beyond_bill"
SUPERSEDED_RATE = "superseded_rate"
RETENTION_RELEASED_TWICE = "retention_released_twice"
MIXED_BASIS_STATEMENT = "mixed_basis_statement"
ADVANCE_NOT_AMORTISED = "advance_not_amortised"
MATERIALS_NOT_REVERSED = "materials_not_reversed"
ARITHMETIC_NOT_FOOTING = "arithmetic_not_footing"
VARIATION_DROPPED = "variation_dropped"
MATERIALS_PARTLY_INCORPORATED_KEPT = "materials_partly_incorporated_kept"
MATERIALS_RELISTED = "materials_relisted"
FAULT_CLASSES: tuple[str, ...] = (
    QUANTITY_BEYOND_BILL,
    SUPERSEDED_RATE,
    RETENTION_RELEASED_TWICE,
    MIXED_BASIS_STATEMENT,
    ADVANCE_NOT_AMORTISED,
    MATERIALS_NOT_REVERSED,
    ARITHMETIC_NOT_FOOTING,
    VARIATION_DROPPED,
    MATERIALS_PARTLY_INCORPORATED_KEPT,
    MATERIALS_RELISTED,
)

# Duplicate kinds: how a re-submission differs from the certificate it repeats.
DUPLICATE_SUBMISSION = "duplicate_submission"
DUPLICATE_LEGAL_FORM = "legal_form_changed"
DUPLICATE_INFLATED = "inflated_full_overlap"
DUPLICATE_LATE = "resubmitted_47_to_59_days_later"
DUPLICATE_SAME_DAY = "same_day_higher_id"
DUPLICATE_COMBINED = "legal_form_inflated_and_late"
"""All three at once: another legal form, 6-8 % more on every progressing line, 47-59 days later."""
DUPLICATE_KINDS: tuple[str, ...] = (
    DUPLICATE_LEGAL_FORM,
    DUPLICATE_INFLATED,
    DUPLICATE_LATE,
    DUPLICATE_SAME_DAY,
    DUPLICATE_COMBINED,
)

# Tricky legitimate cases: a correct checker flags none of them and holds none as a duplicate.
OMISSION_CREDIT = "omission_credit"
VARIATION_REVALUED = "variation_revalued"
VARIATION_REVERSED = "variation_reversed"
REMEASURED_OMISSION = "remeasured_omission"
PROGRESS_AFTER_OMISSION = "progress_after_remeasured_omission"
RATE_REVISED_AFTER_VALUATION = "rate_revised_after_valuation_date"
RETENTION_AT_CAP = "retention_at_cap"
NEGATIVE_AMOUNT_DUE = "negative_amount_due"
ADVANCE_RECOVERY_REDUCED = "advance_recovery_reduced"
ADVANCE_SHORTFALL_RECOVERED = "advance_shortfall_recovered"
RATE_REVISED = "rate_revised"
VALUATION_ROUNDED_CUMULATIVELY = "valuation_rounded_cumulatively"
MATERIALS_PARTLY_INCORPORATED = "materials_partly_incorporated"
MATERIALS_KEPT_OTHER_STOCK_FIRST = "materials_kept_other_stock_first"
RETENTION_BALANCE_RELEASED = "retention_balance_released"
APPLICATION_NUMBER_RESTARTS = "application_number_restarts"
VENDOR_NAME_VARIANT = "vendor_name_variant"
CORRECTED_RESUBMISSION = "corrected_resubmission"
SISTER_CONTRACT_RELEASE = "sister_contract_release"
TRICKY_KINDS: tuple[str, ...] = (
    OMISSION_CREDIT,
    VARIATION_REVALUED,
    VARIATION_REVERSED,
    REMEASURED_OMISSION,
    PROGRESS_AFTER_OMISSION,
    RATE_REVISED,
    RATE_REVISED_AFTER_VALUATION,
    VALUATION_ROUNDED_CUMULATIVELY,
    MATERIALS_PARTLY_INCORPORATED,
    MATERIALS_KEPT_OTHER_STOCK_FIRST,
    RETENTION_BALANCE_RELEASED,
    RETENTION_AT_CAP,
    ADVANCE_SHORTFALL_RECOVERED,
    ADVANCE_RECOVERY_REDUCED,
    NEGATIVE_AMOUNT_DUE,
    APPLICATION_NUMBER_RESTARTS,
    VENDOR_NAME_VARIANT,
    CORRECTED_RESUBMISSION,
    SISTER_CONTRACT_RELEASE,
)

PRACTICAL_COMPLETION = "practical_completion"
DEFECTS_END = "defects_end"
PER_PERIOD = "per_period"
CUMULATIVE = "cumulative"
MATERIALS_FIRST = "materials_first"
OTHER_STOCK_FIRST = "other_stock_first"
VENDOR_SERIES = "vendor"
CONTRACT_SERIES = "contract"
CORRECTION_SHARE = 0.35
"""Share of held (faulted) applications followed by a corrected re-submission that names them."""

FORMS = ("CSB", "CSE", "CSI", "CSD", "CSM")
_INSTRUCTIONS = {"CSB": "CAI", "CSE": "PMI", "CSI": "EI", "CSD": "EAI", "CSM": "AI"}
_SITES = (
    "Ashby Wharf", "Beacon Hill", "Carrow Road", "Dockside", "Eastbrook", "Fairfield", "Granary Yard", "Hawthorn Rise",
    "Ironbridge", "Juniper Way", "Larkspur Court", "Marsh Lane", "Newbold Green", "Orchard Place", "Priory Fields",
)  # fmt: skip
_BUILDINGS = (
    "academy extension", "bus interchange", "community hub", "district heating plant", "fire station", "hospice",
    "leisure centre", "retail park", "student residence", "water treatment works", "viaduct repairs",
)  # fmt: skip
_FIRMS = (
    "Ashcombe", "Barlow", "Carrick", "Denholm", "Ellison", "Fairbairn", "Galloway", "Hartley", "Irvine", "Jessop",
    "Kilbride", "Lomax", "Marchant", "Nuttall", "Ormerod", "Pryce", "Radcliffe", "Saddler", "Tennant", "Waddington",
)  # fmt: skip
_FIRM_TRADES = ("Construction", "Civils", "Building Services", "Contracting", "Engineering", "Developments")
_LEGAL_FORMS = ("Ltd", "Limited", "Co Ltd", "& Co Limited", "and Sons Ltd", "PLC", "LLP", "Company Limited")
_TRADES = (
    ("Groundworks", (("m3", "Bulk excavation"), ("m3", "Mass concrete fill"), ("m", "Land drainage"))),
    ("Concrete frame", (("m3", "Concrete to columns"), ("t", "Reinforcement bar"), ("m2", "Soffit formwork"))),
    ("Steelwork", (("t", "Primary steel frame"), ("t", "Secondary steelwork"), ("nr", "Holding-down bolt sets"))),
    ("Masonry", (("m2", "Facing brickwork"), ("m2", "Dense blockwork"), ("m", "Cavity closers"))),
    ("Roofing", (("m2", "Standing seam roofing"), ("m", "Gutters and outlets"), ("m2", "Roof insulation"))),
    ("Services", (("m", "LTHW pipework"), ("nr", "Fan coil units"), ("m", "Containment"))),
    ("Fit-out", (("m2", "Partitions"), ("m2", "Raised access floor"), ("nr", "Internal doorsets"))),
    ("Externals", (("m2", "Block paving"), ("m", "Precast kerbs"), ("m2", "Soft landscaping"))),
)  # fmt: skip
_ADDITIONS = (
    "Additional piling at grid C", "Enlarged plant room", "Extra fire dampers", "Revised stair balustrade",
    "Acoustic upgrade to meeting rooms", "Additional rainwater harvesting tank", "Temporary access road",
)  # fmt: skip
_OMISSIONS = (
    "Omit feature cladding to north elevation", "Omit external canopy", "Omit second lift",
    "Omit green roof to block B", "Omit decorative screen", "Omit covered cycle store",
)  # fmt: skip
_MONTHS = (
    "January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November",
    "December",
)  # fmt: skip


@dataclass(frozen=True)
class SecondStyleManifest:
    out_dir: Path
    profile: str
    seed: int
    contracts: int
    months: int
    applications: int
    """Applications written (monthly ones, corrected re-submissions); duplicate re-submissions are counted apart."""
    faults: int
    duplicates: int
    tricky: int
    files: dict[str, str]
    """Relative file name -> sha256 hex of its bytes."""


# --- money ------------------------------------------------------------------------------------------------------


def _round_hundredths(product: int) -> int:
    """A product of hundredths of a unit and minor units, rounded half away from zero to minor units."""
    whole, rest = divmod(abs(product), 100)
    rounded = whole + (1 if rest >= 50 else 0)
    return rounded if product >= 0 else -rounded


def _share(amount: int, fraction: Decimal) -> int:
    return int((Decimal(amount) * fraction).quantize(Decimal(1), rounding=ROUND_HALF_UP))


# --- the plan: a contract and what happens on its site ------------------------------------------------------------


@dataclass
class _Item:
    """A bill line and the physical quantity done at the end of each month (index 0 = before month 1)."""

    id: str
    package: str
    description: str
    unit: str
    bill: int
    rate: int
    scope_hash: str
    done: list[int]
    remeasured: bool = False


@dataclass
class _Instruction:
    id: str
    reference: str
    description: str
    amount: int
    line: str | None = None
    quantity_change: int | None = None
    reverses: str | None = None


@dataclass
class _Delivery:
    id: str
    line: str
    description: str
    month: int
    quantity: int
    unit_price: int


@dataclass
class _Vendor:
    id: str
    name: str
    code: str


@dataclass
class _Site:
    index: int
    id: str
    form: str
    title: str
    vendor: _Vendor
    contract_name: str
    """The contractor's name as the contract records it."""
    application_name: str
    """The contractor's name as its applications spell it (a legal-form variant on some contracts)."""
    numbering: str
    rounding: str
    consumption: str
    items: list[_Item]
    packages: list[tuple[str, str]]
    versions: list[tuple[str, date, dict[str, int]]]
    retention_rate: Decimal
    retention_cap: int
    release_share: Decimal
    defects_months: int
    advance: int
    advance_start: Decimal
    advance_rate: Decimal
    advance_repaid_by: Decimal
    completion: date | None
    defects_end: date | None
    instructions: list[tuple[int, _Instruction]]
    """(month first listed, instruction); a re-valuation is a later (month, copy with the new amount)."""
    deliveries: list[_Delivery]
    days: list[date]
    terms: dict[str, int]
    clause_refs: dict[str, str]
    sister_of: str | None = None
    contract_sum: int = 0
    by_id: dict[str, _Item] = field(default_factory=dict)


def _month_start(start_period: str, offset: int) -> date:
    year, month = parse_period(start_period)
    index = year * 12 + month - 1 + offset
    return date(index // 12, index % 12 + 1, 1)


def _add_months(day: date, months: int) -> date:
    index = day.year * 12 + day.month - 1 + months
    return date(index // 12, index % 12 + 1, min(day.day, 28))


def _s_curve(quantity: int, start: int, length: int, months: int) -> list[int]:
    """Cumulative quantity by month on a smoothstep curve: nothing before `start`, all of it from start+length-1."""
    done = [0] * (months + 1)
    for k in range(1, months + 1):
        if k < start:
            continue
        t = min(Decimal(1), Decimal(k - start + 1) / Decimal(length))
        done[k] = int((Decimal(quantity) * t * t * (3 - 2 * t)).quantize(Decimal(1), rounding=ROUND_HALF_UP))
    return done


def _vendors(rng: random.Random, count: int) -> list[_Vendor]:
    names = [f"{firm} {trade} {form}" for firm in _FIRMS for trade in _FIRM_TRADES for form in _LEGAL_FORMS]
    rng.shuffle(names)
    vendors = []
    for n in range(count):
        name = names[n % len(names)] + (f" ({n // len(names) + 1})" if n >= len(names) else "")
        code = "".join(word[0] for word in name.split()[:2]).upper()
        vendors.append(_Vendor(f"SUP-{n + 1:05d}", name, f"{code}{n + 1:03d}"))
    return vendors


_LEGAL_SWAPS = (
    (" Limited", " Ltd"),
    (" Ltd", " Limited"),
    (" Company", " Co"),
    (" Co ", " Company "),
    (" & ", " and "),
    (" and ", " & "),
    (" PLC", " plc"),
    (" PLC", " P.L.C."),
    (" LLP", " L.L.P."),
    (" Ltd", " Ltd."),
)


def legal_form_variant(name: str, rng: random.Random) -> str:
    """The same firm's name as another document might spell it: a legal form swapped, dropped or punctuated."""
    options = [name.replace(old, new, 1) for old, new in _LEGAL_SWAPS if old in name]
    for suffix in (" Limited", " Ltd", " PLC", " LLP"):
        if name.endswith(suffix):
            options.append(name[: -len(suffix)])
    options.append(name.upper())
    options.append(name.replace(" ", "  ", 1))
    return rng.choice([option for option in options if option != name])


def _plan_site(
    rng: random.Random,
    index: int,
    profile: ConstructionProfile,
    vendor: _Vendor,
    refs_by_form: dict[str, dict[str, str]],
    seed: int,
) -> _Site:
    months = profile.months
    contract_id = f"K{index + 1:05d}"
    form = rng.choice(FORMS)
    title = f"{rng.choice(_SITES)} {rng.choice(_BUILDINGS)}"
    trades = rng.sample(_TRADES, rng.randint(2, 4))
    packages = [(f"WP-{chr(ord('A') + n)}", name) for n, (name, _) in enumerate(trades)]
    count = rng.randint(profile.min_boq_lines, profile.max_boq_lines)
    finish = rng.randint(max(4, months * 2 // 3), months + months // 3)
    items: list[_Item] = []
    for n in range(count):
        package_id, _ = packages[n % len(packages)]
        unit, what = trades[n % len(trades)][1][(n // len(trades)) % 3]
        line_id = f"{package_id[-1]}{n + 1:03d}"
        description = f"{what}, item {n + 1}"
        bill = rng.randint(10, 2500) * 100 + rng.choice((0, 25, 50, 75))
        rate = rng.randint(1_500, 90_000)
        scope = hashlib.sha256(f"second/{seed}/{contract_id}/{line_id}".encode()).hexdigest()[:20]
        start = rng.randint(1, max(1, finish - 3))
        length = rng.randint(2, max(2, finish - start + 1))
        items.append(
            _Item(line_id, package_id, description, unit, bill, rate, scope, _s_curve(bill, start, length, months))
        )

    reference_number = 0

    def reference() -> str:
        nonlocal reference_number
        reference_number += 1
        return f"{_INSTRUCTIONS[form]}/{reference_number:02d}"

    instructions: list[tuple[int, _Instruction]] = []
    variation_number = 0

    def next_id() -> str:
        nonlocal variation_number
        variation_number += 1
        return f"VO-{variation_number:03d}"

    for k in range(2, min(finish, months) + 1):
        roll = rng.random()
        if roll < 0.10:
            instructions.append(
                (k, _Instruction(next_id(), reference(), rng.choice(_ADDITIONS), rng.randint(80_000, 4_000_000)))
            )
        elif roll < 0.17:
            amount = -rng.randint(150_000, 2_500_000)
            instructions.append((k, _Instruction(next_id(), reference(), rng.choice(_OMISSIONS), amount)))
    lump_sums = [(k, instruction) for k, instruction in instructions]
    for k, instruction in lump_sums:
        if k + 2 > months:
            continue
        roll = rng.random()
        if roll < 0.25:
            month = rng.randint(k + 1, min(months, k + 4))
            factor = Decimal(rng.choice(("0.85", "0.92", "1.07", "1.15")))
            # The agreed valuation is recorded under its own reference (the instruction that settles it).
            revalued = replace(instruction, reference=reference(), amount=_share(instruction.amount, factor))
            instructions.append((month, revalued))
        elif roll < 0.40:
            month = rng.randint(k + 2, min(months, k + 5))
            reversal = _Instruction(
                next_id(),
                reference(),
                f"Reversal of {instruction.id}: {instruction.description.lower()} not proceeded with",
                0,
                reverses=instruction.id,
            )
            instructions.append((month, reversal))

    for item in rng.sample(items, k=min(len(items), rng.choice((0, 0, 1, 1, 2)))):
        rising = [k for k in range(2, months + 1) if item.done[k] > item.done[k - 1] and item.done[k - 1] < item.bill]
        if not rising:
            continue
        change = int(item.bill * rng.choice((-0.25, -0.15, -0.10, 0.08, 0.12, 0.20)))
        if change == 0:
            continue
        # An omission is usually measured as the item nears completion, when the quantity actually needed is known.
        late = [k for k in rising if item.done[k - 1] * 10 >= item.bill * 8]
        month = rng.choice(late if change < 0 and late else rising)
        target = item.bill + change
        scaled = [item.done[k] if k < month else item.done[k] * target // item.bill for k in range(months + 1)]
        if change < 0 and scaled[month - 1] - scaled[month] > -change:
            continue
        item.done = scaled
        item.remeasured = True
        word = "Omission on remeasurement of" if change < 0 else "Additional quantity instructed to"
        instructions.append(
            (month, _Instruction(next_id(), reference(), f"{word} {item.description.lower()}", 0, item.id, change))
        )
    instructions.sort(key=lambda pair: (pair[0], pair[1].id))

    versions: list[tuple[str, date, dict[str, int]]] = [
        ("RC-0", _month_start(profile.start_period, 0), {item.id: item.rate for item in items})
    ]
    current = {item.id: item.rate for item in items}
    for number, month in enumerate(sorted(rng.sample(range(3, months + 1), k=rng.choice((0, 1, 1, 2)))), start=1):
        changed = {}
        for item in rng.sample(items, k=max(1, len(items) // 3)):
            factor = Decimal(1) + Decimal(rng.choice((-1, 1))) * Decimal(rng.randint(25, 110)) / Decimal(1000)
            changed[item.id] = max(100, _share(current[item.id], factor))
            current[item.id] = changed[item.id]
        effective = _month_start(profile.start_period, month - 1) + timedelta(days=rng.choice((0, 0, 9, 27)))
        versions.append((f"RC-{number}", effective, dict(sorted(changed.items()))))

    days = [date(1, 1, 1)] + [
        _month_start(profile.start_period, k - 1).replace(day=rng.randint(19, 28)) for k in range(1, months + 1)
    ]
    completion = None
    defects_months = rng.choice((3, 6, 12))
    if finish < months:
        completion = _month_start(profile.start_period, finish).replace(day=rng.randint(2, 12))
    defects_end = None if completion is None else _add_months(completion, defects_months)

    contract_sum = sum(_round_hundredths(item.bill * item.rate) for item in items)
    retention_rate = Decimal(rng.choice(("0.025", "0.03", "0.04", "0.05")))
    cap_style = rng.random()
    if cap_style < 0.4:
        cap = _share(contract_sum, retention_rate * Decimal(rng.choice(("0.5", "0.6"))))
    elif cap_style < 0.7:
        cap = max(100_000, _share(contract_sum, retention_rate) // 100_000 * 100_000)
    else:
        cap = _share(contract_sum, retention_rate)
    advance = 0 if rng.random() < 0.3 else _share(contract_sum, Decimal(rng.choice(("0.05", "0.075", "0.10"))))
    site = _Site(
        index=index,
        id=contract_id,
        form=form,
        title=title,
        vendor=vendor,
        contract_name=vendor.name,
        application_name=vendor.name if rng.random() < 0.8 else legal_form_variant(vendor.name, rng),
        numbering=CONTRACT_SERIES if rng.random() < 0.35 else VENDOR_SERIES,
        rounding=CUMULATIVE if rng.random() < 0.3 else PER_PERIOD,
        consumption=OTHER_STOCK_FIRST if rng.random() < 0.35 else MATERIALS_FIRST,
        items=items,
        packages=packages,
        versions=versions,
        retention_rate=retention_rate,
        retention_cap=cap,
        release_share=Decimal(rng.choice(("0.5", "0.5", "0.6"))),
        defects_months=defects_months,
        advance=advance,
        advance_start=Decimal(rng.choice(("0.10", "0.20", "0.25"))),
        advance_rate=Decimal(rng.choice(("0.20", "0.25", "0.35"))),
        advance_repaid_by=Decimal(rng.choice(("0.70", "0.80", "0.90"))),
        completion=completion,
        defects_end=defects_end,
        instructions=instructions,
        deliveries=[],
        days=days,
        terms=_payment_terms(rng),
        clause_refs=refs_by_form[form],
        contract_sum=contract_sum,
    )
    site.by_id = {item.id: item for item in items}
    site.deliveries = _plan_deliveries(rng, site, months)
    return site


def _payment_terms(rng: random.Random) -> dict[str, int]:
    due, final = rng.choice(((7, 17), (14, 14), (7, 21), (10, 18)))
    return {
        "due_date_days": due,
        "final_date_days": final,
        "payment_notice_days": rng.choice((2, 3, 5)),
        "pay_less_notice_days": rng.choice((3, 5, 7)),
    }


def allowance(site: _Site, line: str, month: int) -> int:
    """The line's bill quantity plus every re-measurement instructed against it by `month`."""
    item = site.by_id[line]
    return item.bill + sum(
        i.quantity_change or 0 for k, i in site.instructions if k <= month and i.line == line and i.reverses is None
    )


def _plan_deliveries(rng: random.Random, site: _Site, months: int) -> list[_Delivery]:
    """Materials delivered ahead of the work that uses them, never more than the line still allows."""
    deliveries: list[_Delivery] = []
    busy_until: dict[str, int] = {}
    for k in range(1, months):
        if rng.random() >= 0.4:
            continue
        lines = [
            item
            for item in site.items
            if not item.remeasured
            and busy_until.get(item.id, 0) < k
            and item.done[min(months, k + 3)] - item.done[k] >= 200
        ]
        if not lines:
            continue
        item = rng.choice(lines)
        ahead = item.done[min(months, k + rng.randint(1, 4))] - item.done[k]
        room = item.bill - item.done[k]
        quantity = max(100, min(room, ahead))
        delivery = _Delivery(
            id=f"MOS-{item.id}-{len([d for d in deliveries if d.line == item.id]) + 1}",
            line=item.id,
            description=f"{item.description} delivered to site, stored",
            month=k,
            quantity=quantity,
            unit_price=max(100, _share(item.rate, Decimal(rng.choice(("0.45", "0.6", "0.75"))))),
        )
        deliveries.append(delivery)
        busy_until[item.id] = next((j for j in range(k, months + 1) if _remaining(site, delivery, j) == 0), months + 1)
    return deliveries


def _remaining(site: _Site, delivery: _Delivery, month: int) -> int:
    """How much of a delivery is still on site, unfixed, at the end of `month` under the contract's convention."""
    if month < delivery.month:
        return 0
    item = site.by_id[delivery.line]
    if site.consumption == MATERIALS_FIRST:
        return max(0, delivery.quantity - (item.done[month] - item.done[delivery.month]))
    return max(0, min(delivery.quantity, allowance(site, item.id, month) - item.done[month]))


# --- the certifier's ledger and the applications -----------------------------------------------------------------


@dataclass
class _Ledger:
    """What was certified last on one contract."""

    lines: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    """Line id -> (quantity, value, exact value in hundredths of a minor unit)."""
    variations: dict[str, int] = field(default_factory=dict)
    materials: dict[str, int] = field(default_factory=dict)
    """Materials item id -> quantity certified."""
    released: tuple[str, ...] = ()
    peaks: dict[str, int] = field(default_factory=dict)
    """Line id -> the highest quantity ever certified on it (above today's after a re-measured omission)."""
    advance_repaid: int = 0
    net: int = 0


def _rate_on(site: _Site, line: str, on: date) -> int:
    rate = 0
    for _, effective, rates in site.versions:
        if effective <= on and line in rates:
            rate = rates[line]
    return rate


def _older_rates(site: _Site, line: str, on: date) -> list[int]:
    rates = [rates[line] for _, effective, rates in site.versions if effective <= on and line in rates]
    return list(reversed(rates[:-1]))


def _listed_variations(site: _Site, month: int) -> list[_Instruction]:
    """Every instruction listed by `month`, each at its latest valuation, reversals at minus what they reverse."""
    listed: dict[str, _Instruction] = {}
    for k, instruction in site.instructions:
        if k <= month:
            listed[instruction.id] = instruction
    for instruction_id, instruction in list(listed.items()):
        if instruction.reverses is not None and instruction.reverses in listed:
            listed[instruction_id] = replace(instruction, amount=-listed[instruction.reverses].amount)
    return sorted(listed.values(), key=lambda i: i.id)


def _value_line(site: _Site, ledger: _Ledger, item: _Item, quantity: int, rate: int) -> dict[str, Any]:
    previous_q, previous_v, previous_exact = ledger.lines.get(item.id, (0, 0, 0))
    exact = previous_exact + (quantity - previous_q) * rate
    if site.rounding == CUMULATIVE:
        value = _round_hundredths(exact)
    else:
        value = previous_v + _round_hundredths((quantity - previous_q) * rate)
    return {
        "boq_line": item.id,
        "package": item.package,
        "scope_hash": item.scope_hash,
        "quantity_to_date": quantity,
        "value_to_date": value,
        "previous_quantity": previous_q,
        "previous_value": previous_v,
        "exact": exact,
    }


def _application(
    site: _Site, month: int, ledger: _Ledger, seed: int, variant: str, *, on: date | None = None
) -> dict[str, Any]:
    """Month `month`'s application, valued on its date (`on`, the month's valuation day unless given)."""
    on = site.days[month] if on is None else on
    lines = [_value_line(site, ledger, item, item.done[month], _rate_on(site, item.id, on)) for item in site.items]
    materials = []
    for delivery in site.deliveries:
        remaining = _remaining(site, delivery, month)
        if remaining > 0:
            materials.append(_materials_entry(delivery, remaining))
    events = []
    if site.completion is not None and on >= site.completion:
        events.append(PRACTICAL_COMPLETION)
    if site.defects_end is not None and on >= site.defects_end:
        events.append(DEFECTS_END)
    application: dict[str, Any] = {
        "id": _application_id(seed, site.id, month, variant),
        "contract": site.id,
        "number": month,
        "period": f"{on.year:04d}-{on.month:02d}",
        "date": on.isoformat(),
        "vendor": site.application_name,
        "description": f"Application for payment no. {month} - {site.title} - valuation at {on.day} "
        f"{_MONTHS[on.month - 1]} {on.year}",
        "lines": lines,
        "variations": [_variation_entry(i) for i in _listed_variations(site, month)],
        "materials_on_site": materials,
        "events": events,
        "previously_certified": ledger.net,
    }
    return total(site, application)


def _materials_entry(delivery: _Delivery, quantity: int) -> dict[str, Any]:
    return {
        "id": delivery.id,
        "boq_line": delivery.line,
        "description": delivery.description,
        "quantity": quantity,
        "amount": _round_hundredths(quantity * delivery.unit_price),
    }


def _variation_entry(instruction: _Instruction) -> dict[str, Any]:
    return {
        "id": instruction.id,
        "instruction_ref": instruction.reference,
        "description": instruction.description,
        "amount": instruction.amount,
        "boq_line": instruction.line,
        "quantity_change": instruction.quantity_change,
        "reverses": instruction.reverses,
    }


def _application_id(seed: int, contract: str, month: int, variant: str) -> str:
    return "APP-" + hashlib.sha256(f"second/{seed}/{contract}/{month}/{variant}".encode()).hexdigest()[:14].upper()


def _advance_due(site: _Site, valued: int) -> int:
    """The advance recovered to date once work and variations reach `valued`."""
    if site.advance == 0 or valued <= _share(site.contract_sum, site.advance_start):
        return 0
    if valued >= _share(site.contract_sum, site.advance_repaid_by):
        return site.advance
    return min(site.advance, _share(valued - _share(site.contract_sum, site.advance_start), site.advance_rate))


def total(site: _Site, application: dict[str, Any], *, advance: int | None = None) -> dict[str, Any]:
    """Write every total of `application` from its parts, as the contract's terms say they are worked out."""
    packages: dict[str, int] = {}
    for line in application["lines"]:
        packages[line["package"]] = packages.get(line["package"], 0) + line["value_to_date"]
    order = [package_id for package_id, _ in site.packages]
    application["packages"] = [
        {"package": package_id, "value_to_date": packages[package_id]}
        for package_id in sorted(packages, key=lambda p: order.index(p) if p in order else len(order))
    ]
    work = sum(line["value_to_date"] for line in application["lines"])
    variations = sum(v["amount"] for v in application["variations"])
    materials = sum(m["amount"] for m in application["materials_on_site"])
    gross = work + variations + materials
    deducted = min(_share(gross, site.retention_rate), site.retention_cap)
    releases = []
    for event in application["events"]:
        if event == PRACTICAL_COMPLETION:
            releases.append({"event": event, "amount": _share(deducted, site.release_share)})
        else:
            releases.append({"event": event, "amount": deducted - _share(deducted, site.release_share)})
    released = sum(r["amount"] for r in releases)
    repaid = _advance_due(site, work + variations) if advance is None else advance
    net = gross - (deducted - released) - repaid
    application["retention_releases"] = releases
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
        "previously_certified": application["previously_certified"],
        "amount_due": net - application["previously_certified"],
    }
    return application


def _certify(application: dict[str, Any], before: _Ledger) -> _Ledger:
    totals = application["totals"]
    return _Ledger(
        peaks={
            line["boq_line"]: max(line["quantity_to_date"], before.peaks.get(line["boq_line"], 0))
            for line in application["lines"]
        },
        lines={
            line["boq_line"]: (line["quantity_to_date"], line["value_to_date"], line["exact"])
            for line in application["lines"]
        },
        variations={v["id"]: v["amount"] for v in application["variations"]},
        materials={m["id"]: m["quantity"] for m in application["materials_on_site"]},
        released=tuple(application["events"]),
        advance_repaid=totals["advance_repaid"],
        net=totals["net_to_date"],
    )


# --- faults -------------------------------------------------------------------------------------------------------


def _progressing(application: dict[str, Any]) -> list[dict[str, Any]]:
    return [line for line in application["lines"] if line["quantity_to_date"] > line["previous_quantity"]]


def _fault_options(site: _Site, month: int, ledger: _Ledger, clean: dict[str, Any]) -> dict[str, Any]:
    """Fault class -> what it would be seeded on, for every class this application can carry."""
    options: dict[str, Any] = {}
    progressing = _progressing(clean)
    on = site.days[month]
    if progressing:
        options[QUANTITY_BEYOND_BILL] = progressing
        options[ARITHMETIC_NOT_FOOTING] = True
    repriced = []
    for line in progressing:
        period = line["quantity_to_date"] - line["previous_quantity"]
        current = line["value_to_date"] - line["previous_value"]
        for old in _older_rates(site, line["boq_line"], on):
            if abs(_round_hundredths(period * old) - current) >= 100:
                repriced.append((line, old))
                break
    if repriced:
        options[SUPERSEDED_RATE] = repriced
    if PRACTICAL_COMPLETION in ledger.released and PRACTICAL_COMPLETION in clean["events"]:
        options[RETENTION_RELEASED_TWICE] = True
    restatable = [line for line in progressing if line["previous_quantity"] > 0]
    if len(restatable) >= 2:
        options[MIXED_BASIS_STATEMENT] = restatable
    if clean["totals"]["advance_repaid"] - ledger.advance_repaid >= 100:
        options[ADVANCE_NOT_AMORTISED] = True
    listed = {m["id"]: m["quantity"] for m in clean["materials_on_site"]}
    partly, gone = [], []
    for item_id, certified in ledger.materials.items():
        now = listed.get(item_id, 0)
        if 0 < now < certified:
            partly.append(item_id)
        elif now == 0 and certified > 0:
            gone.append(item_id)
    if partly:
        options[MATERIALS_PARTLY_INCORPORATED_KEPT] = partly
    if gone:
        options[MATERIALS_NOT_REVERSED] = gone
    full = [
        delivery
        for delivery in site.deliveries
        if delivery.month < month
        and _remaining(site, delivery, month) == 0
        and site.by_id[delivery.line].done[month] >= allowance(site, delivery.line, month)
        and not any(m["boq_line"] == delivery.line for m in clean["materials_on_site"])
    ]
    if full:
        options[MATERIALS_RELISTED] = full
    reversed_ids = {v["reverses"] for v in clean["variations"] if v["reverses"]}
    droppable = [
        v
        for v in clean["variations"]
        if v["id"] in ledger.variations and v["boq_line"] is None and not v["reverses"] and v["id"] not in reversed_ids
    ]
    if droppable:
        options[VARIATION_DROPPED] = droppable
    return options


def _seed(
    name: str,
    option: Any,
    site: _Site,
    month: int,
    ledger: _Ledger,
    clean: dict[str, Any],
    rng: random.Random,
    seed: int,
) -> tuple[dict[str, Any], dict[str, Any]]:
    application = json.loads(json.dumps(clean))
    application["id"] = _application_id(seed, site.id, month, f"fault/{name}")
    on = site.days[month]
    amounts: dict[str, int]
    if name == QUANTITY_BEYOND_BILL:
        chosen = rng.choice(option)
        line = next(line for line in application["lines"] if line["boq_line"] == chosen["boq_line"])
        item = site.by_id[line["boq_line"]]
        excess = max(100, int(item.bill * rng.uniform(0.04, 0.2)))
        quantity = allowance(site, item.id, month) + excess
        replaced = _value_line(site, ledger, item, quantity, _rate_on(site, item.id, on))
        line.update(replaced)
        amounts = {"excess_quantity": excess}
        detail = f"line {item.id} valued {format_minor(excess)} {item.unit} beyond what the bill and instructions allow"
    elif name == SUPERSEDED_RATE:
        chosen, old = rng.choice(option)
        line = next(line for line in application["lines"] if line["boq_line"] == chosen["boq_line"])
        item = site.by_id[line["boq_line"]]
        in_force = line["value_to_date"]
        line.update(_value_line(site, ledger, item, line["quantity_to_date"], old))
        amounts = {"stated": line["value_to_date"], "at_rate_in_force": in_force}
        detail = f"line {item.id} valued this period at {format_minor(old)}, a rate since revised"
    elif name == RETENTION_RELEASED_TWICE:
        application["events"] = [*application["events"], PRACTICAL_COMPLETION]
        amounts = {}
        detail = "the practical-completion release of retention appears twice"
    elif name == MIXED_BASIS_STATEMENT:
        chosen = rng.sample(option, k=min(len(option), rng.randint(2, 3)))
        ids = {line["boq_line"] for line in chosen}
        dropped = 0
        for line in application["lines"]:
            if line["boq_line"] in ids:
                dropped += line["previous_value"]
                line["quantity_to_date"] -= line["previous_quantity"]
                line["value_to_date"] -= line["previous_value"]
                line["previous_quantity"] = 0
                line["previous_value"] = 0
        amounts = {"previous_value_dropped": dropped}
        detail = f"lines {', '.join(sorted(ids))} state this period alone inside a cumulative statement"
    elif name == ADVANCE_NOT_AMORTISED:
        due = application["totals"]["advance_repaid"]
        total(site, application, advance=ledger.advance_repaid)
        amounts = {"scheduled": due, "stated": ledger.advance_repaid}
        detail = "the advance recovered is left where it was although the schedule has moved on"
        return application, _fault_record(site, month, application, name, amounts, detail)
    elif name in (MATERIALS_PARTLY_INCORPORATED_KEPT, MATERIALS_NOT_REVERSED):
        item_id = rng.choice(option)
        delivery = next(d for d in site.deliveries if d.id == item_id)
        kept = ledger.materials[item_id]
        application["materials_on_site"] = [m for m in application["materials_on_site"] if m["id"] != item_id]
        application["materials_on_site"].append(_materials_entry(delivery, kept))
        application["materials_on_site"].sort(key=lambda m: m["id"])
        amounts = {"kept_quantity": kept, "on_site_quantity": _remaining(site, delivery, month)}
        detail = f"materials {item_id} still claimed at {format_minor(kept)} after the work used them"
    elif name == MATERIALS_RELISTED:
        delivery = rng.choice(option)
        relisted = replace(delivery, id=f"MOS-{delivery.line}-{rng.randint(7, 9)}{rng.randint(1, 9)}")
        application["materials_on_site"].append(_materials_entry(relisted, delivery.quantity))
        application["materials_on_site"].sort(key=lambda m: m["id"])
        amounts = {"relisted": _round_hundredths(delivery.quantity * delivery.unit_price)}
        detail = f"materials {delivery.id} listed again as {relisted.id} against line {delivery.line}, already complete"
    elif name == VARIATION_DROPPED:
        credits = [v for v in option if v["amount"] < 0]
        chosen = rng.choice(credits if credits and rng.random() < 0.7 else option)
        application["variations"] = [v for v in application["variations"] if v["id"] != chosen["id"]]
        amounts = {"dropped": chosen["amount"]}
        detail = f"variation {chosen['id']} ({format_minor(chosen['amount'])}) certified before is left off"
    elif name == ARITHMETIC_NOT_FOOTING:
        total(site, application)
        delta = rng.randint(1, 40) * 100 + rng.randint(0, 99)
        where = rng.choice(("amount_due", "net_to_date", "work_to_date"))
        application["totals"][where] += delta
        amounts = {"difference": delta}
        detail = f"the {where.replace('_', ' ')} is {format_minor(delta)} more than its parts"
        return application, _fault_record(site, month, application, name, amounts, detail)
    else:
        raise ValueError(f"unknown fault class {name!r}")
    total(site, application)
    return application, _fault_record(site, month, application, name, amounts, detail)


def _fault_record(
    site: _Site, month: int, application: dict[str, Any], name: str, amounts: dict[str, int], detail: str
) -> dict[str, Any]:
    return {
        "certificate": application["id"],
        "contract": site.id,
        "number": month,
        "period": application["period"],
        "class": name,
        "amounts": {key: format_minor(value) for key, value in sorted(amounts.items())},
        "detail": detail,
    }


# --- tricky legitimate cases ---------------------------------------------------------------------------------------


def _tricky_kinds(site: _Site, month: int, ledger: _Ledger, application: dict[str, Any]) -> list[str]:
    """What makes a clean application easy to mistake for a faulty one."""
    kinds = []
    variations = {v["id"]: v for v in application["variations"]}
    if any(v["amount"] < 0 and v["boq_line"] is None and not v["reverses"] and v["id"] not in ledger.variations
           for v in variations.values()):  # fmt: skip
        kinds.append(OMISSION_CREDIT)
    if any(v_id in ledger.variations and ledger.variations[v_id] != v["amount"] for v_id, v in variations.items()):
        kinds.append(VARIATION_REVALUED)
    if any(v["reverses"] in ledger.variations and v["id"] not in ledger.variations for v in variations.values()):
        kinds.append(VARIATION_REVERSED)
    if any(line["quantity_to_date"] < line["previous_quantity"] for line in application["lines"]):
        kinds.append(REMEASURED_OMISSION)
    if any(line["previous_quantity"] < ledger.peaks.get(line["boq_line"], 0) for line in _progressing(application)):
        kinds.append(PROGRESS_AFTER_OMISSION)
    on = date.fromisoformat(application["date"])
    previous_day = site.days[month - 1] if month > 1 else None
    if previous_day is not None and any(
        _rate_on(site, line["boq_line"], on) != _rate_on(site, line["boq_line"], previous_day)
        for line in _progressing(application)
    ):
        kinds.append(RATE_REVISED)
    if site.rounding == CUMULATIVE and any(
        line["value_to_date"] - line["previous_value"]
        != _round_hundredths(
            (line["quantity_to_date"] - line["previous_quantity"]) * _rate_on(site, line["boq_line"], on)
        )
        for line in application["lines"]
    ):
        kinds.append(VALUATION_ROUNDED_CUMULATIVELY)
    for entry in application["materials_on_site"]:
        certified = ledger.materials.get(entry["id"])
        if certified is None:
            continue
        line = next(line for line in application["lines"] if line["boq_line"] == entry["boq_line"])
        if site.consumption == MATERIALS_FIRST and 0 < entry["quantity"] < certified:
            kinds.append(MATERIALS_PARTLY_INCORPORATED)
            break
        if (site.consumption == OTHER_STOCK_FIRST and entry["quantity"] == certified
                and line["quantity_to_date"] > line["previous_quantity"]):  # fmt: skip
            kinds.append(MATERIALS_KEPT_OTHER_STOCK_FIRST)
            break
    if any(
        effective.year == on.year and effective.month == on.month and effective > on
        for _, effective, _ in site.versions[1:]
    ):
        kinds.append(RATE_REVISED_AFTER_VALUATION)
    totals = application["totals"]
    if totals["retention_deducted"] == site.retention_cap < _share(totals["gross"], site.retention_rate):
        kinds.append(RETENTION_AT_CAP)
    valued = totals["work_to_date"] + totals["variations_to_date"]
    start = _share(site.contract_sum, site.advance_start)
    if (
        site.advance
        and totals["advance_repaid"] == site.advance > ledger.advance_repaid
        and _share(valued - start, site.advance_rate) < site.advance
    ):
        kinds.append(ADVANCE_SHORTFALL_RECOVERED)
    if totals["advance_repaid"] < ledger.advance_repaid:
        kinds.append(ADVANCE_RECOVERY_REDUCED)
    if totals["amount_due"] < 0:
        kinds.append(NEGATIVE_AMOUNT_DUE)
    if DEFECTS_END in application["events"]:
        kinds.append(RETENTION_BALANCE_RELEASED)
    if application["vendor"] != site.contract_name:
        kinds.append(VENDOR_NAME_VARIANT)
    return kinds


# --- the generator ------------------------------------------------------------------------------------------------


def generate_second_style(
    profile: ConstructionProfile,
    seed: int,
    out_dir: Path,
    *,
    contracts: int | None = None,
    months: int | None = None,
    clause_corpus: Mapping[str, Any] | None = None,
) -> SecondStyleManifest:
    """Write contracts.json, certificates.jsonl and ground_truth.json of the second style into `out_dir`."""
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    profile = _overrides(profile, contracts=contracts, months=months)
    rng = random.Random(f"second-style/{seed}")
    refs = _clause_refs(clause_corpus)
    vendors = _vendors(rng, max(2, profile.contracts // 4))
    sites = [_plan_site(rng, n, profile, rng.choice(vendors), refs, seed) for n in range(profile.contracts)]
    sites += _sisters(rng, sites, profile, seed)

    paired = _sister_ids(sites) | {site.id for site in sites if site.sister_of is not None}
    slots = sum(profile.months - 1 for site in sites if site.id not in paired)
    target = int((Decimal(slots) * profile.fault_rate).quantize(Decimal(1)))
    seeded: dict[str, int] = dict.fromkeys(FAULT_CLASSES, 0)
    applications: list[dict[str, Any]] = []
    certified_pool: list[tuple[_Site, dict[str, Any]]] = []
    faults: list[dict[str, Any]] = []
    tricky: list[dict[str, Any]] = []
    seen = 0
    for site in sites:
        ledger = _Ledger()
        for month in range(1, profile.months + 1):
            clean = _application(site, month, ledger, seed, "monthly")
            due = month >= 2 and site.id not in paired
            if due:
                seen += 1
            options = _fault_options(site, month, ledger, clean) if due else {}
            paced = sum(seeded.values()) < target * seen / max(1, slots) + 0.5
            unseen = sum(seeded.values()) < target and any(seeded[name] == 0 for name in options)
            if options and (paced or unseen):
                name = min(options, key=lambda n: (seeded[n], rng.random()))
                faulted, record = _seed(name, options[name], site, month, ledger, clean, rng, seed)
                seeded[name] += 1
                applications.append(faulted)
                faults.append(record)
                corrected_on = _correction_day(site.days[month], rng) if rng.random() < CORRECTION_SHARE else None
                if corrected_on is not None:
                    corrected = _application(site, month, ledger, seed, "corrected", on=corrected_on)
                    corrected["supersedes"] = faulted["id"]
                    corrected["invoice_of"] = faulted["id"]
                    applications.append(corrected)
                    tricky.append(_tricky_record(site, corrected, CORRECTED_RESUBMISSION))
                    for kind in _tricky_kinds(site, month, ledger, corrected):
                        tricky.append(_tricky_record(site, corrected, kind))
                    certified_pool.append((site, corrected))
                    ledger = _certify(corrected, ledger)
                continue
            applications.append(clean)
            for kind in _tricky_kinds(site, month, ledger, clean):
                tricky.append(_tricky_record(site, clean, kind))
            certified_pool.append((site, clean))
            ledger = _certify(clean, ledger)

    tricky += _sister_releases(sites, certified_pool)
    duplicates = _duplicates(rng, certified_pool, sites, profile, seed)
    submissions = applications + [dup for dup, _ in duplicates]
    tricky += _number(submissions, sites, held={fault["certificate"] for fault in faults})

    out_dir.mkdir(parents=True, exist_ok=True)
    contracts_doc = {
        "schema": CONTRACTS_SCHEMA,
        "profile": profile.name,
        "style": STYLE,
        "seed": seed,
        "currency": profile.currency,
        "contracts": [_contract_json(site, profile) for site in sites],
    }
    (out_dir / CONTRACTS_FILE).write_text(_canonical(contracts_doc), encoding="utf-8")
    submissions.sort(key=lambda a: (a["date"], a["contract"], a["number"], a["id"]))
    with (out_dir / CERTIFICATES_FILE).open("w", encoding="utf-8", newline="\n") as handle:
        for application in submissions:
            handle.write(json.dumps(_certificate_json(application), sort_keys=True, separators=(",", ":")) + "\n")
    truth = {
        "schema": GROUND_TRUTH_SCHEMA,
        "style": STYLE,
        "profile": profile.name,
        "seed": seed,
        "contracts": len(sites),
        "months": profile.months,
        "certificates": len(applications),
        "fault_rate": str(profile.fault_rate),
        "classes": list(FAULT_CLASSES),
        "faults": sorted(faults, key=lambda f: (f["contract"], f["number"])),
        "duplicates": sorted((record for _, record in duplicates), key=lambda d: d["certificate"]),
        "tricky_kinds": list(TRICKY_KINDS),
        "tricky": sorted(tricky, key=lambda t: (t["contract"], t["number"], t["certificate"], t["kind"])),
    }
    (out_dir / GROUND_TRUTH_FILE).write_text(_canonical(truth), encoding="utf-8")
    names = (CERTIFICATES_FILE, CONTRACTS_FILE, GROUND_TRUTH_FILE)
    return SecondStyleManifest(
        out_dir=out_dir,
        profile=profile.name,
        seed=seed,
        contracts=len(sites),
        months=profile.months,
        applications=len(applications),
        faults=len(faults),
        duplicates=len(duplicates),
        tricky=len(tricky),
        files={name: hashlib.sha256((out_dir / name).read_bytes()).hexdigest() for name in names},
    )


def _correction_day(valued: date, rng: random.Random) -> date | None:
    """A corrected re-submission goes in a few days after the held one, within the same month (same valuation)."""
    last = date(valued.year, valued.month, calendar.monthrange(valued.year, valued.month)[1])
    later = min(last, valued + timedelta(days=rng.randint(2, 9)))
    return None if later == valued else later


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


def _clause_refs(corpus: Mapping[str, Any] | None) -> dict[str, dict[str, str]]:
    if corpus is None:
        return {form: {key: key for key, _ in TOPICS} for form in FORMS}
    return {form: clause_ids_by_topic(corpus, form) for form in FORMS}


def _canonical(data: Mapping[str, Any]) -> str:
    return json.dumps(data, sort_keys=True, ensure_ascii=False, indent=1) + "\n"


def _tricky_record(site: _Site, application: dict[str, Any], kind: str) -> dict[str, Any]:
    return {"certificate": application["id"], "contract": site.id, "number": application["number"], "kind": kind}


# --- sister contracts ------------------------------------------------------------------------------------------------


def _sister_ids(sites: list[_Site]) -> frozenset[str]:
    return frozenset(site.sister_of for site in sites if site.sister_of is not None)


def _sisters(rng: random.Random, sites: list[_Site], profile: ConstructionProfile, seed: int) -> list[_Site]:
    """For a few contracts, a sister: same contractor and bill, its own progress, completion on the same day.

    Both are finished before practical completion and carry no instructions, materials or rate revisions at the end,
    so the certificates that release retention at completion ask for the same sum on nearly the same day, with no
    line of work in common: not a duplicate.
    """
    sisters: list[_Site] = []
    count = max(1, len(sites) // 25)
    candidates = [site for site in sites if site.completion is not None]
    for original in rng.sample(candidates, k=min(count, len(candidates))):
        completion = original.completion
        assert completion is not None
        finish = next(k for k in range(1, profile.months + 1) if original.days[k] >= completion) - 1
        if finish < 3:
            continue
        original.instructions = []
        original.versions = original.versions[:1]
        original.deliveries = []
        for item in original.items:
            item.remeasured = False
            if item.done[finish] != item.bill:
                item.done = _s_curve(item.bill, 1, max(1, finish), profile.months)
        index = len(sites) + len(sisters)
        sister_id = f"K{index + 1:05d}"
        items = []
        for item in original.items:
            start = rng.randint(1, max(1, finish - 1))
            scope = hashlib.sha256(f"second/{seed}/{sister_id}/{item.id}".encode()).hexdigest()[:20]
            done = _s_curve(item.bill, start, max(1, finish - start + 1), profile.months)
            items.append(replace(item, scope_hash=scope, done=done))
        sister = replace(
            original,
            index=index,
            id=sister_id,
            title=f"{original.title}, phase 2",
            application_name=legal_form_variant(original.vendor.name, rng),
            items=items,
            instructions=[],
            deliveries=[],
            days=[original.days[0]]
            + [day + timedelta(days=rng.choice((0, 1, 2))) if day.day <= 26 else day for day in original.days[1:]],
            sister_of=original.id,
        )
        sister.by_id = {item.id: item for item in items}
        sisters.append(sister)
    return sisters


def _sister_releases(sites: list[_Site], pool: list[tuple[_Site, dict[str, Any]]]) -> list[dict[str, Any]]:
    records = []
    for site in sites:
        if site.sister_of is None:
            continue
        for owner, application in pool:
            if owner is site and PRACTICAL_COMPLETION in application["events"] and application["totals"]["amount_due"]:
                records.append(_tricky_record(site, application, SISTER_CONTRACT_RELEASE))
                break
    return records


# --- duplicates and numbering -----------------------------------------------------------------------------------------


def _duplicates(
    rng: random.Random,
    pool: list[tuple[_Site, dict[str, Any]]],
    sites: list[_Site],
    profile: ConstructionProfile,
    seed: int,
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    sisters = _sister_ids(sites) | {site.id for site in sites if site.sister_of is not None}
    eligible = [
        (site, a)
        for site, a in pool
        if a["number"] >= 2 and a["totals"]["amount_due"] > 0 and site.id not in sisters and _progressing(a)
    ]
    count = int((Decimal(profile.contracts * profile.months) * profile.duplicate_rate).quantize(Decimal(1)))
    picked = rng.sample(eligible, k=min(max(count, len(DUPLICATE_KINDS)), len(eligible)))
    duplicates = []
    for n, (site, original) in enumerate(sorted(picked, key=lambda pair: pair[1]["id"])):
        kind = DUPLICATE_KINDS[n % len(DUPLICATE_KINDS)]
        duplicate = json.loads(json.dumps(original))
        duplicate.pop("supersedes", None)
        duplicate.pop("invoice_of", None)
        duplicate["id"] = _application_id(seed, site.id, original["number"], f"again/{kind}")
        sent = date.fromisoformat(original["date"])
        if kind in (DUPLICATE_LEGAL_FORM, DUPLICATE_COMBINED):
            duplicate["vendor"] = legal_form_variant(original["vendor"], rng)
            sent += timedelta(days=rng.randint(3, 30))
        if kind in (DUPLICATE_INFLATED, DUPLICATE_COMBINED):
            factor = Decimal(rng.randint(60, 80)) / Decimal(1000)
            for line in _progressing(duplicate):
                line["value_to_date"] += _share(line["value_to_date"] - line["previous_value"], factor)
            total(site, duplicate)
            sent += timedelta(days=rng.randint(2, 25)) if kind == DUPLICATE_INFLATED else timedelta(0)
        if kind in (DUPLICATE_LATE, DUPLICATE_COMBINED):
            sent = date.fromisoformat(original["date"]) + timedelta(days=rng.randint(47, 59))
        if kind == DUPLICATE_SAME_DAY:
            attempt = 0
            while duplicate["id"] <= original["id"]:
                attempt += 1
                duplicate["id"] = _application_id(seed, site.id, original["number"], f"again/{kind}/{attempt}")
        duplicate["date"] = sent.isoformat()
        duplicate["duplicate_of"] = original["id"]
        duplicates.append(
            (
                duplicate,
                {
                    "certificate": duplicate["id"],
                    "original": original["id"],
                    "contract": site.id,
                    "number": original["number"],
                    "class": DUPLICATE_SUBMISSION,
                    "kind": kind,
                    "days_later": (sent - date.fromisoformat(original["date"])).days,
                    "amounts": {
                        "amount_due": format_minor(duplicate["totals"]["amount_due"]),
                        "original": format_minor(original["totals"]["amount_due"]),
                    },
                },
            )
        )
    return duplicates


def _number(submissions: list[dict[str, Any]], sites: list[_Site], *, held: set[str]) -> list[dict[str, Any]]:
    """Application numbers: one series per vendor, or restarting on each contract; returns the restarts' records."""
    by_id = {site.id: site for site in sites}
    counters: dict[str, int] = {}
    numbers: dict[str, str] = {}
    for application in sorted(submissions, key=lambda a: (a["date"], a["contract"], a["number"], a["id"])):
        site = by_id[application["contract"]]
        if "invoice_of" in application and application["invoice_of"] in numbers:
            numbers[application["id"]] = numbers[application["invoice_of"]]
        elif site.numbering == CONTRACT_SERIES:
            suffix = "" if "duplicate_of" not in application else "-R"
            numbers[application["id"]] = f"AFP-{application['number']:03d}{suffix}"
        else:
            counters[site.vendor.id] = counters.get(site.vendor.id, 0) + 1
            numbers[application["id"]] = f"{site.vendor.code}-{counters[site.vendor.id]:05d}"
        application["invoice_number"] = numbers[application["id"]]
    records = []
    seen: dict[tuple[str, str], str] = {}
    for application in sorted(submissions, key=lambda a: (a["date"], a["id"])):
        site = by_id[application["contract"]]
        if site.numbering != CONTRACT_SERIES or "duplicate_of" in application or application["id"] in held:
            continue
        key = (site.vendor.id, application["invoice_number"])
        first = seen.setdefault(key, site.id)
        if first != site.id:
            records.append(_tricky_record(site, application, APPLICATION_NUMBER_RESTARTS))
    return records


# --- files --------------------------------------------------------------------------------------------------------


def _contract_json(site: _Site, profile: ConstructionProfile) -> dict[str, Any]:
    conventions = {
        "valuation_rounding": site.rounding,
        "materials_consumption": site.consumption,
        "application_numbering": site.numbering,
    }
    return {
        "id": site.id,
        "form": site.form,
        "title": site.title,
        "contractor": {"vendor_id": site.vendor.id, "name": site.contract_name},
        "currency": profile.currency,
        "start_period": profile.start_period,
        "boq": [
            {
                "id": item.id,
                "package": item.package,
                "description": item.description,
                "unit": item.unit,
                "quantity": format_minor(item.bill),
                "rate": format_minor(item.rate),
            }
            for item in site.items
        ],
        "rate_versions": [
            {
                "version": version,
                "effective_from": effective.isoformat(),
                "rates": {line: format_minor(rate) for line, rate in rates.items()},
            }
            for version, effective, rates in site.versions
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
            "rate": str(site.advance_rate),
            "repaid_by_pct": str(site.advance_repaid_by),
        },
        "packages": [
            {
                "id": package_id,
                "name": name,
                "scope": {item.id: item.scope_hash for item in site.items if item.package == package_id},
            }
            for package_id, name in site.packages
        ],
        "practical_completion": None if site.completion is None else site.completion.isoformat(),
        "clause_refs": site.clause_refs,
        "conventions": conventions,
        "payment_terms": site.terms,
    }


def _certificate_json(application: dict[str, Any]) -> dict[str, Any]:
    return certificate_record(application)
