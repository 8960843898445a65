"""One contract's certificate history assessed in order: each certificate against the position before it.

The position advances only on a certificate with no violation. A certificate with a violation is held (it goes to
the payment gate, not into "previously certified"), so the next certificate is tested against the last certified one.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from countersign.certificates.conventions import read_conventions
from countersign.certificates.invariants import InvariantResult, check_certificate
from countersign.certificates.model import Certificate, Contract
from countersign.certificates.reconstruction import Position, advance_position, opening_position


@dataclass(frozen=True)
class CertificateAssessment:
    certificate: Certificate
    position: Position
    """The position reconstructed from every certified certificate before this one."""
    results: tuple[InvariantResult, ...]
    questions: tuple[str, ...] = ()
    """What the contract's documents could not show (a convention it does not declare), asked at the gate in words."""

    @property
    def notes(self) -> tuple[str, ...]:
        """What the passing checks accepted that the approver should see (a variation revalued)."""
        return tuple(note for result in self.results for note in result.notes)

    @property
    def violations(self) -> tuple[InvariantResult, ...]:
        return tuple(result for result in self.results if result.violated)

    @property
    def certified(self) -> bool:
        return not self.violations


def assess_certificate(
    contract: Contract,
    position: Position,
    certificate: Certificate,
    *,
    disabled: Iterable[str] = (),
    read_documents: bool = True,
) -> CertificateAssessment:
    """One certificate's checks against `position`, with the questions its contract's documents leave open."""
    results = check_certificate(contract, position, certificate, disabled=disabled, read_documents=read_documents)
    questions = read_conventions(contract, position, certificate).questions if read_documents else ()
    return CertificateAssessment(certificate=certificate, position=position, results=results, questions=questions)


def certificate_order(certificate: Certificate) -> tuple[int, str, str]:
    return (certificate.number, certificate.date.isoformat(), certificate.id)


def assess_contract(
    contract: Contract,
    certificates: Sequence[Certificate],
    *,
    disabled: Iterable[str] = (),
    read_documents: bool = True,
) -> tuple[CertificateAssessment, ...]:
    """Assess `certificates` of `contract` in certificate order; raises ValueError for another contract's one."""
    skip = tuple(disabled)
    position = opening_position(contract)
    assessments = []
    for certificate in sorted(certificates, key=certificate_order):
        if certificate.contract != contract.id:
            raise ValueError(f"certificate {certificate.id} belongs to {certificate.contract}, not {contract.id}")
        assessment = assess_certificate(contract, position, certificate, disabled=skip, read_documents=read_documents)
        assessments.append(assessment)
        if assessment.certified:
            position = advance_position(position, contract, certificate)
    return tuple(assessments)
