"""What the chat doors read and record: a gate as its card shows it, the person behind a Teams identity, the Teams
ids of a gate's deciders, an enrolled passkey as its person's direct message names it, and the Slack event ids
already handled.

Called through countersign/bot/queries.py (the chat door imports nothing below services: an import-linter contract);
the statements are in countersign.store (gates, principals, passkeys, chat_events), the identity's normalisation is
the directory's (`countersign.callbacks.principals.resolve_identity`). `GateRecord` is re-exported for the door's
types.
"""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection

from countersign.callbacks.principals import resolve_identity
from countersign.cards.platform_limits import TEAMS_USERS_PER_REFRESH
from countersign.policy.deciders import Person
from countersign.store import chat_events
from countersign.store import principals as principal_store
from countersign.store.gates import DecisionRecord as DecisionRecord
from countersign.store.gates import GateRecord, read_gate
from countersign.store.passkeys import EnrolledPasskey, enrolled_passkey_for_slack_user

__all__ = [
    "EnrolledPasskey",
    "GateRecord",
    "enrolled_passkey_for_slack_user",
    "first_slack_event",
    "gate_for_card",
    "teams_decider_ids",
    "teams_person",
]


async def gate_for_card(conn: AsyncConnection[Any], gate_id: str) -> GateRecord | None:
    """The gate's one typed read (`countersign.store.gates.read_gate`), or None when there is no such gate."""
    return await read_gate(conn, gate_id)


async def teams_person(conn: AsyncConnection[Any], tenant: str, external_id: str) -> Person | None:
    """The person behind a Teams identity (tenant, AAD object id) as who-may-decide sees them, or None for an identity
    nobody holds."""
    principal = await resolve_identity(conn, "teams", external_id, tenant)
    return principal.person if principal is not None else None


async def teams_decider_ids(conn: AsyncConnection[Any], gate: GateRecord) -> tuple[str, ...]:
    """The Teams ids (as `principal_identity` holds them) of the active humans who hold the gate's role and did not
    prepare its work: whose cards Teams refreshes by themselves. At most TEAMS_USERS_PER_REFRESH, in principal order."""
    return await principal_store.teams_ids_of_deciders(
        conn,
        role=gate.approver_role,
        excluded=[gate.prepared_by, *gate.requested_by],
        limit=TEAMS_USERS_PER_REFRESH,
    )


async def first_slack_event(conn: AsyncConnection[Any], event_id: str) -> bool:
    """Record a Slack event id; False when it was recorded before (Slack retries an event it thinks was lost)."""
    return await chat_events.record_slack_event(conn, event_id)
