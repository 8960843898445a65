"""The construction profile: how many contracts, how many monthly certificates, how often faults are seeded."""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import yaml

from countersign.synthetic.period import parse_period
from countersign.synthetic.profile import ProfileError, read_count

CONSTRUCTION_KIND = "construction"
MIN_MONTHS = 6
MAX_MONTHS = 60
FAULT_RATE_RANGE = (Decimal("0.02"), Decimal("0.03"))
MAX_DUPLICATE_RATE = Decimal("0.05")
_CURRENCY = re.compile(r"^[A-Z]{3}$")
_RATE = re.compile(r"^0\.\d{1,4}$")

_KEYS = ("kind", "currency", "start_period", "contracts", "months", "fault_rate", "duplicate_rate", "boq_lines")
_OPTIONAL_KEYS = ("fault_month",)
FIRST_FAULT_MONTH = 2
"""Certificate 1 has no certified position before it, so most fault classes cannot be seeded in month 1."""


@dataclass(frozen=True)
class ConstructionProfile:
    name: str
    source: str
    currency: str
    start_period: str
    contracts: int
    months: int
    fault_rate: Decimal
    duplicate_rate: Decimal
    min_boq_lines: int
    max_boq_lines: int
    fault_month: int | None = None
    """When set, each fault class is seeded exactly once in this month (and `fault_rate` is ignored)."""


def load_construction_profile(path: Path) -> ConstructionProfile:
    source = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileError(source, "<file>", f"cannot read profile: {exc}") from exc
    try:
        data = yaml.safe_load(text)
    except (yaml.YAMLError, ValueError, TypeError, RecursionError) as exc:
        raise ProfileError(source, "<yaml>", f"invalid YAML: {exc}") from exc
    return parse_construction_profile(data, source)


def parse_construction_profile(data: object, source: str) -> ConstructionProfile:
    if not isinstance(data, dict):
        raise ProfileError(source, "<root>", f"expected a mapping, got {type(data).__name__}")
    unknown = sorted(str(key) for key in data if key not in _KEYS + _OPTIONAL_KEYS)
    if unknown:
        raise ProfileError(source, unknown[0], f"unknown key (allowed: {', '.join(_KEYS + _OPTIONAL_KEYS)})")
    for key in _KEYS:
        if key not in data:
            raise ProfileError(source, key, "missing")
    if data["kind"] != CONSTRUCTION_KIND:
        raise ProfileError(source, "kind", f"expected {CONSTRUCTION_KIND!r}, got {data['kind']!r}")
    currency = data["currency"]
    if not isinstance(currency, str) or not _CURRENCY.match(currency):
        raise ProfileError(source, "currency", f"expected a 3-letter upper-case ISO code, got {currency!r}")
    start_period = data["start_period"]
    try:
        if not isinstance(start_period, str):
            raise ValueError(f"expected YYYY-MM, got {start_period!r}")
        parse_period(start_period)
    except ValueError as exc:
        raise ProfileError(source, "start_period", str(exc)) from exc
    fault_rate = _rate(data["fault_rate"], source, "fault_rate")
    low, high = FAULT_RATE_RANGE
    if not low <= fault_rate <= high:
        raise ProfileError(source, "fault_rate", f"must be between {low} and {high}, got {fault_rate}")
    duplicate_rate = _rate(data["duplicate_rate"], source, "duplicate_rate")
    if duplicate_rate > MAX_DUPLICATE_RATE:
        raise ProfileError(source, "duplicate_rate", f"must be at most {MAX_DUPLICATE_RATE}, got {duplicate_rate}")
    lines = data["boq_lines"]
    if not isinstance(lines, dict) or sorted(lines) != ["max", "min"]:
        raise ProfileError(source, "boq_lines", "expected a mapping {min, max}")
    min_lines = read_count(lines["min"], source, "boq_lines.min", minimum=4)
    max_lines = read_count(lines["max"], source, "boq_lines.max", minimum=min_lines)
    months = read_count(data["months"], source, "months", minimum=MIN_MONTHS, maximum=MAX_MONTHS)
    fault_month = data.get("fault_month")
    if fault_month is not None:
        fault_month = read_count(fault_month, source, "fault_month", minimum=FIRST_FAULT_MONTH, maximum=months)
    return ConstructionProfile(
        name=Path(source).stem,
        source=source,
        currency=currency,
        start_period=start_period,
        contracts=read_count(data["contracts"], source, "contracts", minimum=1),
        months=months,
        fault_rate=fault_rate,
        duplicate_rate=duplicate_rate,
        min_boq_lines=min_lines,
        max_boq_lines=max_lines,
        fault_month=fault_month,
    )


def _rate(value: Any, source: str, field: str) -> Decimal:
    if not isinstance(value, str) or not _RATE.match(value):
        raise ProfileError(source, field, f"expected a decimal string like '0.025', got {value!r}")
    return Decimal(value)
