"""Every invariant rests on clause topics the contracts' clause_refs and the clause corpus know."""

from __future__ import annotations

from countersign.certificates import invariants as inv
from countersign.synthetic.clause_topics import TOPIC_KEYS


def test_every_invariant_names_only_known_clause_topics() -> None:
    assert set(inv.CLAUSE_TOPICS) == set(inv.INVARIANTS)
    unknown = {topic for topics in inv.CLAUSE_TOPICS.values() for topic in topics} - set(TOPIC_KEYS)
    assert unknown == set()
