"""The Teams deciders' query (`countersign.store.principals.teams_ids_of_deciders`) is who-may-decide in SQL: over
every kind of principal (active or not, human or machine, holding the gate's role or not, its preparer, a requester,
someone who already decided it) it selects exactly the people the one rule (`countersign.policy.deciders.entitled`)
entitles, in principal order. Someone who already decided stays on it: their card refreshes to show their own vote."""

from __future__ import annotations

import itertools
import uuid
from typing import Any

from countersign.policy.deciders import GateTerms, entitled
from countersign.states import Decision, GateStatus, PrincipalKind
from countersign.store.principals import Caller, teams_ids_of_deciders


async def test_the_teams_deciders_are_the_people_the_rule_entitles(conn: Any) -> None:
    tag = uuid.uuid4().hex[:8]
    role = f"approver-{tag}"
    callers: list[Caller] = []
    preparers: set[str] = set()  # who prepared or requested the gate's work
    votes: dict[str, Decision] = {}
    for n, (kind, active, holds, who, voted) in enumerate(
        itertools.product(
            PrincipalKind,
            (True, False),
            (True, False),
            ("preparer", "requester", "other"),
            (None, Decision.APPROVE, Decision.REJECT),
        )
    ):
        principal_id = f"p-{tag}-{n:03d}-{who}"
        roles = (role, "cfo") if holds else ("cfo",)
        callers.append(Caller(principal_id, kind, principal_id, roles, active))
        if who != "other":
            preparers.add(principal_id)
        if voted is not None:
            votes[principal_id] = voted
    terms = GateTerms(role, frozenset(preparers), GateStatus.OPEN, votes)

    async with conn.transaction(force_rollback=True):
        for c in callers:
            await conn.execute(
                "INSERT INTO principal (principal_id, kind, display_name, roles, active) VALUES (%s, %s, %s, %s, %s)",
                (c.principal_id, c.kind, c.display_name, list(c.roles), c.active),
            )
            await conn.execute(
                "INSERT INTO principal_identity (principal_id, channel, tenant, external_id)"
                " VALUES (%s, 'teams', 'tenant-1', %s)",
                (c.principal_id, f"aad-{c.principal_id}"),
            )
        selected = await teams_ids_of_deciders(conn, role=role, excluded=sorted(preparers), limit=1000)

    expected = tuple(
        f"aad-{c.principal_id}" for c in sorted(callers, key=lambda c: c.principal_id) if entitled(terms, c.person)
    )
    assert selected == expected
    assert expected  # the table has people the rule entitles, some of whom already decided
    assert any(c.principal_id in votes and entitled(terms, c.person) for c in callers)
    assert len(expected) < len(callers)
