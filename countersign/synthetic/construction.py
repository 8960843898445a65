"""generate_construction: one profile + seed -> byte-reproducible contracts, certificate histories and ground truth.

Each contract gets one cumulative interim certificate a month. The generator simulates certification: a certificate
seeded with a fault is held (never certified), so the next one carries forward the last certified position, exactly
as a quantity surveyor's reconstruction would. Eight fault classes are seeded at the profile's rate (2-3 % of
certificates in total, balanced across classes), plus re-submitted duplicates for the duplicate detector. A profile
with `fault_month` instead seeds every class exactly once in that month, each on its own contract, and re-submits one
clean certificate of that month (a demo month); without the key the output is unchanged.

Money is integer minor units here and decimal strings in the files (`money.format_minor`); quantities are integer
hundredths. The arithmetic is written independently of the `certificates` package (pure packages import nothing of
ours), so the invariants are checked against a second implementation, not against themselves.
"""

from __future__ import annotations

import copy
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

CONTRACTS_FILE = "contracts.json"
CERTIFICATES_FILE = "certificates.jsonl"
CONTRACTS_SCHEMA = "countersign.construction-contracts/1"
GROUND_TRUTH_SCHEMA = "countersign.construction-ground-truth/1"

QUANTITY_BEYOND_BILL = "quantity_beyond_bill"
SUPERSEDED_RATE = "superseded_rate"
RETENTION_RELEASED_TWICE = "retention_released_twice"
SCOPE_IN_TWO_PACKAGES = "scope_in_two_packages"
MIXED_BASIS_STATEMENT = "mixed_basis_statement"
ADVANCE_NOT_AMORTISED = "advance_not_amortised"
MATERIALS_NOT_REVERSED = "materials_not_reversed"
ARITHMETIC_NOT_FOOTING = "arithmetic_not_footing"
FAULT_CLASSES: tuple[str, ...] = (
    QUANTITY_BEYOND_BILL,
    SUPERSEDED_RATE,
    RETENTION_RELEASED_TWICE,
    SCOPE_IN_TWO_PACKAGES,
    MIXED_BASIS_STATEMENT,
    ADVANCE_NOT_AMORTISED,
    MATERIALS_NOT_REVERSED,
    ARITHMETIC_NOT_FOOTING,
)
DUPLICATE_SUBMISSION = "duplicate_submission"
PRACTICAL_COMPLETION = "practical_completion"

FORMS = ("CSB", "CSE", "CSI", "CSD", "CSM")
_INSTRUCTION_PREFIX = {"CSB": "CAI", "CSE": "PMI", "CSI": "EI", "CSD": "EAI", "CSM": "AI"}
_PLACES = (
    "Harbour Road", "Kingsway", "Mill Lane", "Riverside", "Station Quarter", "Northgate", "Castle Street",
    "Westfield", "Quayside", "Abbey Park", "Bridgewater", "Canal Basin", "Elm Grove", "Foundry Yard",
)  # fmt: skip
_SCHEMES = (
    "bridge", "primary school", "health centre", "flood defence", "depot", "library", "housing block",
    "sports hall", "car park", "pumping station", "office refurbishment", "care home",
)  # fmt: skip
_VENDOR_FIRST = (
    "Aldgate", "Bluebell", "Brightwater", "Cobalt", "Dunmore", "Evergreen", "Fenwick", "Harbour",
    "Kestrel", "Meridian", "Northwind", "Oakridge", "Pennine", "Solent", "Thistle", "Wessex",
)  # fmt: skip
_VENDOR_TRADE = (
    "Civil Engineering", "Construction", "Building", "Groundworks", "Contractors", "Structures", "Infrastructure",
)  # fmt: skip
_VENDOR_SUFFIX = ("Ltd", "plc", "LLP", "Limited")
_PACKAGES = (
    "Substructure", "Frame", "Envelope", "Mechanical services", "Electrical services", "Finishes", "External works",
)  # fmt: skip
_ITEMS = (
    ("m3", "Excavation to reduce levels"), ("m3", "Reinforced concrete in foundations"), ("t", "Bar reinforcement"),
    ("m2", "Formwork to soffits"), ("m2", "Blockwork walls"), ("m2", "Brick facing"), ("m", "Drainage pipework"),
    ("nr", "Manholes"), ("t", "Structural steelwork"), ("m2", "Roof covering"), ("m2", "Curtain walling"),
    ("m", "Cable tray"), ("nr", "Distribution boards"), ("m2", "Screed"), ("m2", "Suspended ceilings"),
    ("m2", "Floor finishes"), ("nr", "Doorsets"), ("m2", "Paving"), ("m", "Kerbs"), ("m2", "Landscaping"),
)  # fmt: skip
_MATERIALS = ("Delivered stock", "Unfixed materials", "Stored components", "Materials in compound")
_VARIATION_WORK = (
    "Additional drainage run", "Relocated service entry", "Extra fire stopping", "Revised entrance canopy",
    "Additional kerb realignment", "Upgraded door ironmongery", "Extra ground stabilisation", "Temporary diversion",
)  # fmt: skip
_DESCRIPTION_LEADS = ("Interim valuation", "Valuation", "Interim application", "Payment application")
_MONTHS = (
    "January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November",
    "December",
)  # fmt: skip


@dataclass(frozen=True)
class ConstructionManifest:
    out_dir: Path
    profile: str
    seed: int
    contracts: int
    months: int
    certificates: int
    """Monthly certificates (one per contract per month); duplicate re-submissions are counted separately."""
    faults: int
    duplicates: int
    clause_refs: str
    """"clause ids" when a clause corpus was given, else "topic keys" (refs name the topic, not a clause)."""
    files: dict[str, str]
    """Relative file name -> sha256 hex of its bytes."""


