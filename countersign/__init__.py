"""Countersign: a month-end close run by governed agents, with every risky step in front of a person.

One import package. Its rooms, from the top floor down (the `layers` contract in pyproject.toml holds the order):
the command line; demos, drills and evals; the composition root (`bootstrap`); the doors (`bot`, `web`, `board`);
the use cases every door calls (`services`); the close engine and the decision writer (`engine`, `callbacks`); the
A2A specialists; the store; and the pure rooms underneath (`policy`, `audit`, `cards`, `certificates`, ...).
"""

from importlib import metadata

DISTRIBUTION = "countersign-close"  # the name pip knows (README, "Installing"); the import package is `countersign`


def installed_version() -> str:
    """The installed distribution's version (pyproject.toml's `version`), or "0+unknown" when it is not installed."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "0+unknown"
