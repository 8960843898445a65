"""Reciprocal rank fusion (Cormack, Clarke and Büttcher, 2009): score(d) = sum over rankings of 1 / (k + rank(d)).

Ranks start at 1; a document absent from a ranking contributes nothing from it. k = 60 is the paper's constant and
was not tuned here. Equal fused scores are ordered by clause id, so a fusion is a pure function of its inputs.
"""

from __future__ import annotations

from collections.abc import Sequence

RRF_K = 60


def reciprocal_rank_fusion(rankings: Sequence[Sequence[str]], k: int = RRF_K) -> list[tuple[str, float]]:
    """(clause id, fused score) for every id in any ranking, best first; ties broken by clause id ascending."""
    if k < 0:
        raise ValueError(f"RRF k must be >= 0, got {k}")
    fused: dict[str, float] = {}
    for ranking in rankings:
        if len(set(ranking)) != len(ranking):
            raise ValueError("a ranking lists the same clause id twice")
        for rank, clause_id in enumerate(ranking, start=1):
            fused[clause_id] = fused.get(clause_id, 0.0) + 1.0 / (k + rank)
    return sorted(fused.items(), key=lambda item: (-item[1], item[0]))
