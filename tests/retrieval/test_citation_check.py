"""The citation check is set membership: a cited id outside the retrieval set is reported, whatever it looks like."""

from __future__ import annotations

from countersign.retrieval.citations import citations_outside, cited_ids

RETRIEVED = frozenset({"CSB-4.6", "CSB-4.7", "CSB-4.8"})


def test_ids_inside_the_retrieval_set_pass() -> None:
    assert citations_outside(["CSB-4.7", "CSB-4.6"], RETRIEVED) == ()


def test_a_clause_never_retrieved_and_an_id_that_does_not_exist_are_both_outside() -> None:
    assert citations_outside(["CSB-4.7", "CSB-9.2", "CSB-99.1"], RETRIEVED) == ("CSB-9.2", "CSB-99.1")


def test_membership_is_exact_not_a_prefix_or_case_match() -> None:
    cited = cited_ids("see csb-4.7, CSB-4.77 and CSB-4.7.1", ["CSB-4.7"])
    assert citations_outside(cited, RETRIEVED) == ("CSB-4.7.1", "CSB-4.77", "csb-4.7")


def test_an_id_named_only_in_the_text_is_cited() -> None:
    assert cited_ids("as CSB-4.8 requires", ["CSB-4.7"]) == ("CSB-4.7", "CSB-4.8")
    assert citations_outside(cited_ids("under CSM-2.1", ["CSB-4.7"]), RETRIEVED) == ("CSM-2.1",)
