"""What was actually certified before a certificate: recorded certifications first, the documents only where
Countersign never decided.

A certificate's "previously certified" is the sum of what was certified before it, not a reconstruction. For each
earlier certificate of the contract, in certificate order:

- certified through its payment gate (`payment_certification`): it counts, at the amount certified (which may be the
  reconstructed sum rather than the claim);
- given a payment run that certified nothing (rejected at its gate, held, or not yet decided): it does not count;
- never given a run (history from before Countersign decided this contract's certificates): the documents stand in,
  and it counts at its claim when the domain's checks would have certified it (`countersign.certificates.pipeline`).

The reconstruction from the documents alone is kept beside it, so a card can show both when they differ.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum
from typing import Any

from countersign.certificates import Certificate, Contract, Position, advance_position, opening_position
from countersign.certificates.assessment import certificate_order
from countersign.certificates.pipeline import run_pipeline
from countersign.store.certificate_runs import EarlierOutcome, earlier_outcomes, received_on

__all__ = [
    "CertifiedEntry",
    "CertifiedHistory",
    "CertifiedSource",
    "EarlierOutcome",
    "certified_history",
    "earlier_outcomes",
    "received_on",
]


class CertifiedSource(StrEnum):
    RECORDED = "recorded"
    """Certified through its payment gate in Countersign."""
    DOCUMENTS = "documents"
    """Never decided in Countersign: the documents' own history, as the checks read it."""


@dataclass(frozen=True)
class CertifiedEntry:
    certificate_id: str
    number: int
    amount_minor: int
    source: CertifiedSource

    def as_json(self) -> dict[str, Any]:
        return {
            "certificate_id": self.certificate_id,
            "number": self.number,
            "amount": f"{Decimal(self.amount_minor).scaleb(-2):.2f}",
            "source": self.source.value,
        }


@dataclass(frozen=True)
class CertifiedHistory:
    position: Position
    """The position after everything actually certified: what the certificate is checked against."""
    entries: tuple[CertifiedEntry, ...]
    skipped: tuple[str, ...]
    """Earlier certificates of the contract that were given a run and certified nothing."""
    documents_position: Position
    """The position the documents alone reconstruct (every earlier certificate the checks pass, at its claim)."""


def certified_history(
    contract: Contract,
    contracts: Mapping[str, Contract],
    earlier: Sequence[Certificate],
    outcomes: Mapping[str, EarlierOutcome],
) -> CertifiedHistory:
    """The contract's position after what was certified before, recorded certifications first (see the module)."""
    documents = run_pipeline(contracts, earlier)
    passed = documents.certified
    position = documents_position = opening_position(contract)
    entries: list[CertifiedEntry] = []
    skipped: list[str] = []
    for certificate in sorted((c for c in earlier if c.contract == contract.id), key=certificate_order):
        if certificate.id in passed:
            documents_position = advance_position(documents_position, contract, certificate)
        outcome = outcomes.get(certificate.id)
        if outcome is not None and outcome.certified_amount is not None:
            amount = int(outcome.certified_amount.scaleb(2))
            source = CertifiedSource.RECORDED
        elif outcome is not None and outcome.has_run:
            skipped.append(certificate.id)
            continue
        elif certificate.id in passed:
            amount = certificate.totals.amount_due_minor
            source = CertifiedSource.DOCUMENTS
        else:
            continue
        position = advance_position(position, contract, certificate, certified_amount_minor=amount)
        entries.append(CertifiedEntry(certificate.id, certificate.number, amount, source))
    return CertifiedHistory(position, tuple(entries), tuple(skipped), documents_position)
