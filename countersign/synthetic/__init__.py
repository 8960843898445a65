"""Deterministic synthetic books for a month-end close (pure: imports nothing of ours)."""

from countersign.synthetic.clauses import (
    ClauseProfile,
    ClauseProfileError,
    canonical_corpus_bytes,
    clause_ids_by_topic,
    generate_clause_corpus,
    load_clause_profile,
    write_clause_corpus,
)
from countersign.synthetic.construction import ConstructionManifest, generate_construction
from countersign.synthetic.construction_profile import ConstructionProfile, load_construction_profile
from countersign.synthetic.generator import BooksManifest, generate_books
from countersign.synthetic.ground_truth import read_ground_truth
from countersign.synthetic.money import format_minor
from countersign.synthetic.profile import (
    Anomaly,
    BankFeedMismatch,
    IntercompanyMismatch,
    IntercompanyPair,
    Profile,
    ProfileError,
    load_profile,
    parse_profile,
)
from countersign.synthetic.profile_kind import PROFILE_KINDS, profile_kind
from countersign.synthetic.seed import seed_from_name

__all__ = [
    "PROFILE_KINDS",
    "Anomaly",
    "BankFeedMismatch",
    "BooksManifest",
    "ClauseProfile",
    "ClauseProfileError",
    "ConstructionManifest",
    "ConstructionProfile",
    "IntercompanyMismatch",
    "IntercompanyPair",
    "Profile",
    "ProfileError",
    "canonical_corpus_bytes",
    "clause_ids_by_topic",
    "format_minor",
    "generate_books",
    "generate_clause_corpus",
    "generate_construction",
    "load_clause_profile",
    "load_construction_profile",
    "load_profile",
    "parse_profile",
    "profile_kind",
    "read_ground_truth",
    "seed_from_name",
    "write_clause_corpus",
]
