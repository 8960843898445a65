"""Whom an overdue gate goes to (countersign/policy/routing.py): who-may-decide, minus whoever is away; a delegation
grants nothing."""

from __future__ import annotations

import datetime as dt

from countersign.policy.deciders import GateTerms, Person
from countersign.policy.routing import Absence, routes_for
from countersign.states import Decision, GateStatus

NOW = dt.datetime(2026, 12, 7, 9, tzinfo=dt.UTC)
ALICE = Person("alice.chen", True, frozenset({"controller"}), True)
BOB = Person("bob.osei", True, frozenset({"cfo", "controller"}), True)
DANA = Person("dana.reyes", True, frozenset({"accountant"}), True)
ERIN = Person("erin.park", True, frozenset({"controller"}), True)
GATE = GateTerms("controller", frozenset({"accruals-agent"}), GateStatus.OPEN, {}, lifecycle_open=True)
PEOPLE = (ALICE, BOB, DANA, ERIN)


def _away(who: str, delegate: str, *, days: int = 7, delegation_id: int = 1) -> Absence:
    return Absence(delegation_id, who, delegate, NOW - dt.timedelta(hours=1), NOW + dt.timedelta(days=days))


def _routes(gate: GateTerms, *absences: Absence) -> list[tuple[str, int, int | None, str | None]]:
    return [(r.principal_id, r.rank, r.delegation_id, r.away) for r in routes_for(gate, PEOPLE, absences, NOW)]


def test_without_absences_every_eligible_person_is_routed_by_id() -> None:
    assert _routes(GATE) == [("alice.chen", 1, None, None), ("bob.osei", 2, None, None), ("erin.park", 3, None, None)]


def test_the_delegate_of_an_away_decider_comes_first_and_the_away_person_is_not_asked() -> None:
    assert _routes(GATE, _away("alice.chen", "erin.park")) == [
        ("erin.park", 1, 1, "alice.chen"),
        ("bob.osei", 2, None, None),
    ]


def test_a_delegate_who_may_not_decide_gains_nothing() -> None:
    # dana lacks the role; as the preparer bob may not decide either, delegate or not
    assert _routes(GATE, _away("alice.chen", "dana.reyes")) == [
        ("bob.osei", 1, None, None),
        ("erin.park", 2, None, None),
    ]
    prepared_by_bob = GateTerms("controller", frozenset({"bob.osei"}), GateStatus.OPEN, {}, lifecycle_open=True)
    assert _routes(prepared_by_bob, _away("alice.chen", "bob.osei")) == [("erin.park", 1, None, None)]


def test_a_delegate_who_is_away_too_or_already_voted_is_not_routed() -> None:
    assert _routes(GATE, _away("alice.chen", "bob.osei"), _away("bob.osei", "erin.park", delegation_id=2)) == [
        ("erin.park", 1, 2, "bob.osei")
    ]
    voted = GateTerms("controller", frozenset(), GateStatus.OPEN, {"bob.osei": Decision.APPROVE}, lifecycle_open=True)
    assert _routes(voted, _away("alice.chen", "bob.osei")) == [("erin.park", 1, None, None)]


def test_an_absence_covers_its_range_only() -> None:
    ended = Absence(1, "alice.chen", "erin.park", NOW - dt.timedelta(days=3), NOW)  # ends_at is exclusive
    later = Absence(2, "alice.chen", "erin.park", NOW + dt.timedelta(days=1), NOW + dt.timedelta(days=2))
    assert [r[0] for r in _routes(GATE, ended, later)] == ["alice.chen", "bob.osei", "erin.park"]


def test_someone_away_who_decides_nothing_here_says_nothing_about_it() -> None:
    assert _routes(GATE, _away("dana.reyes", "erin.park")) == [
        ("alice.chen", 1, None, None),
        ("bob.osei", 2, None, None),
        ("erin.park", 3, None, None),
    ]
