"""Re-route an overdue gate: to the delegate of an approver who is away, and to every other eligible person, each by a
direct message on their own Slack and Teams identities (not only the channel reminder).

Runs in the overdue reminder's transaction (`countersign.engine.gate_outcomes`), once per gate. Who is routed is
`countersign.policy.routing.routes_for` (who-may-decide, minus whoever is away); the database checks each person again
and writes the routing row, its trace event (`gate_rerouted`) and the messages in one call (`route_gate_to`), so a
second run sends nothing more.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import AsyncConnection

from countersign.engine.context import AdvanceReport, EngineContext
from countersign.policy.routing import Absence, Route, routes_for
from countersign.store import delegations as store
from countersign.store.gates import GateRecord

DM_PLATFORMS = ("slack", "teams")


async def reroute_overdue(
    conn: AsyncConnection[Any], ctx: EngineContext, gate: GateRecord, report: AdvanceReport
) -> tuple[Route, ...]:
    """Route `gate` to the people who may decide it and are not away; returns the routes newly recorded."""
    moment = await store.database_now(conn)
    people = [c.person for c in await store.read_candidates(conn, gate.approver_role)]
    absences = [
        Absence(d.delegation_id, d.principal_id, d.delegate_id, d.starts_at, d.ends_at)
        for d in await store.read_live_delegations(conn)
    ]
    platforms = sorted({t.platform for t in ctx.channels if t.platform in DM_PLATFORMS})
    recorded = []
    for route in routes_for(gate.terms, people, absences, moment):
        try:
            async with conn.transaction():  # a savepoint: one refused person does not undo the reminder or the rest
                routing_id = await store.route_gate(
                    conn,
                    gate.gate_id,
                    route.principal_id,
                    delegation_id=route.delegation_id,
                    rank=route.rank,
                    platforms=platforms,
                )
        except psycopg.errors.InsufficientPrivilege as exc:  # e.g. a delegation set since the read above
            primary = exc.diag.message_primary or str(exc)
            report.steps.append(f"{gate.task}: gate {gate.gate_id[:8]} not routed to {route.principal_id}: {primary}")
            continue
        if routing_id is None:
            continue
        recorded.append(route)
        why = f"{route.away} is away" if route.away else "overdue"
        where = ", ".join(platforms) if platforms else "no chat platform configured"
        report.steps.append(
            f"{gate.task}: gate {gate.gate_id[:8]} routed to {route.principal_id} ({why}); direct message: {where}"
        )
    if not recorded and not await store.read_routings_of_gate(conn, gate.gate_id):
        report.steps.append(f"{gate.task}: gate {gate.gate_id[:8]} has nobody eligible to route to who is not away")
    return tuple(recorded)
