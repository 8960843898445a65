"""Construction payment certificates: reconstruction, the sixteen invariants, the corrected sum, payment dates and the
pay-less notice, the duplicate detector.

Pure: no file, database, network, engine or model code. Callers parse the files and pass mappings in.
"""

from countersign.certificates.assessment import CertificateAssessment, assess_contract
from countersign.certificates.correction import Correction, CorrectionItem, reconstructed_amount_due
from countersign.certificates.duplicates import DuplicateHold, Thresholds, detect, sweep
from countersign.certificates.invariants import INVARIANTS, InvariantResult, check_certificate
from countersign.certificates.model import (
    Certificate,
    CertificateDataError,
    Contract,
    parse_certificate,
    parse_contract,
)
from countersign.certificates.reconstruction import Position, advance_position, opening_position

__all__ = [
    "INVARIANTS",
    "Certificate",
    "CertificateAssessment",
    "CertificateDataError",
    "Contract",
    "Correction",
    "CorrectionItem",
    "DuplicateHold",
    "InvariantResult",
    "Position",
    "Thresholds",
    "advance_position",
    "assess_contract",
    "check_certificate",
    "detect",
    "opening_position",
    "parse_certificate",
    "parse_contract",
    "reconstructed_amount_due",
    "sweep",
]
