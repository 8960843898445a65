"""Weighted reciprocal rank fusion: the published formula, weights, a first place kept, a reproducible order."""

from __future__ import annotations

import pytest

from countersign.retrieval.fusion import DENSE_WEIGHT, LEXICAL_WEIGHT, RRF_K, reciprocal_rank_fusion


def test_rrf_matches_a_hand_computed_example() -> None:
    # bm25: a b c; dense: c a d. With k = 60 (ranks from 1):
    #   a = 1/61 + 1/62 = 0.032522... ; c = 1/63 + 1/61 = 0.032266... ; b = 1/62 = 0.016129... ; d = 1/63 = 0.015873...
    fused = reciprocal_rank_fusion([["a", "b", "c"], ["c", "a", "d"]], k=60)

    assert [clause_id for clause_id, _ in fused] == ["a", "c", "b", "d"]
    expected = {"a": 0.0325224749, "c": 0.0322664585, "b": 0.0161290323, "d": 0.0158730159}
    for clause_id, score in fused:
        assert score == pytest.approx(expected[clause_id], abs=1e-10)


def test_weights_scale_each_rankings_share() -> None:
    # k = 2: a = 2/3 + 0.5/4 = 0.7916..., c = 2/5 + 0.5/3 = 0.5666..., b = 2/4 = 0.5, d = 0.5/5 = 0.1
    fused = reciprocal_rank_fusion([["a", "b", "c"], ["c", "a", "d"]], k=2, weights=(2.0, 0.5))

    assert [clause_id for clause_id, _ in fused] == ["a", "c", "b", "d"]
    assert [score for _, score in fused] == pytest.approx([2 / 3 + 0.5 / 4, 2 / 5 + 0.5 / 3, 0.5, 0.1])


def test_the_tuned_constants_are_the_swept_ones() -> None:
    assert (RRF_K, LEXICAL_WEIGHT, DENSE_WEIGHT) == (2, 1.0, 1.0)
    [(only, score)] = reciprocal_rank_fusion([["x"]])
    assert (only, score) == ("x", 1 / 3)


def test_an_arms_first_hit_is_kept_in_the_top_k_that_plain_rrf_drops() -> None:
    # The case: BM25 ranks "cl" first (a clause-number query) and the dense arm misses it; the dense arm's
    # ranking agrees with BM25's tail, so with k = 60 four clauses both arms share outscore it.
    lexical = ["cl", "p", "q", "r", "s"]
    dense = ["p", "q", "r", "s", "t"]

    plain = [clause_id for clause_id, _ in reciprocal_rank_fusion([lexical, dense], k=60, keep_first=False)]
    kept = [clause_id for clause_id, _ in reciprocal_rank_fusion([lexical, dense], k=60, depth=3)]

    assert plain[:3] == ["p", "q", "r"]
    assert kept[:3] == ["p", "q", "cl"]  # "cl" displaces the lowest of the top 3, which keeps its fused order after
    assert kept[3:] == ["r", "s", "t"]
    assert sorted(kept) == sorted(plain)


def test_the_first_hits_are_not_moved_when_k_has_no_room_for_one_per_arm() -> None:
    lexical, dense = ["cl", "p", "q"], ["p", "q", "r"]

    assert reciprocal_rank_fusion([lexical, dense], k=60, depth=1) == reciprocal_rank_fusion(
        [lexical, dense], k=60, keep_first=False
    )


def test_equal_fused_scores_are_ordered_by_clause_id_whatever_the_input_order() -> None:
    # y and x swap ranks between the arms, so their fused scores are equal.
    assert [c for c, _ in reciprocal_rank_fusion([["y", "x"], ["x", "y"]])] == ["x", "y"]
    assert [c for c, _ in reciprocal_rank_fusion([["x", "y"], ["y", "x"]])] == ["x", "y"]
    assert [c for c, _ in reciprocal_rank_fusion([["CSB-4.10"], ["CSB-4.9"]])] == ["CSB-4.10", "CSB-4.9"]


def test_a_document_in_one_arm_only_keeps_that_arms_share() -> None:
    fused = dict(reciprocal_rank_fusion([["a"], []], k=60))

    assert fused == {"a": 1 / 61}


@pytest.mark.parametrize(
    ("rankings", "k", "weights", "problem"),
    [
        ([["a", "a"]], 2, None, "twice"),
        ([["a"]], -1, None, "k must be >= 0"),
        ([["a"], ["b"]], 2, (1.0,), "1 weights for 2 rankings"),
        ([["a"], ["b"]], 2, (1.0, -0.5), "weights must be >= 0"),
    ],
)
def test_bad_fusion_input_is_refused(
    rankings: list[list[str]], k: int, weights: tuple[float, ...] | None, problem: str
) -> None:
    with pytest.raises(ValueError, match=problem):
        reciprocal_rank_fusion(rankings, k, weights=weights)
