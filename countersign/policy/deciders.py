"""Who may decide a gate: the one rule, written once. Pure: no I/O.

An active human who holds the gate's approver role, did not prepare or request its work and has not decided it yet,
on a gate still open. `bars` names every condition a person fails, in the order the decision writer checks them; the
callers keep only their own outputs:

- the decision writer (`countersign.callbacks.decision_writer.check_may_decide`) refuses with the first bar's code;
- the Close Board (`countersign.services.board_reads.may_decide`) offers a decision when there is no bar;
- the chat door (`countersign.bot.gate_cards.viewer_state`) words a person's own card by the bars;
- the Teams deciders' query (`countersign.store.principals.teams_ids_of_deciders`) selects in SQL the people with no
  bar of their own (`entitled`): tests/policy/test_deciders.py compares its answer with this rule's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from countersign.states import DECIDED, Decision, GateStatus, RefusalCode


class Bar(StrEnum):
    """A condition a person fails for deciding a gate. Where the decision writer refuses it, the value is its
    `RefusalCode`; the two it leaves to the database's admission trigger (migration 0017) have words of their own."""

    UNKNOWN_PRINCIPAL = RefusalCode.UNKNOWN_PRINCIPAL.value
    MACHINE_PRINCIPAL = RefusalCode.MACHINE_PRINCIPAL.value
    INACTIVE_PRINCIPAL = "inactive_principal"
    MISSING_ROLE = RefusalCode.MISSING_ROLE.value
    PREPARER = RefusalCode.PREPARER.value
    GATE_NOT_OPEN = "gate_not_open"  # the engine already acted on the gate (its lifecycle is no longer `open`)
    GATE_EXPIRED = RefusalCode.GATE_EXPIRED.value
    GATE_CANCELLED = RefusalCode.GATE_CANCELLED.value
    ALREADY_DECIDED = RefusalCode.ALREADY_DECIDED.value
    ALREADY_VOTED = RefusalCode.ALREADY_VOTED.value


# The bars that are the person's own, whatever the gate's state and votes: who is entitled to decide the gate at all.
PERSON_BARS = frozenset(
    {Bar.UNKNOWN_PRINCIPAL, Bar.MACHINE_PRINCIPAL, Bar.INACTIVE_PRINCIPAL, Bar.MISSING_ROLE, Bar.PREPARER}
)


@dataclass(frozen=True)
class Person:
    """A principal as the rule sees it."""

    principal_id: str
    human: bool
    roles: frozenset[str]
    active: bool | None = None
    """None: the caller's read does not carry it (the chat door's principal, the decision writer's context); the
    database's admission trigger refuses an inactive person's decision itself (`refused_by_database`)."""


@dataclass(frozen=True)
class GateTerms:
    """A gate as the rule sees it."""

    approver_role: str
    preparers: frozenset[str]  # who prepared or requested its work
    status: GateStatus
    votes: Mapping[str, Decision] = field(default_factory=dict)  # principal id -> what they decided on it
    lifecycle_open: bool | None = None
    """None: the caller's read does not carry it (the decision writer's context; the database checks it)."""


def bars(gate: GateTerms, person: Person | None) -> tuple[Bar, ...]:
    """Every bar between `person` (None: not a known principal) and deciding `gate`, in the decision writer's order;
    () when they may decide it now."""
    if person is None:
        return (Bar.UNKNOWN_PRINCIPAL,)
    found: list[Bar] = []
    if not person.human:
        found.append(Bar.MACHINE_PRINCIPAL)
    if person.active is False:
        found.append(Bar.INACTIVE_PRINCIPAL)
    if gate.approver_role not in person.roles:
        found.append(Bar.MISSING_ROLE)
    if person.principal_id in gate.preparers:
        found.append(Bar.PREPARER)
    if gate.lifecycle_open is False:
        found.append(Bar.GATE_NOT_OPEN)
    if gate.status is GateStatus.EXPIRED:
        found.append(Bar.GATE_EXPIRED)
    elif gate.status is GateStatus.CANCELLED:
        found.append(Bar.GATE_CANCELLED)
    elif gate.status in DECIDED:
        found.append(Bar.ALREADY_DECIDED)
    if person.principal_id in gate.votes:
        found.append(Bar.ALREADY_VOTED)
    return tuple(found)


def may_decide(gate: GateTerms, person: Person | None) -> bool:
    """May `person` decide `gate` now?"""
    return not bars(gate, person)


def entitled(gate: GateTerms, person: Person | None) -> bool:
    """Is `person` one of the gate's deciders, whether or not they decided it yet and whatever its state?"""
    return PERSON_BARS.isdisjoint(bars(gate, person))