# --- plan ------------------------------------------------------------------------------------------------------


@dataclass
class _Line:
    id: str
    package: str
    description: str
    unit: str
    bill_centi: int
    rate_minor: int
    scope_hash: str
    cumulative: list[int]  # index k = cumulative quantity on certificate k (index 0 = nothing yet)
    no_materials: bool = False


@dataclass
class _Plan:
    index: int
    id: str
    form: str
    title: str
    vendor_id: str
    vendor_name: str
    vendor_code: str
    lines: list[_Line]
    packages: list[tuple[str, str, list[str]]]
    rate_versions: list[tuple[str, date, dict[str, int]]]
    retention_rate: Decimal
    retention_cap: int
    release_share: Decimal
    defects_months: int
    advance_amount: int
    advance_start: Decimal
    advance_rate: Decimal
    advance_repaid_by: Decimal
    completion: date | None
    variations: list[tuple[int, dict[str, Any]]]  # (month first listed, variation)
    materials: dict[int, list[dict[str, Any]]]
    days: list[date]  # certificate date per month, index k
    clause_refs: dict[str, str]
    contract_sum: int = 0
    line_index: dict[str, _Line] = field(default_factory=dict)
    owners: dict[str, str] = field(default_factory=dict)


@dataclass
class _State:
    """The last certified position, as the generator's certifier holds it."""

    lines: dict[str, tuple[int, int]]
    net: int = 0
    advance_repaid: int = 0
    released: int = 0
    materials: dict[str, tuple[str, int, int]] = field(default_factory=dict)  # id -> (line, qty, line qty listed)
    last: str | None = None


