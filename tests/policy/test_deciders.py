"""Who may decide is one rule (`countersign.policy.deciders`), and each place that asks runs it: a table of people and
gates goes through the rule and through the decision writer's check, the board's offer and the chat card's viewer
state, and each gives the answer the rule gives, in its own words."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest

from countersign.bot.gate_cards import viewer_state
from countersign.callbacks.decision_writer import DecisionConflict, DecisionRefused, DecisionRequest, check_may_decide
from countersign.policy.deciders import PERSON_BARS, Bar, GateTerms, Person, bars, entitled, may_decide
from countersign.services import board_reads
from countersign.states import Channel, Decision, GateStatus, PrincipalKind, RefusalCode, ViewerState
from countersign.store.gates import DecisionRecord, GateRecord
from countersign.store.principals import Caller, Principal

ROLE = "controller"
PREPARER = "engine.prep"
REQUESTER = "dana.reyes"
OTHER = "erin.voss"
WHEN = datetime(2025, 2, 3, 9, 0, tzinfo=UTC)


@dataclass(frozen=True)
class Case:
    kind: PrincipalKind
    active: bool
    has_role: bool
    prepared: bool
    requested: bool
    voted: Decision | None
    status: GateStatus
    lifecycle: str

    @property
    def principal_id(self) -> str:
        return PREPARER if self.prepared else REQUESTER if self.requested else "alice.chen"

    @property
    def roles(self) -> tuple[str, ...]:
        return (ROLE, "cfo") if self.has_role else ("cfo",)

    def gate(self) -> GateRecord:
        votes = [DecisionRecord(OTHER, OTHER, Decision.APPROVE, "ok", WHEN, "slack")]
        if self.voted is not None:
            votes.append(DecisionRecord(self.principal_id, "x", self.voted, "reviewed", WHEN, "slack"))
        return GateRecord(
            gate_id="g-1",
            close_id="c-1",
            entity="acme-uk",
            period="2025-01",
            task="accruals",
            title=None,
            attempt=1,
            kind="approval",
            tier="material",
            rule="n_of_m",
            approver_role=ROLE,
            quorum=2,
            summary=None,
            prepared_by=PREPARER,
            requested_by=(REQUESTER,),
            opened_at=WHEN,
            due_at=WHEN,
            expires_at=None,
            escalated=False,
            lifecycle=self.lifecycle,
            status=self.status,
            approvals=len(votes),
            rejections=0,
            overdue=False,
            decisions=tuple(votes),
        )

    def principal(self) -> Principal:
        return Principal(self.principal_id, self.kind, "A", self.roles)

    def caller(self) -> Caller:
        return Caller(self.principal_id, self.kind, "A", self.roles, self.active)


CASES = [
    Case(kind, active, has_role, prepared, requested, voted, status, lifecycle)
    for kind, active, has_role, (prepared, requested), voted, status, lifecycle in itertools.product(
        PrincipalKind,
        (True, False),
        (True, False),
        ((False, False), (True, False), (False, True)),
        (None, Decision.APPROVE, Decision.REJECT),
        GateStatus,
        ("open", "applied"),
    )
]


def _spec(case: Case) -> list[Bar]:
    """The rule as the issue states it, in the decision writer's order: every condition the person fails."""
    spec = [
        (case.kind is PrincipalKind.MACHINE, Bar.MACHINE_PRINCIPAL),
        (not case.active, Bar.INACTIVE_PRINCIPAL),
        (not case.has_role, Bar.MISSING_ROLE),
        (case.prepared or case.requested, Bar.PREPARER),
        (case.lifecycle != "open", Bar.GATE_NOT_OPEN),
        (case.status is GateStatus.EXPIRED, Bar.GATE_EXPIRED),
        (case.status is GateStatus.CANCELLED, Bar.GATE_CANCELLED),
        (case.status in (GateStatus.APPROVED, GateStatus.REJECTED), Bar.ALREADY_DECIDED),
        (case.voted is not None, Bar.ALREADY_VOTED),
    ]
    return [bar for failed, bar in spec if failed]


def test_the_rule_names_every_condition_a_person_fails_in_the_writers_order() -> None:
    for case in CASES:
        assert list(bars(case.gate().terms, case.caller().person)) == _spec(case), case
    assert bars(CASES[0].gate().terms, None) == (Bar.UNKNOWN_PRINCIPAL,)


def test_the_board_offers_a_decision_exactly_when_the_rule_admits_it() -> None:
    for case in CASES:
        gate, caller = case.gate(), case.caller()
        assert board_reads.may_decide(gate, caller) is may_decide(gate.terms, caller.person) is (not _spec(case))


