"""The domain's stage order over a stream of submissions: duplicate check, then reconstruction and invariants.

Submissions are taken in submission order (date, contract, number, id). A duplicate hold stops a submission before
reconstruction. A certificate with an invariant violation is held too: it neither moves its contract's position nor
joins the certificates later submissions are checked for duplication against (a held certificate was never paid, so
re-submitting its work is not a second payment). The engine's duplicate stage compares the same way, with a rejected
payment gate in place of a violation (`countersign/engine/workflows/certificates/duplicate_check.py`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from countersign.certificates.assessment import CertificateAssessment, assess_certificate
from countersign.certificates.duplicates import DuplicateHold, DuplicateIndex, Thresholds, submission_of
from countersign.certificates.model import Certificate, Contract
from countersign.certificates.reconstruction import Position, advance_position, opening_position


@dataclass(frozen=True)
class PipelineRun:
    holds: tuple[DuplicateHold, ...]
    assessments: tuple[CertificateAssessment, ...]

    @property
    def certified(self) -> frozenset[str]:
        return frozenset(a.certificate.id for a in self.assessments if a.certified)


def submission_order(certificate: Certificate) -> tuple[str, str, int, str]:
    return (certificate.date.isoformat(), certificate.contract, certificate.number, certificate.id)


def run_pipeline(
    contracts: Mapping[str, Contract],
    certificates: Sequence[Certificate],
    *,
    thresholds: Thresholds | None = None,
    disabled: Iterable[str] = (),
    read_documents: bool = True,
) -> PipelineRun:
    skip = tuple(disabled)
    index = DuplicateIndex(thresholds)
    positions: dict[str, Position] = {}
    holds: list[DuplicateHold] = []
    assessments: list[CertificateAssessment] = []
    for certificate in sorted(certificates, key=submission_order):
        contract = contracts.get(certificate.contract)
        if contract is None:
            raise ValueError(f"certificate {certificate.id} names an unknown contract {certificate.contract}")
        submission = submission_of(certificate, contract, read_documents=read_documents)
        hold = index.check(submission)
        if hold is not None:
            holds.append(hold)
            continue
        position = positions.get(contract.id) or opening_position(contract)
        assessment = assess_certificate(contract, position, certificate, disabled=skip, read_documents=read_documents)
        assessments.append(assessment)
        positions[contract.id] = position
        if assessment.certified:
            positions[contract.id] = advance_position(position, contract, certificate)
            index.add(submission)
    return PipelineRun(holds=tuple(holds), assessments=tuple(assessments))
