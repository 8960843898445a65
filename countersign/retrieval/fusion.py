"""Weighted reciprocal rank fusion (Cormack, Clarke and Büttcher, 2009): score(d) = sum over rankings of
weight / (k + rank(d)), with each arm's first hit kept in the fused top k.

Ranks start at 1; a document absent from a ranking contributes nothing from it. With the paper's k = 60 a clause
one arm ranks first and the other misses scores 1/61, less than one both arms rank fifth (2/65): the fusion drops
the single strongest signal either arm has. A small k lets a first place count (1/(k+1) against 2/(k+5)), and
`keep_first` guarantees it whatever the weights: each ranking's first hit is placed in the top k (when k has room
for one per ranking), displacing the lowest-scoring others. RRF_K and the weights were chosen by the sweep recorded
in docs/benchmarks.md, on the tuning queries only. Equal fused scores are ordered by clause id, so a fusion is a
pure function of its inputs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

RRF_K: Final = 2
# Weights of the lexical and dense rankings, in that order.
LEXICAL_WEIGHT: Final = 1.0
DENSE_WEIGHT: Final = 1.0


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[str]],
    k: int = RRF_K,
    *,
    weights: Sequence[float] | None = None,
    keep_first: bool = True,
    depth: int | None = None,
) -> list[tuple[str, float]]:
    """(clause id, fused score) for every id in any ranking, best first; ties broken by clause id ascending.

    With `keep_first` and a `depth` (the number of hits the caller will keep), each ranking's first id is moved
    into the first `depth` places if it is not there already, when `depth` is at least the number of rankings."""
    if k < 0:
        raise ValueError(f"RRF k must be >= 0, got {k}")
    weights = [1.0] * len(rankings) if weights is None else list(weights)
    if len(weights) != len(rankings):
        raise ValueError(f"{len(weights)} weights for {len(rankings)} rankings")
    if any(weight < 0 for weight in weights):
        raise ValueError(f"RRF weights must be >= 0, got {weights}")
    fused: dict[str, float] = {}
    for ranking, weight in zip(rankings, weights, strict=True):
        if len(set(ranking)) != len(ranking):
            raise ValueError("a ranking lists the same clause id twice")
        for rank, clause_id in enumerate(ranking, start=1):
            fused[clause_id] = fused.get(clause_id, 0.0) + weight / (k + rank)
    ordered = sorted(fused.items(), key=lambda item: (-item[1], item[0]))
    if not keep_first or depth is None or depth < len(rankings):
        return ordered
    return _with_firsts_kept(ordered, [ranking[0] for ranking in rankings if ranking], depth)


def _with_firsts_kept(ordered: list[tuple[str, float]], firsts: Sequence[str], depth: int) -> list[tuple[str, float]]:
    """`ordered` with every id of `firsts` inside its first `depth` places; the rest keep their fused order."""
    kept = set(firsts)
    protected = [item for item in ordered if item[0] in kept]
    others = [item for item in ordered if item[0] not in kept]
    room = depth - len(protected)
    head = sorted([*protected, *others[:room]], key=lambda item: (-item[1], item[0]))
    return [*head, *others[room:]]
