"""Reciprocal rank fusion: the published formula, k = 60, and a reproducible order for equal scores."""

from __future__ import annotations

import pytest

from retrieval.fusion import RRF_K, reciprocal_rank_fusion


def test_rrf_matches_a_hand_computed_example() -> None:
    # bm25: a b c; dense: c a d. With k = 60 (ranks from 1):
    #   a = 1/61 + 1/62 = 0.032522... ; c = 1/63 + 1/61 = 0.032266... ; b = 1/62 = 0.016129... ; d = 1/63 = 0.015873...
    fused = reciprocal_rank_fusion([["a", "b", "c"], ["c", "a", "d"]])

    assert [clause_id for clause_id, _ in fused] == ["a", "c", "b", "d"]
    expected = {"a": 0.0325224749, "c": 0.0322664585, "b": 0.0161290323, "d": 0.0158730159}
    for clause_id, score in fused:
        assert score == pytest.approx(expected[clause_id], abs=1e-10)


def test_the_constant_is_sixty() -> None:
    assert RRF_K == 60
    [(only, score)] = reciprocal_rank_fusion([["x"]])
    assert (only, score) == ("x", 1 / 61)


def test_equal_fused_scores_are_ordered_by_clause_id_whatever_the_input_order() -> None:
    # y and x swap ranks between the arms, so their fused scores are equal.
    assert [c for c, _ in reciprocal_rank_fusion([["y", "x"], ["x", "y"]])] == ["x", "y"]
    assert [c for c, _ in reciprocal_rank_fusion([["x", "y"], ["y", "x"]])] == ["x", "y"]
    assert [c for c, _ in reciprocal_rank_fusion([["CSB-4.10"], ["CSB-4.9"]])] == ["CSB-4.10", "CSB-4.9"]


def test_a_document_in_one_arm_only_keeps_that_arms_share() -> None:
    fused = dict(reciprocal_rank_fusion([["a"], []]))

    assert fused == {"a": 1 / 61}


def test_a_ranking_that_repeats_an_id_is_refused() -> None:
    with pytest.raises(ValueError, match="twice"):
        reciprocal_rank_fusion([["a", "a"]])
