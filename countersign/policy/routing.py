"""Whom an overdue gate is routed to when people are away. Pure: no I/O.

A delegation changes who is asked, never who may decide: a person is routed a gate only when who-may-decide
(`countersign.policy.deciders.may_decide`) lets them decide it now and they are not away. The delegate of an away
decider comes first (the next eligible approver), then every other eligible person who is not away, by id. A
delegate who may not decide the gate (who lacks its role, or prepared its work) is passed over: nobody gains a gate
through a delegation. The database checks each routing again (`route_gate_to`, the delegation migration).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from countersign.policy.deciders import GateTerms, Person, entitled, may_decide


@dataclass(frozen=True)
class Absence:
    """A delegation as routing sees it: `principal_id` is away over [starts_at, ends_at), `delegate_id` stands in."""

    delegation_id: int
    principal_id: str
    delegate_id: str
    starts_at: datetime
    ends_at: datetime

    def covers(self, moment: datetime) -> bool:
        return self.starts_at <= moment < self.ends_at


@dataclass(frozen=True)
class Route:
    principal_id: str
    rank: int  # 1: the next eligible approver
    delegation_id: int | None  # the delegation the person stands in through, None when routed because it is overdue
    away: str | None  # whom they stand in for


def away_at(absences: Iterable[Absence], moment: datetime) -> dict[str, Absence]:
    """Who is away at `moment`, with the delegation that says so."""
    return {a.principal_id: a for a in sorted(absences, key=lambda a: a.delegation_id) if a.covers(moment)}


def routes_for(
    gate: GateTerms, people: Sequence[Person], absences: Iterable[Absence], moment: datetime
) -> tuple[Route, ...]:
    """Everyone an overdue gate goes to at `moment`, in order."""
    away = away_at(absences, moment)
    by_id = {p.principal_id: p for p in people}
    eligible = sorted(p.principal_id for p in people if may_decide(gate, p) and p.principal_id not in away)
    chosen: list[tuple[str, int | None, str | None]] = []
    for absent_id in sorted(away):
        absent = by_id.get(absent_id)
        if absent is None or not entitled(gate, absent):
            continue  # away, but not one of this gate's deciders: their delegation says nothing about it
        delegate = away[absent_id].delegate_id
        if delegate in eligible and delegate not in {c[0] for c in chosen}:
            chosen.append((delegate, away[absent_id].delegation_id, absent_id))
    chosen += [(pid, None, None) for pid in eligible if pid not in {c[0] for c in chosen}]
    return tuple(Route(pid, rank, delegation, who) for rank, (pid, delegation, who) in enumerate(chosen, start=1))