def generate_construction(
    profile: ConstructionProfile,
    seed: int,
    out_dir: Path,
    *,
    contracts: int | None = None,
    months: int | None = None,
    clause_corpus: Mapping[str, Any] | None = None,
) -> ConstructionManifest:
    """Write contracts.json, certificates.jsonl and ground_truth.json for `profile` and `seed` into `out_dir`.

    `clause_corpus` is the parsed canonical clause corpus (config/clauses/corpus.json); without it each contract's
    `clause_refs` maps every topic key to itself.
    """
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    profile = _apply_overrides(profile, contracts=contracts, months=months)
    rng = random.Random(seed)
    refs_by_form = _clause_refs(clause_corpus)
    vendors = _vendors(rng, max(2, profile.contracts // 8))
    plans = [_plan_contract(rng, index, profile, vendors, refs_by_form, seed) for index in range(profile.contracts)]

    # Pass 1: every certificate certified; decides where each fault class can be seeded.
    candidates: dict[str, list[tuple[int, int]]] = {name: [] for name in FAULT_CLASSES}
    for plan in plans:
        state = _State(lines={})
        for k in range(1, profile.months + 1):
            clean = _clean_certificate(plan, k, state, seed)
            if k >= 2:
                for name in FAULT_CLASSES:
                    if _feasible(name, plan, k, state, clean):
                        candidates[name].append((plan.index, k))
            state = _certify(plan, clean)
    faults = _choose_faults(rng, candidates, profile)

    # Pass 2: seed the faults; a faulted certificate is held and does not move the certified position.
    certificates: list[dict[str, Any]] = []
    truth_faults: list[dict[str, Any]] = []
    clean_pool: list[tuple[_Plan, dict[str, Any]]] = []
    for plan in plans:
        state = _State(lines={})
        for k in range(1, profile.months + 1):
            clean = _clean_certificate(plan, k, state, seed)
            fault = faults.get((plan.index, k))
            seeded = None if fault is None else _seed_fault(fault, plan, k, state, clean, rng)
            if seeded is None:
                certificates.append(clean)
                clean_pool.append((plan, clean))
                state = _certify(plan, clean)
            else:
                faulted, record = seeded
                certificates.append(faulted)
                truth_faults.append(record)

    duplicates = _duplicates(rng, clean_pool, profile, seed)
    submissions = certificates + [dup for dup, _ in duplicates]
    _assign_invoice_numbers(submissions, plans)
    submissions.sort(key=lambda c: (c["date"], c["contract"], c["number"], c["id"]))

    out_dir.mkdir(parents=True, exist_ok=True)
    contracts_doc = {
        "schema": CONTRACTS_SCHEMA,
        "profile": profile.name,
        "seed": seed,
        "currency": profile.currency,
        "contracts": [_contract_json(plan, profile) for plan in plans],
    }
    (out_dir / CONTRACTS_FILE).write_text(_canonical(contracts_doc), encoding="utf-8")
    with (out_dir / CERTIFICATES_FILE).open("w", encoding="utf-8", newline="\n") as handle:
        for certificate in submissions:
            handle.write(json.dumps(_certificate_json(certificate), sort_keys=True, separators=(",", ":")) + "\n")
    truth = {
        "schema": GROUND_TRUTH_SCHEMA,
        "profile": profile.name,
        "seed": seed,
        "contracts": profile.contracts,
        "months": profile.months,
        "certificates": len(certificates),
        "fault_rate": str(profile.fault_rate),
        **({} if profile.fault_month is None else {"fault_month": profile.fault_month}),
        "classes": list(FAULT_CLASSES),
        "faults": sorted(truth_faults, key=lambda f: (f["contract"], f["number"])),
        "duplicates": sorted((record for _, record in duplicates), key=lambda d: d["certificate"]),
    }
    (out_dir / GROUND_TRUTH_FILE).write_text(_canonical(truth), encoding="utf-8")
    names = (CERTIFICATES_FILE, CONTRACTS_FILE, GROUND_TRUTH_FILE)
    return ConstructionManifest(
        out_dir=out_dir,
        profile=profile.name,
        seed=seed,
        contracts=profile.contracts,
        months=profile.months,
        certificates=len(certificates),
        faults=len(truth_faults),
        duplicates=len(duplicates),
        clause_refs="clause ids" if clause_corpus is not None else "topic keys",
        files={name: hashlib.sha256((out_dir / name).read_bytes()).hexdigest() for name in names},
    )


def _apply_overrides(profile: ConstructionProfile, *, contracts: int | None, months: int | None) -> ConstructionProfile:
    if contracts is not None:
        if isinstance(contracts, bool) or not isinstance(contracts, int) or contracts < 1:
            raise ProfileError(profile.source, "contracts", "override must be an integer >= 1")
        profile = replace(profile, contracts=contracts)
    if months is not None:
        if isinstance(months, bool) or not isinstance(months, int) or not MIN_MONTHS <= months <= MAX_MONTHS:
            raise ProfileError(profile.source, "months", f"override must be an integer {MIN_MONTHS}..{MAX_MONTHS}")
        profile = replace(profile, months=months)
    if profile.fault_month is not None and profile.fault_month > profile.months:
        raise ProfileError(profile.source, "fault_month", f"must be <= months ({profile.months})")
    return profile


def _canonical(data: Mapping[str, Any]) -> str:
    return json.dumps(data, sort_keys=True, ensure_ascii=False, indent=1) + "\n"


def _clause_refs(corpus: Mapping[str, Any] | None) -> dict[str, dict[str, str]]:
    """Topic key -> clause id for each form, from the canonical corpus; topic keys themselves without one."""
    if corpus is None:
        return {form: {key: key for key, _ in TOPICS} for form in FORMS}
    return {form: clause_ids_by_topic(corpus, form) for form in FORMS}


def _vendors(rng: random.Random, count: int) -> list[tuple[str, str, str]]:
    pool = [
        (f"{first} {trade} {suffix}", "".join(word[0] for word in f"{first} {trade}".split()).upper())
        for first in _VENDOR_FIRST
        for trade in _VENDOR_TRADE
        for suffix in _VENDOR_SUFFIX[:3]
    ]
    rng.shuffle(pool)
    vendors = []
    for index in range(count):
        name, code = pool[index % len(pool)]
        if index >= len(pool):
            name = f"{name} ({index // len(pool) + 1})"
        vendors.append((f"V-{index + 1:04d}", name, f"{code}{index + 1:03d}"))
    return vendors


def _month_start(start_period: str, offset: int) -> date:
    year, month = parse_period(start_period)
    index = year * 12 + month - 1 + offset
    return date(index // 12, index % 12 + 1, 1)


def _split(total: int, parts: int, rng: random.Random) -> list[int]:
    weights = [0.4 + rng.random() for _ in range(parts)]
    scale = sum(weights)
    shares = [int(total * w / scale) for w in weights]
    shares[-1] += total - sum(shares)
    return shares


def _value(quantity_centi: int, rate_minor: int) -> int:
    product = quantity_centi * rate_minor
    magnitude = (abs(product) + 50) // 100
    return magnitude if product >= 0 else -magnitude


def _fraction(amount_minor: int, fraction: Decimal) -> int:
    return int((Decimal(amount_minor) * fraction).quantize(Decimal(1), rounding=ROUND_HALF_UP))


def _plan_contract(
    rng: random.Random,
    index: int,
    profile: ConstructionProfile,
    vendors: list[tuple[str, str, str]],
    refs_by_form: dict[str, dict[str, str]],
    seed: int,
) -> _Plan:
    months = profile.months
    contract_id = f"CT-{index + 1:04d}"
    form = FORMS[int(rng.random() * len(FORMS))]
    vendor_id, vendor_name, vendor_code = vendors[int(rng.random() * len(vendors))]
    title = f"{_PLACES[int(rng.random() * len(_PLACES))]} {_SCHEMES[int(rng.random() * len(_SCHEMES))]}"
    duration = rng.randint(max(4, months // 2), months + months // 2)
    package_count = rng.randint(2, 4)
    package_names = rng.sample(_PACKAGES, package_count)
    packages: list[tuple[str, str, list[str]]] = [(f"P{n + 1}", name, []) for n, name in enumerate(package_names)]
    line_count = rng.randint(profile.min_boq_lines, profile.max_boq_lines)
    items = rng.sample(_ITEMS, min(line_count, len(_ITEMS)))
    lines: list[_Line] = []
    for n in range(line_count):
        unit, what = items[n % len(items)]
        line_id = f"L{n + 1:02d}"
        package_id, package_name, members = packages[n % package_count]
        members.append(line_id)
        description = f"{what} ({package_name.lower()})" + (f" {n // len(items) + 1}" if n >= len(items) else "")
        scope = hashlib.sha256(f"{seed}/{contract_id}/{line_id}/{description}".encode()).hexdigest()[:16]
        bill = rng.randint(20, 4000) * 100 + rng.randint(0, 99)
        rate = rng.randint(800, 60_000)
        lines.append(_Line(line_id, package_id, description, unit, bill, rate, scope, [0] * (months + 1)))

    variations: list[tuple[int, dict[str, Any]]] = []
    instruction_number = 0

    def instruction() -> str:
        nonlocal instruction_number
        instruction_number += 1
        return f"{_INSTRUCTION_PREFIX[form]}-{instruction_number:03d}"

    increase_line = rng.choice(lines) if rng.random() < 0.15 else None
    for line in lines:
        start = rng.randint(1, max(1, duration - 1))
        end = rng.randint(start, duration)
        target = line.bill_centi
        if line is increase_line:
            extra = max(100, int(line.bill_centi * (0.05 + 0.15 * rng.random())))
            target += extra
            variations.append(
                (
                    start,
                    {
                        "id": f"V{len(variations) + 1:02d}",
                        "instruction_ref": instruction(),
                        "description": f"Additional quantity instructed to {line.description.lower()}",
                        "amount": 0,
                        "boq_line": line.id,
                        "quantity_change": extra,
                    },
                )
            )
            line.no_materials = True
        shares = _split(target, end - start + 1, rng)
        running = 0
        for k in range(1, months + 1):
            if start <= k <= end:
                running += shares[k - start]
            line.cumulative[k] = running if k >= start else 0
    omission_candidates = [
        line
        for line in lines
        if line is not increase_line and sum(1 for k in range(1, months) if line.cumulative[k] >= 400) >= 1
    ]
    if omission_candidates and rng.random() < 0.10:
        line = rng.choice(omission_candidates)
        rising = [k for k in range(2, min(duration, months) + 1) if line.cumulative[k - 1] >= 400 and k <= duration]
        if rising:
            month = rng.choice(rising)
            omitted = line.cumulative[month - 1] // 4
            for k in range(month, months + 1):
                line.cumulative[k] -= omitted
            line.no_materials = True
            variations.append(
                (
                    month,
                    {
                        "id": f"V{len(variations) + 1:02d}",
                        "instruction_ref": instruction(),
                        "description": f"Omission on remeasurement of {line.description.lower()}",
                        "amount": 0,
                        "boq_line": line.id,
                        "quantity_change": -omitted,
                    },
                )
            )
    for k in range(2, min(duration, months)):
        if rng.random() < 0.12:
            variations.append(
                (
                    k,
                    {
                        "id": f"V{len(variations) + 1:02d}",
                        "instruction_ref": instruction(),
                        "description": rng.choice(_VARIATION_WORK),
                        "amount": rng.randint(50_000, 2_500_000),
                        "boq_line": None,
                        "quantity_change": None,
                    },
                )
            )
    variations.sort(key=lambda item: (item[0], item[1]["id"]))

    materials: dict[int, list[dict[str, Any]]] = {}
    for k in range(1, min(duration, months)):
        if rng.random() >= 0.35:
            continue
        eligible = [
            line for line in lines if not line.no_materials and line.cumulative[k + 1] - line.cumulative[k] >= 100
        ]
        if not eligible:
            continue
        line = rng.choice(eligible)
        increment = line.cumulative[k + 1] - line.cumulative[k]
        quantity = max(100, min(increment, int(increment * (0.3 + 0.7 * rng.random()))))
        materials[k] = [
            {
                "id": f"M{k:02d}",
                "boq_line": line.id,
                "description": f"{rng.choice(_MATERIALS)} for {line.description.lower()}",
                "quantity": quantity,
                "amount": _value(quantity, line.rate_minor) * 55 // 100,
            }
        ]

    versions: list[tuple[str, date, dict[str, int]]] = [
        ("R1", _month_start(profile.start_period, 0), {line.id: line.rate_minor for line in lines})
    ]
    if duration >= 5:
        revision_months = sorted(rng.sample(range(3, duration), k=min(2 if rng.random() < 0.3 else 1, duration - 3)))
        current = {line.id: line.rate_minor for line in lines}
        for number, month in enumerate(revision_months, start=2):
            changed = {}
            for line in rng.sample(lines, k=max(1, len(lines) // 2)):
                factor = 1 + rng.choice((-1, 1)) * (0.03 + 0.09 * rng.random())
                changed[line.id] = max(100, int(current[line.id] * factor))
                current[line.id] = changed[line.id]
            versions.append(
                (f"R{number}", _month_start(profile.start_period, month - 1), dict(sorted(changed.items())))
            )

    days = [date(1, 1, 1)] + [
        _month_start(profile.start_period, k - 1).replace(day=rng.randint(20, 28)) for k in range(1, months + 1)
    ]
    completion = None
    if duration <= months - 1:
        completion = _month_start(profile.start_period, duration - 1).replace(day=rng.randint(5, 15))

    contract_sum = sum(_value(line.bill_centi, line.rate_minor) for line in lines)
    retention_rate = Decimal(rng.choice(("0.03", "0.05")))
    cap = _fraction(contract_sum, retention_rate * Decimal(rng.choice(("0.5", "0.6", "0.75", "1.0"))))
    has_advance = rng.random() < 0.8
    plan = _Plan(
        index=index,
        id=contract_id,
        form=form,
        title=title,
        vendor_id=vendor_id,
        vendor_name=vendor_name,
        vendor_code=vendor_code,
        lines=lines,
        packages=packages,
        rate_versions=versions,
        retention_rate=retention_rate,
        retention_cap=cap,
        release_share=Decimal("0.5"),
        defects_months=12,
        advance_amount=_fraction(contract_sum, Decimal(rng.choice(("0.05", "0.10", "0.15")))) if has_advance else 0,
        advance_start=Decimal(rng.choice(("0.10", "0.15", "0.20"))),
        advance_rate=Decimal(rng.choice(("0.20", "0.25", "0.30"))),
        advance_repaid_by=Decimal(rng.choice(("0.80", "0.85", "0.90"))),
        completion=completion,
        variations=variations,
        materials=materials,
        days=days,
        clause_refs=refs_by_form[form],
        contract_sum=contract_sum,
    )
    plan.line_index = {line.id: line for line in lines}
    plan.owners = {line.id: line.package for line in lines}
    return plan


def _rate_in_force(plan: _Plan, line_id: str, on: date) -> int:
    rate = 0
    for _, effective, rates in plan.rate_versions:
        if effective > on:
            break
        rate = rates.get(line_id, rate)
    return rate


def _superseded(plan: _Plan, line_id: str, on: date) -> list[int]:
    history = [rates[line_id] for _, effective, rates in plan.rate_versions if effective <= on and line_id in rates]
    return list(reversed(history[:-1]))


def _schedule(plan: _Plan, base: int) -> int:
    if plan.advance_amount == 0:
        return 0
    start = _fraction(plan.contract_sum, plan.advance_start)
    if base <= start:
        return 0
    if base >= _fraction(plan.contract_sum, plan.advance_repaid_by):
        return plan.advance_amount
    return min(plan.advance_amount, _fraction(base - start, plan.advance_rate))


# --- certificates ----------------------------------------------------------------------------------------------


def _certificate_id(seed: int, contract: str, k: int, variant: str) -> str:
    return "IPC-" + hashlib.sha256(f"{seed}/{contract}/{k}/{variant}".encode()).hexdigest()[:12].upper()


def _description(plan: _Plan, k: int, lead: str) -> str:
    day = plan.days[k]
    return f"{lead} {k}: {plan.title}, works to {day.day} {_MONTHS[day.month - 1]} {day.year}"


def _clean_certificate(plan: _Plan, k: int, state: _State, seed: int) -> dict[str, Any]:
    on = plan.days[k]
    lines = []
    for line in plan.lines:
        previous_q, previous_v = state.lines.get(line.id, (0, 0))
        quantity = line.cumulative[k]
        value = previous_v + _value(quantity - previous_q, _rate_in_force(plan, line.id, on))
        lines.append(
            {
                "boq_line": line.id,
                "package": line.package,
                "scope_hash": line.scope_hash,
                "quantity_to_date": quantity,
                "value_to_date": value,
                "previous_quantity": previous_q,
                "previous_value": previous_v,
            }
        )
    certificate: dict[str, Any] = {
        "id": _certificate_id(seed, plan.id, k, "monthly"),
        "contract": plan.id,
        "number": k,
        "period": f"{on.year:04d}-{on.month:02d}",
        "date": on.isoformat(),
        "vendor": plan.vendor_name,
        "description": _description(plan, k, _DESCRIPTION_LEADS[0]),
        "lines": lines,
        "variations": [copy.deepcopy(v) for month, v in plan.variations if month <= k],
        "materials_on_site": copy.deepcopy(plan.materials.get(k, [])),
        "release_events": [PRACTICAL_COMPLETION] if plan.completion is not None and on >= plan.completion else [],
        "previously_certified": state.net,
    }
    return _foot(plan, certificate)


def _foot(plan: _Plan, certificate: dict[str, Any], *, advance: int | None = None) -> dict[str, Any]:
    """Compute every total of `certificate` from its parts (the certificate reconciles against itself)."""
    lines = certificate["lines"]
    by_package: dict[str, int] = {}
    for line in lines:
        by_package[line["package"]] = by_package.get(line["package"], 0) + line["value_to_date"]
    order = [package_id for package_id, _, _ in plan.packages]
    certificate["packages"] = [
        {"package": package_id, "value_to_date": by_package[package_id]}
        for package_id in sorted(by_package, key=lambda p: (order.index(p) if p in order else len(order), p))
    ]
    work = sum(line["value_to_date"] for line in lines)
    variations = sum(v["amount"] for v in certificate["variations"])
    materials = sum(m["amount"] for m in certificate["materials_on_site"])
    gross = work + variations + materials
    deducted = min(_fraction(gross, plan.retention_rate), plan.retention_cap)
    releases = [
        {"event": event, "amount": _fraction(deducted, plan.release_share)} for event in certificate["release_events"]
    ]
    released = sum(r["amount"] for r in releases)
    held = deducted - released
    repaid = _schedule(plan, work + variations) if advance is None else advance
    net = gross - held - repaid
    certificate["retention_releases"] = releases
    certificate["totals"] = {
        "work_to_date": work,
        "variations_to_date": variations,
        "materials_on_site": materials,
        "gross": gross,
        "retention_deducted": deducted,
        "retention_released": released,
        "retention_held": held,
        "advance_repaid": repaid,
        "net_to_date": net,
        "previously_certified": certificate["previously_certified"],
        "amount_due": net - certificate["previously_certified"],
    }
    return certificate


def _certify(plan: _Plan, certificate: dict[str, Any]) -> _State:
    lines = {}
    for line in certificate["lines"]:
        if plan.owners.get(line["boq_line"]) == line["package"] and line["boq_line"] not in lines:
            lines[line["boq_line"]] = (line["quantity_to_date"], line["value_to_date"])
    materials = {
        item["id"]: (item["boq_line"], item["quantity"], lines.get(item["boq_line"], (0, 0))[0])
        for item in certificate["materials_on_site"]
    }
    totals = certificate["totals"]
    return _State(
        lines=lines,
        net=totals["net_to_date"],
        advance_repaid=totals["advance_repaid"],
        released=totals["retention_released"],
        materials=materials,
        last=certificate["id"],
    )


# --- faults ----------------------------------------------------------------------------------------------------


def _progressing(certificate: dict[str, Any]) -> list[dict[str, Any]]:
    return [line for line in certificate["lines"] if line["quantity_to_date"] > line["previous_quantity"]]


def _superseded_options(plan: _Plan, certificate: dict[str, Any]) -> list[tuple[dict[str, Any], int]]:
    on = date.fromisoformat(certificate["date"])
    options = []
    for line in _progressing(certificate):
        period_q = line["quantity_to_date"] - line["previous_quantity"]
        current = _value(period_q, _rate_in_force(plan, line["boq_line"], on))
        for old in _superseded(plan, line["boq_line"], on):
            if _value(period_q, old) != current:
                options.append((line, old))
                break
    return options


def _mixed_options(certificate: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        line
        for line in _progressing(certificate)
        if line["quantity_to_date"] - line["previous_quantity"] < line["previous_quantity"]
    ]


def _unreversed_options(plan: _Plan, state: _State, certificate: dict[str, Any]) -> list[str]:
    now = {line["boq_line"]: line["quantity_to_date"] for line in certificate["lines"]}
    listed = {item["id"] for item in certificate["materials_on_site"]}
    return [
        item_id
        for item_id, (line_id, quantity, listed_at) in sorted(state.materials.items())
        if item_id not in listed and now.get(line_id, 0) >= listed_at + quantity
    ]


def _feasible(name: str, plan: _Plan, k: int, state: _State, clean: dict[str, Any]) -> bool:
    if name in (QUANTITY_BEYOND_BILL, ARITHMETIC_NOT_FOOTING):
        return True
    if name == SUPERSEDED_RATE:
        return bool(_superseded_options(plan, clean))
    if name == RETENTION_RELEASED_TWICE:
        return state.released > 0 and bool(clean["release_events"])
    if name == SCOPE_IN_TWO_PACKAGES:
        return len(plan.packages) > 1 and bool(_progressing(clean))
    if name == MIXED_BASIS_STATEMENT:
        return len(_mixed_options(clean)) >= 2
    if name == ADVANCE_NOT_AMORTISED:
        scheduled: int = clean["totals"]["advance_repaid"]
        return scheduled - state.advance_repaid >= 100
    if name == MATERIALS_NOT_REVERSED:
        return bool(_unreversed_options(plan, state, clean))
    raise ValueError(f"unknown fault class {name!r}")


def _choose_faults(
    rng: random.Random, candidates: dict[str, list[tuple[int, int]]], profile: ConstructionProfile
) -> dict[tuple[int, int], str]:
    if profile.fault_month is not None:
        return _choose_month_faults(rng, candidates, profile, profile.fault_month)
    total = int((Decimal(profile.contracts * profile.months) * profile.fault_rate).quantize(Decimal(1)))
    order = sorted(FAULT_CLASSES, key=lambda name: (len(candidates[name]), name))
    chosen: dict[tuple[int, int], str] = {}
    pools = {name: list(candidates[name]) for name in FAULT_CLASSES}
    for pool in pools.values():
        rng.shuffle(pool)
    misses = 0
    index = 0
    while len(chosen) < total and misses < len(order):
        name = order[index % len(order)]
        index += 1
        remaining = pools[name]
        while remaining:
            contract, k = remaining.pop()
            if all((contract, k + delta) not in chosen for delta in (-1, 0, 1)):
                chosen[(contract, k)] = name
                misses = 0
                break
        else:
            misses += 1
    return chosen


def _choose_month_faults(
    rng: random.Random, candidates: dict[str, list[tuple[int, int]]], profile: ConstructionProfile, month: int
) -> dict[tuple[int, int], str]:
    """One contract per fault class, all in `month`, no contract twice (a matching found by bounded backtracking)."""
    pools = {name: sorted(c for c, k in candidates[name] if k == month) for name in FAULT_CLASSES}
    for pool in pools.values():
        rng.shuffle(pool)
    order = sorted(FAULT_CLASSES, key=lambda name: (len(pools[name]), name))
    budget = [100_000]

    def assign(position: int, taken: dict[int, str]) -> dict[int, str] | None:
        if position == len(order):
            return taken
        name = order[position]
        for contract in pools[name]:
            budget[0] -= 1
            if budget[0] < 0:
                return None
            if contract in taken:
                continue
            found = assign(position + 1, {**taken, contract: name})
            if found is not None:
                return found
        return None

    matching = assign(0, {})
    if matching is None:
        short = min(order, key=lambda name: len(pools[name]))
        raise ProfileError(
            profile.source,
            "fault_month",
            f"cannot seed each of the {len(FAULT_CLASSES)} fault classes on its own contract in month {month} "
            f"({len(pools[short])} contract(s) can carry {short}); use another seed or more contracts",
        )
    return {(contract, month): name for contract, name in matching.items()}


def _money_amounts(amounts: Mapping[str, int]) -> dict[str, str]:
    return {key: format_minor(value) for key, value in sorted(amounts.items())}


def _seed_fault(
    name: str, plan: _Plan, k: int, state: _State, clean: dict[str, Any], rng: random.Random
) -> tuple[dict[str, Any], dict[str, Any]] | None:
    certificate = copy.deepcopy(clean)
    on = date.fromisoformat(certificate["date"])
    lines: list[str]
    amounts: dict[str, int]
    if name == QUANTITY_BEYOND_BILL:
        progressing = _progressing(certificate)
        target = rng.choice(progressing or certificate["lines"])
        line = plan.line_index[target["boq_line"]]
        allowed = line.bill_centi + sum(
            v["quantity_change"] or 0 for v in certificate["variations"] if v["boq_line"] == line.id
        )
        excess = max(100, int(line.bill_centi * (0.05 + 0.2 * rng.random())))
        quantity = allowed + excess
        rate = _rate_in_force(plan, line.id, on)
        target["quantity_to_date"] = quantity
        target["value_to_date"] = target["previous_value"] + _value(quantity - target["previous_quantity"], rate)
        _foot(plan, certificate)
        lines, amounts = [line.id], {"excess_quantity_centi": excess, "excess_value": _value(excess, rate)}
        detail = f"line {line.id} certified {excess / 100:.2f} {line.unit} beyond its bill and instructed quantity"
    elif name == SUPERSEDED_RATE:
        repricings = _superseded_options(plan, certificate)
        if not repricings:
            return None
        target, old_rate = rng.choice(repricings)
        period_q = target["quantity_to_date"] - target["previous_quantity"]
        in_force = _value(period_q, _rate_in_force(plan, target["boq_line"], on))
        stated = _value(period_q, old_rate)
        target["value_to_date"] = target["previous_value"] + stated
        _foot(plan, certificate)
        lines, amounts = (
            [target["boq_line"]],
            {"stated": stated, "at_rate_in_force": in_force, "difference": stated - in_force},
        )
        detail = f"line {target['boq_line']} valued this period at the superseded rate {format_minor(old_rate)}"
    elif name == RETENTION_RELEASED_TWICE:
        if not (state.released > 0 and certificate["release_events"]):
            return None
        certificate["release_events"] = [PRACTICAL_COMPLETION, PRACTICAL_COMPLETION]
        _foot(plan, certificate)
        released = certificate["totals"]["retention_released"]
        lines, amounts = [f"retention:{PRACTICAL_COMPLETION}"], {"released": released, "excess": released // 2}
        detail = "the practical-completion share of retention is released a second time"
    elif name == SCOPE_IN_TWO_PACKAGES:
        progressing = _progressing(certificate)
        if len(plan.packages) < 2 or not progressing:
            return None
        target = rng.choice(progressing)
        other = rng.choice([p for p, _, _ in plan.packages if p != target["package"]])
        period_q = target["quantity_to_date"] - target["previous_quantity"]
        period_v = target["value_to_date"] - target["previous_value"]
        certificate["lines"].append(
            {
                "boq_line": target["boq_line"],
                "package": other,
                "scope_hash": target["scope_hash"],
                "quantity_to_date": period_q,
                "value_to_date": period_v,
                "previous_quantity": 0,
                "previous_value": 0,
            }
        )
        certificate["lines"].sort(key=lambda line: (line["package"], line["boq_line"]))
        _foot(plan, certificate)
        lines, amounts = [f"{other}/{target['boq_line']}"], {"overlap": period_v}
        detail = f"line {target['boq_line']} of package {target['package']} is billed again through package {other}"
    elif name == MIXED_BASIS_STATEMENT:
        restatable = _mixed_options(certificate)
        if len(restatable) < 2:
            return None
        mixed = rng.sample(restatable, k=min(len(restatable), rng.randint(2, 3)))
        understated = 0
        for target in mixed:
            understated += target["previous_value"]
            target["quantity_to_date"] -= target["previous_quantity"]
            target["value_to_date"] -= target["previous_value"]
            target["previous_quantity"] = 0
            target["previous_value"] = 0
        _foot(plan, certificate)
        lines = sorted(t["boq_line"] for t in mixed)
        amounts = {"previous_value_dropped": understated}
        detail = f"lines {', '.join(lines)} are stated for this period only inside a cumulative statement"
    elif name == ADVANCE_NOT_AMORTISED:
        scheduled = certificate["totals"]["advance_repaid"]
        if scheduled - state.advance_repaid < 100:
            return None
        _foot(plan, certificate, advance=state.advance_repaid)
        lines, amounts = (
            [],
            {"stated": state.advance_repaid, "scheduled": scheduled, "difference": state.advance_repaid - scheduled},
        )
        detail = "no advance repayment is deducted although the schedule requires one"
    elif name == MATERIALS_NOT_REVERSED:
        unreversed = _unreversed_options(plan, state, certificate)
        if not unreversed:
            return None
        item_id = rng.choice(unreversed)
        item = next(m for m in plan.materials[k - 1] if m["id"] == item_id)
        certificate["materials_on_site"].append(copy.deepcopy(item))
        _foot(plan, certificate)
        lines, amounts = [item_id], {"not_reversed": item["amount"]}
        detail = f"materials item {item_id} for line {item['boq_line']} is still claimed after incorporation"
    elif name == ARITHMETIC_NOT_FOOTING:
        totals = certificate["totals"]
        delta = rng.randint(100, max(200, abs(totals["amount_due"]) // 20))
        variant = rng.choice(("amount_due", "package", "gross"))
        if variant == "amount_due":
            totals["amount_due"] += delta
        elif variant == "package":
            certificate["packages"][int(rng.random() * len(certificate["packages"]))]["value_to_date"] += delta
        else:
            for key in ("gross", "net_to_date", "amount_due"):
                totals[key] += delta
        lines, amounts = [], {"difference": delta}
        detail = f"the {variant.replace('_', ' ')} does not add up from its parts by {format_minor(delta)}"
    else:
        raise ValueError(f"unknown fault class {name!r}")
    record = {
        "certificate": certificate["id"],
        "contract": plan.id,
        "number": k,
        "period": certificate["period"],
        "class": name,
        "lines": lines,
        "amounts": _money_amounts(amounts),
        "detail": detail,
    }
    return certificate, record


# --- duplicate submissions -------------------------------------------------------------------------------------


def _vendor_variant(name: str, rng: random.Random) -> str:
    variants = [
        name.replace(" Ltd", " Limited").replace(" plc", " PLC").replace(" LLP", " L.L.P."),
        name.upper(),
        name.replace(" ", "  ", 1),
        name.replace(" Ltd", " Ltd.").replace(" plc", " p.l.c."),
        name.replace("Construction", "Constructions").replace("Contractors", "Contractor"),
        name.lower(),
    ]
    return rng.choice([v for v in variants if v != name] or [name + "."])


def _description_variant(description: str, rng: random.Random) -> str:
    lead = _DESCRIPTION_LEADS[0]
    rest = description[len(lead) :] if description.startswith(lead) else " " + description
    choice = rng.randint(0, 3)
    if choice == 0:
        return rng.choice(_DESCRIPTION_LEADS[1:]) + rest
    if choice == 1:
        return (lead + rest).replace(", works to", " - works up to")
    if choice == 2:
        return (lead + rest).replace(":", " no.", 1)
    return rng.choice(_DESCRIPTION_LEADS[1:]) + rest.replace(", works to", " for works to")


def _duplicates(
    rng: random.Random, pool: list[tuple[_Plan, dict[str, Any]]], profile: ConstructionProfile, seed: int
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    count = int((Decimal(profile.contracts * profile.months) * profile.duplicate_rate).quantize(Decimal(1)))
    eligible = [(plan, c) for plan, c in pool if c["number"] >= 2 and c["totals"]["amount_due"] > 0]
    if profile.fault_month is not None:
        count = 1
        eligible = [(plan, c) for plan, c in eligible if c["number"] == profile.fault_month]
        if not eligible:
            raise ProfileError(
                profile.source, "fault_month", f"no clean certificate with an amount due in month {profile.fault_month}"
            )
    picked = rng.sample(eligible, k=min(count, len(eligible)))
    duplicates = []
    for plan, original in sorted(picked, key=lambda item: item[1]["id"]):
        duplicate = copy.deepcopy(original)
        duplicate["id"] = _certificate_id(seed, plan.id, original["number"], "resubmitted")
        duplicate["vendor"] = _vendor_variant(original["vendor"], rng)
        duplicate["description"] = _description_variant(original["description"], rng)
        duplicate["date"] = (date.fromisoformat(original["date"]) + timedelta(days=rng.randint(3, 28))).isoformat()
        duplicate["duplicate_of"] = original["id"]
        if rng.random() < 0.3:
            progressing = _progressing(duplicate)
            if progressing:
                target = rng.choice(progressing)
                period_v = target["value_to_date"] - target["previous_value"]
                target["value_to_date"] += max(1, int(period_v * (0.005 + 0.015 * rng.random())))
                _foot(plan, duplicate)
        overlapping = [
            line["boq_line"] for line in duplicate["lines"] if line["value_to_date"] != line["previous_value"]
        ]
        duplicates.append(
            (
                duplicate,
                {
                    "certificate": duplicate["id"],
                    "original": original["id"],
                    "contract": plan.id,
                    "number": original["number"],
                    "class": DUPLICATE_SUBMISSION,
                    "lines": overlapping,
                    "amounts": _money_amounts(
                        {"amount_due": duplicate["totals"]["amount_due"], "original": original["totals"]["amount_due"]}
                    ),
                },
            )
        )
    return duplicates


def _assign_invoice_numbers(submissions: list[dict[str, Any]], plans: list[_Plan]) -> None:
    codes = {plan.id: plan.vendor_code for plan in plans}
    counters: dict[str, int] = {}
    for certificate in sorted(submissions, key=lambda c: (c["date"], c["contract"], c["number"], c["id"])):
        code = codes[certificate["contract"]]
        counters[code] = counters.get(code, 0) + 1
        certificate["invoice_number"] = f"{code}/{certificate['date'][:4]}/{counters[code]:04d}"


# --- files -----------------------------------------------------------------------------------------------------


def _contract_json(plan: _Plan, profile: ConstructionProfile) -> dict[str, Any]:
    return {
        "id": plan.id,
        "form": plan.form,
        "title": plan.title,
        "contractor": {"vendor_id": plan.vendor_id, "name": plan.vendor_name},
        "currency": profile.currency,
        "start_period": profile.start_period,
        "boq": [
            {
                "id": line.id,
                "package": line.package,
                "description": line.description,
                "unit": line.unit,
                "quantity": format_minor(line.bill_centi),
                "rate": format_minor(line.rate_minor),
            }
            for line in plan.lines
        ],
        "rate_versions": [
            {
                "version": version,
                "effective_from": effective.isoformat(),
                "rates": {line_id: format_minor(rate) for line_id, rate in rates.items()},
            }
            for version, effective, rates in plan.rate_versions
        ],
        "retention": {
            "rate": str(plan.retention_rate),
            "cap": format_minor(plan.retention_cap),
            "release_at_practical_completion": str(plan.release_share),
            "defects_period_months": plan.defects_months,
        },
        "advance": {
            "amount": format_minor(plan.advance_amount),
            "start_pct": str(plan.advance_start),
            "rate": str(plan.advance_rate),
            "repaid_by_pct": str(plan.advance_repaid_by),
        },
        "packages": [
            {
                "id": package_id,
                "name": name,
                "scope": {line_id: plan.line_index[line_id].scope_hash for line_id in members},
            }
            for package_id, name, members in plan.packages
        ],
        "practical_completion": None if plan.completion is None else plan.completion.isoformat(),
        "clause_refs": plan.clause_refs,
    }


def _certificate_json(certificate: dict[str, Any]) -> dict[str, Any]:
    return certificate_record(certificate)
