"""Construction payment certificates: reconstruction, the fourteen invariants, the duplicate detector.

Pure: no file, database, network, engine or model code. Callers parse the files and pass mappings in.
"""

from .assessment import CertificateAssessment, assess_contract
from .duplicates import DuplicateHold, Thresholds, detect, sweep
from .evaluation import CertificateEvalReport, GroundTruth, evaluate, parse_ground_truth
from .invariants import INVARIANTS, InvariantResult, check_certificate
from .model import Certificate, CertificateDataError, Contract, parse_certificate, parse_contract
from .reconstruction import Position, advance_position, opening_position

__all__ = [
    "INVARIANTS",
    "Certificate",
    "CertificateAssessment",
    "CertificateDataError",
    "CertificateEvalReport",
    "Contract",
    "DuplicateHold",
    "GroundTruth",
    "InvariantResult",
    "Position",
    "Thresholds",
    "advance_position",
    "assess_contract",
    "check_certificate",
    "detect",
    "evaluate",
    "opening_position",
    "parse_certificate",
    "parse_contract",
    "parse_ground_truth",
    "sweep",
]
