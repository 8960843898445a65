"""`payments check`: the domain's checks alone over a construction set, with no database and nothing started.

The dry run a surveyor uses before submitting: every certificate in submission order, held or not; each violated
invariant with its amounts in the contract's currency; each duplicate hold naming the certificate it repeats. It
calls `countersign.certificates.pipeline.run_pipeline`, the same stage order a payment run follows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from enum import StrEnum
from typing import Any

from countersign.certificates import Certificate, Contract
from countersign.certificates.model import amount_text
from countersign.certificates.pipeline import run_pipeline, submission_order


class CheckVerdict(StrEnum):
    CLEAR = "clear"
    """No duplicate, no violated invariant: the certificate would go on to be certified."""
    HELD = "held"


@dataclass(frozen=True)
class Money:
    amount: Decimal
    currency: str

    def __str__(self) -> str:
        return amount_text(self.amount, self.currency)

    def as_json(self) -> dict[str, str]:
        return {"amount": f"{self.amount:.2f}", "currency": self.currency}


@dataclass(frozen=True)
class ViolationFound:
    invariant: str
    explanation: str
    amounts: Mapping[str, Money]
    lines: tuple[str, ...]
    clauses: tuple[str, ...]


@dataclass(frozen=True)
class DuplicateFound:
    other_certificate: str
    other_line: str
    overlap: Money
    explanation: str


@dataclass(frozen=True)
class CertificateChecked:
    certificate_id: str
    contract_id: str
    number: int
    period: str
    submitted_on: date
    amount_due: Money
    verdict: CheckVerdict
    violations: tuple[ViolationFound, ...]
    duplicate: DuplicateFound | None
    sources: Mapping[str, str]


@dataclass(frozen=True)
class CheckReport:
    certificates: tuple[CertificateChecked, ...]

    @property
    def held(self) -> tuple[CertificateChecked, ...]:
        return tuple(c for c in self.certificates if c.verdict == CheckVerdict.HELD)

    def as_json(self) -> dict[str, Any]:
        return {
            "summary": {
                "certificates": len(self.certificates),
                "held": len(self.held),
                "clear": len(self.certificates) - len(self.held),
            },
            "certificates": [
                {
                    "certificate": c.certificate_id,
                    "contract": c.contract_id,
                    "number": c.number,
                    "period": c.period,
                    "date": c.submitted_on.isoformat(),
                    "amount_due": c.amount_due.as_json(),
                    "verdict": c.verdict.value,
                    "violations": [
                        {
                            "invariant": v.invariant,
                            "explanation": v.explanation,
                            "amounts": {name: money.as_json() for name, money in v.amounts.items()},
                            "lines": list(v.lines),
                            "clauses": list(v.clauses),
                        }
                        for v in c.violations
                    ],
                    "duplicate_of": None
                    if c.duplicate is None
                    else {
                        "certificate": c.duplicate.other_certificate,
                        "line": c.duplicate.other_line,
                        "overlap": c.duplicate.overlap.as_json(),
                        "explanation": c.duplicate.explanation,
                    },
                    "sources": dict(c.sources),
                }
                for c in self.certificates
            ],
        }


def check_certificates(contracts: Mapping[str, Contract], certificates: tuple[Certificate, ...]) -> CheckReport:
    """Every certificate through the pipeline, reported in submission order."""
    run = run_pipeline(contracts, certificates)
    holds = {hold.certificate: hold for hold in run.holds}
    assessments = {assessment.certificate.id: assessment for assessment in run.assessments}
    checked: list[CertificateChecked] = []
    for certificate in sorted(certificates, key=submission_order):
        currency = contracts[certificate.contract].currency
        hold = holds.get(certificate.id)
        assessment = assessments.get(certificate.id)
        violations = tuple(
            ViolationFound(
                invariant=result.name,
                explanation=result.explanation,
                amounts={name: Money(value, currency) for name, value in result.amounts.items()},
                lines=result.lines,
                clauses=result.clause_ids,
            )
            for result in (assessment.violations if assessment is not None else ())
        )
        duplicate = (
            None
            if hold is None
            else DuplicateFound(
                other_certificate=hold.other_certificate,
                other_line=hold.other_line,
                overlap=Money(hold.overlap, currency),
                explanation=hold.explanation(currency),
            )
        )
        held = duplicate is not None or bool(violations)
        checked.append(
            CertificateChecked(
                certificate_id=certificate.id,
                contract_id=certificate.contract,
                number=certificate.number,
                period=certificate.period,
                submitted_on=certificate.date,
                amount_due=Money(Decimal(certificate.totals.amount_due_minor).scaleb(-2), currency),
                verdict=CheckVerdict.HELD if held else CheckVerdict.CLEAR,
                violations=violations,
                duplicate=duplicate,
                sources=certificate.sources,
            )
        )
    return CheckReport(tuple(checked))
