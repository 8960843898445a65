"""Generated construction data for the certificate tests (the shipped construction profile, smaller overrides)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from countersign.bootstrap.settings import PROJECT_ROOT
from countersign.certificates import Certificate, Contract
from countersign.evals.certificate_files import read_certificates, read_contracts, read_ground_truth
from countersign.evals.certificates import GroundTruth
from countersign.synthetic.construction import generate_construction
from countersign.synthetic.construction_profile import load_construction_profile

PROFILE = PROJECT_ROOT / "config" / "profiles" / "construction.yaml"
TUNED_SEEDS = (1, 2)
"""The seeds the detector thresholds and the generator were tuned on: the eval tests use others."""


@dataclass(frozen=True)
class Dataset:
    path: Path
    contracts: dict[str, Contract]
    certificates: list[Certificate]
    truth: GroundTruth


def generate(out: Path, seed: int, *, contracts: int | None = None, months: int | None = None) -> Dataset:
    generate_construction(load_construction_profile(PROFILE), seed, out, contracts=contracts, months=months)
    return Dataset(out, read_contracts(out), read_certificates(out), read_ground_truth(out))