def _writer_answer(case: Case | None, decision: Decision = Decision.APPROVE) -> str | None:
    """The decision writer's check as it runs on its context: no `active`, no lifecycle (the database checks those)."""
    gate = (case or CASES[0]).gate()
    request = DecisionRequest(gate.gate_id, case.principal_id if case else "nobody", decision, "r", "n", Channel.SLACK)
    try:
        check_may_decide(
            request,
            case.principal() if case else None,
            status=gate.status,
            role=gate.approver_role,
            tier=gate.tier,
            preparers={gate.prepared_by, *gate.requested_by},
            previous=case.voted if case else None,
        )
    except DecisionRefused as refused:
        return refused.code
    except DecisionConflict:
        return RefusalCode.CONFLICT
    return None


def test_the_decision_writer_refuses_with_the_rules_first_bar() -> None:
    assert _writer_answer(None) == RefusalCode.UNKNOWN_PRINCIPAL
    for case in CASES:
        judged = [bar for bar in _spec(case) if bar not in (Bar.INACTIVE_PRINCIPAL, Bar.GATE_NOT_OPEN)]
        answer = _writer_answer(case)
        if not judged:
            assert answer is None, case
        elif judged[0] is Bar.ALREADY_DECIDED and case.status is GateStatus.REJECTED:
            assert answer == RefusalCode.CONFLICT, case  # an approval of a rejected gate contradicts it
        else:
            assert answer == RefusalCode(judged[0].value), case


@pytest.mark.parametrize(
    ("case", "code"),
    [
        (Case(PrincipalKind.MACHINE, True, False, True, False, None, GateStatus.EXPIRED, "open"), "machine_principal"),
        (Case(PrincipalKind.HUMAN, True, False, True, False, None, GateStatus.EXPIRED, "open"), "missing_role"),
        (Case(PrincipalKind.HUMAN, True, True, False, True, None, GateStatus.EXPIRED, "open"), "preparer"),
        (
            Case(PrincipalKind.HUMAN, True, True, False, False, Decision.APPROVE, GateStatus.EXPIRED, "open"),
            "gate_expired",
        ),
        (Case(PrincipalKind.HUMAN, True, True, False, False, None, GateStatus.CANCELLED, "open"), "gate_cancelled"),
        (
            Case(PrincipalKind.HUMAN, True, True, False, False, Decision.APPROVE, GateStatus.APPROVED, "open"),
            "already_decided",
        ),
        (
            Case(PrincipalKind.HUMAN, True, True, False, False, Decision.REJECT, GateStatus.OPEN, "open"),
            "already_voted",
        ),
        (Case(PrincipalKind.HUMAN, False, True, False, False, None, GateStatus.OPEN, "applied"), None),
    ],
)
def test_the_writers_refusal_codes_and_their_order_are_unchanged(case: Case, code: str | None) -> None:
    assert _writer_answer(case) == code


def _viewer_words(case: Case) -> ViewerState:
    """The chat card's words, from the rule's bars: their own decision first, then the work they prepared."""
    found = set(bars(case.gate().terms, case.principal().person))
    if found & {Bar.MACHINE_PRINCIPAL}:
        return ViewerState.NOT_ENTITLED
    if case.voted is not None:
        return ViewerState.APPROVED if case.voted is Decision.APPROVE else ViewerState.REJECTED
    if Bar.PREPARER in found:
        return ViewerState.PREPARED
    if Bar.MISSING_ROLE in found:
        return ViewerState.NOT_ENTITLED
    return ViewerState.MAY_DECIDE


def test_the_chat_card_says_may_decide_exactly_when_the_person_is_entitled_and_has_not_decided() -> None:
    assert viewer_state(CASES[0].gate(), None) is ViewerState.NOT_ENTITLED
    for case in CASES:
        gate, principal = case.gate(), case.principal()
        state = viewer_state(gate, principal.person)
        assert state is _viewer_words(case), case
        # the card's own read carries no `active`; the gate's state is the card's (a decided gate's card is shared)
        open_gate = GateTerms(ROLE, gate.terms.preparers, GateStatus.OPEN, gate.terms.votes)
        assert (state is ViewerState.MAY_DECIDE) is may_decide(open_gate, principal.person), case


def test_who_is_entitled_is_the_rule_without_the_gates_state_or_votes() -> None:
    for case in CASES:
        person = case.caller().person
        assert entitled(case.gate().terms, person) is PERSON_BARS.isdisjoint(_spec(case)), case
        assert entitled(case.gate().terms, person) is (
            case.kind is PrincipalKind.HUMAN and case.active and case.has_role and not (case.prepared or case.requested)
        )
    assert not entitled(CASES[0].gate().terms, None)


def test_a_person_unknown_to_the_read_is_not_barred_as_inactive() -> None:
    terms = GateTerms(ROLE, frozenset({PREPARER}), GateStatus.OPEN)
    assert may_decide(terms, Person("alice.chen", True, frozenset({ROLE})))
    assert not may_decide(terms, Person("alice.chen", True, frozenset({ROLE}), active=False))
