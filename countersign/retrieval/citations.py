"""The citation check: which clause ids an explanation cites, and which of them lie outside the retrieval set.

Set membership, after generation: an explanation may cite only clauses retrieved for its own query. This module
decides nothing else; the model-facing retry and fallback live with the specialist that asks the model
(`countersign/specialists/citations.py`).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from typing import Final

# Anything in the text that reads as a clause reference: a corpus id (`CSB-4.7`), an id of a form that does not
# exist (`CSX-4.7`, `FIDIC-14.3`), a lower-case, dash-variant or deeper-numbered one (`csb-4.7`, `CSB\u20134.7`,
# `CSB-4.7.1`, `CSB-4.777`). Each must be the exact id of a retrieved clause, so a near miss is refused rather
# than slipping through. Digits are taken greedily, so `CSB-4.77` is never read as `CSB-4.7`.
CLAUSE_REFERENCE: Final = re.compile(r"\b(?:[A-Z]{2,5}|[Cc][Ss][A-Za-z])[-\u2010-\u2015]\d+(?:\.\d+)+")


def cited_ids(explanation: str, citations: Sequence[str]) -> tuple[str, ...]:
    """The declared citations, then every clause reference found only in the text, each once, in order."""
    found = [match.group(0) for match in CLAUSE_REFERENCE.finditer(explanation)]
    return tuple(dict.fromkeys([*citations, *found]))


def citations_outside(cited: Sequence[str], retrieved: Collection[str]) -> tuple[str, ...]:
    """The cited ids that are not in the retrieval set (never retrieved, or no such clause), sorted."""
    return tuple(sorted({clause_id for clause_id in cited if clause_id not in retrieved}))
