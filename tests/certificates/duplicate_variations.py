"""Vendor data the duplicate detector was not written against: the shipped generator's output, transformed.

Every seeded re-submission takes one of the variations independently generated certificates showed (issue 22), in
turn: a legal form dropped or re-spelled in the vendor's name, every period value inflated 6-8 % (the same quantities:
a full scope overlap), sent 47-59 days after the original, or sent the same day under an id that sorts before the
original's (numbered as the next application, so later in submission order), or with one line claimed further by
1-4 % of the amount due (a partial overlap, judged by the thresholds); or left as the generator made it.
Legitimate look-alikes are added, none of which may be held: a correction naming the certificate it supersedes, a
sister contract's retention release with the same wording, and on every other vendor's contracts application numbers
that restart per contract (`application_numbering: contract`), so the same number recurs across its contracts.

Used by the variation tests and by `bench/bench_duplicates.py` (the threshold sweep in docs/benchmarks.md).
"""

from __future__ import annotations

import dataclasses
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum

from countersign.certificates import Certificate, Contract
from countersign.certificates.model import ApplicationNumbering, Conventions, RetentionRelease
from countersign.certificates.pipeline import submission_order


class Variation(StrEnum):
    AS_GENERATED = "as generated"
    LEGAL_FORM = "legal form dropped or re-spelled"
    INFLATED = "inflated 6-8 %, full overlap"
    LATE = "47-59 days later"
    SAME_DAY = "same day, id sorting first"
    EXTENDED = "one line claimed further, partial overlap"


class LookAlike(StrEnum):
    CORRECTION = "correction naming what it supersedes"
    SISTER_RELEASE = "sister contract's release"
    RESTARTED_NUMBER = "application number restarting per contract"


@dataclass(frozen=True)
class VariedSet:
    contracts: dict[str, Contract]
    certificates: list[Certificate]
    duplicates: dict[str, str]
    """Re-submission id -> the original it duplicates."""
    variations: dict[str, Variation]
    """Re-submission id -> how it was varied."""
    look_alikes: dict[str, LookAlike]
    """Legitimate certificate id -> what makes it look like a re-submission (none may be held)."""


_LEGAL_FORM_SPELLINGS = (
    ("", ""),  # dropped entirely
    (" Limited", " Company"),
    (" Ltd.", " Co."),
    (" LIMITED", " & Co"),
)


def _respelled(vendor: str, choice: int) -> str:
    for form in (" Ltd", " Limited", " plc", " LLP"):
        if vendor.endswith(form):
            stem = vendor[: -len(form)]
            limited, other = _LEGAL_FORM_SPELLINGS[choice % len(_LEGAL_FORM_SPELLINGS)]
            replacement = limited if form in (" Ltd", " Limited") else other if choice % 2 else ""
            return stem.replace(" and ", " & ") + replacement
    return vendor + " Ltd"


def _inflated(certificate: Certificate, percent: int) -> Certificate:
    extra = 0
    lines = []
    for line in certificate.lines:
        more = line.period_value_minor * percent // 100 if line.period_value_minor > 0 else 0
        extra += more
        lines.append(dataclasses.replace(line, value_to_date_minor=line.value_to_date_minor + more))
    totals = dataclasses.replace(certificate.totals, amount_due_minor=certificate.totals.amount_due_minor + extra)
    return dataclasses.replace(certificate, lines=tuple(lines), totals=totals)


