"""Deterministic synthetic books for a month-end close (pure: imports nothing of ours)."""

from .generator import BooksManifest, generate_books
from .ground_truth import read_ground_truth
from .money import format_minor
from .profile import (
    Anomaly,
    BankFeedMismatch,
    IntercompanyMismatch,
    IntercompanyPair,
    Profile,
    ProfileError,
    load_profile,
    parse_profile,
)
from .seed import seed_from_name

__all__ = [
    "Anomaly",
    "BankFeedMismatch",
    "BooksManifest",
    "IntercompanyMismatch",
    "IntercompanyPair",
    "Profile",
    "ProfileError",
    "format_minor",
    "generate_books",
    "load_profile",
    "parse_profile",
    "read_ground_truth",
    "seed_from_name",
]
