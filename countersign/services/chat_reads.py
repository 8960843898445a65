"""What the chat doors read and record besides gates: the Teams ids of a gate's deciders, an enrolled passkey as
its person's direct message names it, and the Slack event ids already handled.

Called through countersign/bot/queries.py; the statements are in countersign.store (principals, passkeys,
chat_events).
"""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection

from countersign.cards.platform_limits import TEAMS_USERS_PER_REFRESH
from countersign.store import chat_events
from countersign.store import principals as principal_store
from countersign.store.gates import GateRecord
from countersign.store.passkeys import EnrolledPasskey, enrolled_passkey_for_slack_user

__all__ = ["EnrolledPasskey", "enrolled_passkey_for_slack_user", "first_slack_event", "teams_decider_ids"]


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
