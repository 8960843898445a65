"""One contract's certificate history assessed in order: each certificate against the position before it.

The position advances only on a certificate with no violation. A certificate with a violation is held (it goes to
the payment gate, not into "previously certified"), so the next certificate is tested against the last certified one.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from countersign.certificates.invariants import InvariantResult, check_certificate
from countersign.certificates.model import Certificate, Contract
from countersign.certificates.reconstruction import Position, advance_position, opening_position


@dataclass(frozen=True)
class CertificateAssessment:
    certificate: Certificate
    position: Position
    """The position reconstructed from every certified certificate before this one."""
    results: tuple[InvariantResult, ...]

    @property
    def violations(self) -> tuple[InvariantResult, ...]:
        return tuple(result for result in self.results if result.violated)

    @property
    def certified(self) -> bool:
        return not self.violations


def certificate_order(certificate: Certificate) -> tuple[int, str, str]:
    return (certificate.number, certificate.date.isoformat(), certificate.id)


def assess_contract(
    contract: Contract, certificates: Sequence[Certificate], *, disabled: Iterable[str] = ()
) -> tuple[CertificateAssessment, ...]:
    """Assess `certificates` of `contract` in certificate order; raises ValueError for another contract's one."""
    skip = tuple(disabled)
    position = opening_position(contract)
    assessments = []
    for certificate in sorted(certificates, key=certificate_order):
        if certificate.contract != contract.id:
            raise ValueError(f"certificate {certificate.id} belongs to {certificate.contract}, not {contract.id}")
        results = check_certificate(contract, position, certificate, disabled=skip)
        assessment = CertificateAssessment(certificate=certificate, position=position, results=results)
        assessments.append(assessment)
        if assessment.certified:
            position = advance_position(position, contract, certificate)
    return tuple(assessments)