def _extended(certificate: Certificate, percent: int) -> Certificate:
    """The line with the largest period claim taken further, at its own rate, by `percent` % of the amount due."""
    lines = list(certificate.lines)
    at = max(range(len(lines)), key=lambda i: lines[i].period_value_minor)
    line = lines[at]
    if line.period_value_minor <= 0:
        return certificate  # no line work to extend
    more_value = min(line.period_value_minor, certificate.totals.amount_due_minor * percent // 100)
    more_quantity = line.period_quantity_centi * more_value // line.period_value_minor
    lines[at] = dataclasses.replace(
        line,
        quantity_to_date_centi=line.quantity_to_date_centi + more_quantity,
        value_to_date_minor=line.value_to_date_minor + more_value,
    )
    totals = dataclasses.replace(certificate.totals, amount_due_minor=certificate.totals.amount_due_minor + more_value)
    return dataclasses.replace(certificate, lines=tuple(lines), totals=totals)


def _vary(duplicate: Certificate, original: Certificate, variation: Variation, rng: random.Random) -> Certificate:
    if variation is Variation.LEGAL_FORM:
        return dataclasses.replace(duplicate, vendor=_respelled(original.vendor, rng.randrange(8)))
    if variation is Variation.INFLATED:
        return _inflated(duplicate, rng.randint(6, 8))
    if variation is Variation.LATE:
        return dataclasses.replace(duplicate, date=original.date + timedelta(days=rng.randint(47, 59)))
    if variation is Variation.EXTENDED:
        return _extended(duplicate, rng.randint(1, 4))
    if variation is Variation.SAME_DAY:
        return dataclasses.replace(
            duplicate, id=f"IPC-000{rng.randrange(10**9):09d}", date=original.date, number=original.number + 1
        )
    return duplicate


def vary(
    contracts: Mapping[str, Contract],
    certificates: list[Certificate],
    duplicates: Mapping[str, str],
    seed: int,
    *,
    look_alikes: int = 12,
) -> VariedSet:
    """The generated set with its re-submissions varied and `look_alikes` of each legitimate kind added."""
    rng = random.Random(seed)
    by_id = {c.id: c for c in certificates}
    kinds = list(Variation)
    varied: dict[str, Certificate] = {}
    variations: dict[str, Variation] = {}
    truth: dict[str, str] = {}
    for index, (duplicate_id, original_id) in enumerate(sorted(duplicates.items())):
        variation = kinds[index % len(kinds)]
        made = _vary(by_id[duplicate_id], by_id[original_id], variation, rng)
        varied[duplicate_id] = made
        variations[made.id] = variation
        truth[made.id] = original_id
    out = [varied.get(c.id, c) for c in certificates]

    vendors = sorted({c.vendor_id for c in contracts.values()})
    restarting = set(vendors[1::2])
    per_contract = Conventions.declaring(application_numbering=ApplicationNumbering.CONTRACT)
    new_contracts = {
        cid: dataclasses.replace(c, conventions=per_contract) if c.vendor_id in restarting else c
        for cid, c in contracts.items()
    }
    found: dict[str, LookAlike] = {}
    originals = set(truth.values())
    for index, certificate in enumerate(out):
        if new_contracts[certificate.contract].vendor_id in restarting:
            suffix = "R" if certificate.id in truth else ""
            out[index] = dataclasses.replace(certificate, invoice_number=f"APP-{certificate.number:03d}{suffix}")
            if certificate.number > 1 and certificate.id not in truth:
                found[certificate.id] = LookAlike.RESTARTED_NUMBER

    clean = [c for c in out if c.id not in truth and c.id not in originals and c.totals.amount_due_minor > 0]
    for number, original in enumerate(rng.sample(clean, k=min(look_alikes, len(clean)))):
        correction = dataclasses.replace(
            _inflated(original, rng.randint(1, 3)),
            id=f"IPC-CORR{number:08d}",
            invoice_number=f"{original.invoice_number}-C",
            date=original.date + timedelta(days=rng.randint(2, 10)),
            supersedes=original.id,
        )
        out.append(correction)
        found[correction.id] = LookAlike.CORRECTION

    sisters = _sister_releases(new_contracts, out, rng, look_alikes)
    out.extend(sisters)
    found.update({c.id: LookAlike.SISTER_RELEASE for c in sisters})
    out.sort(key=submission_order)
    return VariedSet(new_contracts, out, truth, variations, found)


def _sister_releases(
    contracts: Mapping[str, Contract], certificates: list[Certificate], rng: random.Random, count: int
) -> list[Certificate]:
    """For certificates that release retention, the same release worded the same on a sister contract of the same
    vendor (its own contract: no bill-line progress, so no common scope), a few days later. A sister whose own
    valuations name the same numbers (valuation number and date of the works, as contracts valued in step do) is
    passed over: there the release would restate the sister's own valuation, which is a duplicate."""
    by_vendor: dict[str, list[str]] = {}
    for contract in contracts.values():
        by_vendor.setdefault(contract.vendor_id, []).append(contract.id)
    releasing = [
        c
        for c in certificates
        if c.retention_releases
        and c.totals.amount_due_minor > 0
        and len(by_vendor[contracts[c.contract].vendor_id]) > 1
    ]
    made = []
    for number, release in enumerate(rng.sample(releasing, k=min(count, len(releasing)))):
        numbers = _numbers(release.description)
        restating = {c.contract for c in certificates if _numbers(c.description) == numbers}
        sisters = [cid for cid in by_vendor[contracts[release.contract].vendor_id] if cid not in restating]
        if not sisters:
            continue
        sister = rng.choice(sisters)
        still = tuple(
            dataclasses.replace(
                line, previous_quantity_centi=line.quantity_to_date_centi, previous_value_minor=line.value_to_date_minor
            )
            for line in release.lines
        )
        amount = release.totals.amount_due_minor
        made.append(
            dataclasses.replace(
                release,
                id=f"IPC-SIST{number:08d}",
                contract=sister,
                number=release.number,
                invoice_number=f"{release.invoice_number}-S",
                lines=still,
                variations=(),
                materials_on_site=(),
                retention_releases=(RetentionRelease("practical_completion", amount),),
                totals=dataclasses.replace(release.totals, amount_due_minor=amount),
                date=release.date + timedelta(days=rng.randint(1, 5)),
            )
        )
    return made


def _numbers(description: str) -> frozenset[str]:
    return frozenset(re.findall(r"\d+", description))
