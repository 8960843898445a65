"""Approve with edits: a quantity surveyor certifies another sum than the one proposed, line by line, with reasons.

Pure (no I/O). An amendment carries the certified and the proposed sums in the currency's minor units, and each line
adjustment (the line's reference, its proposed and certified minor units, the reason); the lines' differences add up
to the certified sum minus the proposed one. Its digest is taken over one canonical text the database computes the
same way (`public.amendment_digest`, migration approve_with_edits): the person's signature covers that digest,
so what they signed is what the row records.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from countersign.money.units import minor_units

AMENDING_ROLE = "quantity_surveyor"
"""The role a person needs, besides the gate's approver role, to certify another sum (`certificate_amending_role()`
in the database)."""

PURPOSE = "countersign.amendment.v1"
MAX_LINES = 200
MAX_LINE_CHARS = 200
MAX_REASON_CHARS = 2000
MAX_ABS_MINOR = 10**17


class AmendmentInvalid(ValueError):
    """An amendment that cannot be certified; `field` names what was wrong."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


@dataclass(frozen=True)
class LineAdjustment:
    line: str
    proposed_minor: int
    certified_minor: int
    reason: str

    @property
    def difference_minor(self) -> int:
        return self.certified_minor - self.proposed_minor

    def as_json(self) -> dict[str, Any]:
        return {
            "line": self.line,
            "proposed_minor": self.proposed_minor,
            "certified_minor": self.certified_minor,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class Amendment:
    currency: str
    proposed_minor: int
    certified_minor: int
    adjustments: tuple[LineAdjustment, ...]

    def canonical_text(self) -> str:
        """Each part as `<characters>:<text>;`: the purpose, the currency, both sums, the number of lines, then each
        line's reference, proposed, certified and reason."""
        parts = [PURPOSE, self.currency.upper(), str(self.proposed_minor), str(self.certified_minor)]
        parts.append(str(len(self.adjustments)))
        for item in self.adjustments:
            parts += [item.line, str(item.proposed_minor), str(item.certified_minor), item.reason]
        return "".join(f"{len(part)}:{part};" for part in parts)

    def digest(self) -> str:
        return hashlib.sha256(self.canonical_text().encode("utf-8")).hexdigest()

    def adjustments_json(self) -> list[dict[str, Any]]:
        return [item.as_json() for item in self.adjustments]

    @property
    def certified(self) -> Decimal:
        return from_minor(self.certified_minor, self.currency)

    @property
    def proposed(self) -> Decimal:
        return from_minor(self.proposed_minor, self.currency)


def to_minor(amount: Decimal, currency: str, *, field: str) -> int:
    """`amount` in `currency`'s minor units, refused when it has more places than the currency writes."""
    scaled = amount.scaleb(minor_units(currency))
    if not scaled.is_finite() or scaled != scaled.to_integral_value():
        raise AmendmentInvalid(field, f"{amount} has more decimal places than {currency} has")
    return int(scaled)


def from_minor(minor: int, currency: str) -> Decimal:
    places = minor_units(currency)
    return Decimal(minor).scaleb(-places).quantize(Decimal(1).scaleb(-places))


def _amount(value: Any, currency: str, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise AmendmentInvalid(field, 'must be a decimal amount written as text, e.g. "41250.00"')
    try:
        amount = Decimal(str(value).strip())
    except InvalidOperation:
        raise AmendmentInvalid(field, f"{value!r} is not a decimal amount") from None
    minor = to_minor(amount, currency, field=field)
    if abs(minor) > MAX_ABS_MINOR:
        raise AmendmentInvalid(field, "is implausibly large")
    return minor


def _text(value: Any, field: str, limit: int) -> str:
    if not isinstance(value, str) or not value.strip():
        raise AmendmentInvalid(field, "is required and must be non-blank text")
    if len(value) > limit:
        raise AmendmentInvalid(field, f"is longer than {limit} characters")
    if "\x00" in value:
        raise AmendmentInvalid(field, "contains a NUL character")
    return value


def parse_amendment(data: Any) -> Amendment:
    """An amendment from a door's body: `{"currency", "proposed", "certified", "lines": [{"line", "proposed",
    "certified", "reason"}]}`, amounts as decimal text. Checks its own arithmetic; `check_against` checks it against
    the gate."""
    if not isinstance(data, Mapping):
        raise AmendmentInvalid("amendment", "must be an object")
    unknown = sorted(set(data) - {"currency", "proposed", "certified", "lines"})
    if unknown:
        raise AmendmentInvalid(f"amendment.{unknown[0]}", "is not a known field")
    currency = data.get("currency")
    if not isinstance(currency, str) or len(currency) != 3 or not currency.isalpha() or not currency.isascii():
        raise AmendmentInvalid("amendment.currency", "must be a three-letter currency code")
    currency = currency.upper()
    proposed = _amount(data.get("proposed"), currency, "amendment.proposed")
    certified = _amount(data.get("certified"), currency, "amendment.certified")
    lines = data.get("lines")
    if not isinstance(lines, Sequence) or isinstance(lines, str) or not 1 <= len(lines) <= MAX_LINES:
        raise AmendmentInvalid("amendment.lines", f"must list between 1 and {MAX_LINES} line adjustments")
    adjustments: list[LineAdjustment] = []
    for n, raw in enumerate(lines):
        where = f"amendment.lines[{n}]"
        if not isinstance(raw, Mapping) or set(raw) != {"line", "proposed", "certified", "reason"}:
            raise AmendmentInvalid(where, "must be {line, proposed, certified, reason}")
        adjustments.append(
            LineAdjustment(
                line=_text(raw["line"], f"{where}.line", MAX_LINE_CHARS),
                proposed_minor=_amount(raw["proposed"], currency, f"{where}.proposed"),
                certified_minor=_amount(raw["certified"], currency, f"{where}.certified"),
                reason=_text(raw["reason"], f"{where}.reason", MAX_REASON_CHARS),
            )
        )
    amendment = Amendment(currency, proposed, certified, tuple(adjustments))
    check_arithmetic(amendment)
    return amendment


def check_arithmetic(amendment: Amendment) -> None:
    """The lines are distinct and their differences add up to the certified sum minus the proposed one."""
    lines = [item.line for item in amendment.adjustments]
    if len(set(lines)) != len(lines):
        raise AmendmentInvalid("amendment.lines", "adjust each line once")
    total = sum(item.difference_minor for item in amendment.adjustments)
    if total != amendment.certified_minor - amendment.proposed_minor:
        raise AmendmentInvalid(
            "amendment.lines",
            f"the line adjustments add up to {from_minor(total, amendment.currency)} {amendment.currency}, not the"
            f" certified minus the proposed sum"
            f" ({from_minor(amendment.certified_minor - amendment.proposed_minor, amendment.currency)}"
            f" {amendment.currency})",
        )


def check_against(amendment: Amendment, *, currency: str, proposed: Decimal, claimed: Decimal, reason: str) -> None:
    """The amendment fits the gate it is for: its currency, the sum the gate proposes, between zero and the claim, with
    the approver's reason. Raises AmendmentInvalid."""
    if amendment.currency != currency.upper():
        raise AmendmentInvalid("amendment.currency", f"the certificate is in {currency}, not {amendment.currency}")
    if amendment.proposed_minor != to_minor(proposed, currency, field="amendment.proposed"):
        raise AmendmentInvalid("amendment.proposed", f"the gate proposes {proposed} {currency}")
    claim = to_minor(claimed, currency, field="amendment.certified")
    if not 0 <= amendment.certified_minor <= claim:
        raise AmendmentInvalid(
            "amendment.certified", f"must be between 0 and the sum applied for ({claimed} {currency})"
        )
    if amendment.certified_minor == amendment.proposed_minor:
        raise AmendmentInvalid("amendment.certified", "is the proposed sum: approve it without an amendment")
    if not reason.strip():
        raise AmendmentInvalid("reason", "an amended sum needs the approver's reason")
    check_arithmetic(amendment)


def amendment_from_row(
    currency: str | None, proposed_minor: int | None, certified_minor: int | None, adjustments: Any
) -> Amendment | None:
    """The amendment a `gate_decision` row records, or None for a plain decision."""
    if currency is None or proposed_minor is None or certified_minor is None or adjustments is None:
        return None
    return Amendment(
        currency.strip(),
        int(proposed_minor),
        int(certified_minor),
        tuple(
            LineAdjustment(str(a["line"]), int(a["proposed_minor"]), int(a["certified_minor"]), str(a["reason"]))
            for a in adjustments
        ),
    )


def may_amend(roles: Sequence[str], gate_kind: str, summary: Mapping[str, Any] | None) -> bool:
    """Whether a person who may decide this gate may also certify another sum on it: a quantity surveyor on a
    certificate's payment approval gate (the board offers the amend form by it; the writer and the database judge)."""
    return (
        AMENDING_ROLE in roles
        and gate_kind == "approval"
        and isinstance(summary, Mapping)
        and summary.get("kind") == "payment"
        and isinstance(summary.get("certificate"), Mapping)
    )
