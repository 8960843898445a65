"""The keys that verify a close's person's-key decisions: what an evidence bundle carries so an auditor can check them.

For every decision on the close made with a person's own key (channel `signed_callback`: the principal's Ed25519
key; `board`: the passkey the assertion names, live when the decision was made, as countersign/engine/gates.py
re-checks it),
its principal, the login aliases the person may have signed under, and that key. Reads only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import class_row

from countersign.states import Channel


@dataclass(frozen=True)
class DecisionKeyRow:
    decision_id: int
    gate_id: str
    principal_id: str
    channel: Channel
    logins: list[str]
    public_key: bytes | None  # the principal's raw Ed25519 key (signed_callback decisions)
    credential_id: str | None  # the passkey the assertion names (board decisions)
    passkey_public_key: bytes | None  # its COSE key

    def __post_init__(self) -> None:
        object.__setattr__(self, "channel", Channel(self.channel))  # the column's word, as its Enum


async def read_decision_keys(conn: AsyncConnection[Any], close_id: str) -> list[DecisionKeyRow]:
    """Every signed-callback and board decision of the close with the key that verifies it, by decision id."""
    async with conn.cursor(row_factory=class_row(DecisionKeyRow)) as cur:
        await cur.execute(
            "SELECT d.decision_id, d.gate_id::text AS gate_id, d.principal_id, d.channel,"
            " ARRAY(SELECT l.external_id FROM public.principal_identity l"
            "       WHERE l.principal_id = d.principal_id AND l.channel = 'login' ORDER BY l.external_id) AS logins,"
            " CASE WHEN d.channel = 'signed_callback' THEN p.public_key END AS public_key,"
            " k.credential_id, k.public_key AS passkey_public_key"
            " FROM public.gate_decision d JOIN public.gate g ON g.gate_id = d.gate_id"
            " LEFT JOIN public.principal p ON p.principal_id = d.principal_id"
            " LEFT JOIN public.principal_passkey k ON d.channel = 'board'"
            "   AND k.credential_id = d.proof->>'credential_id' AND k.principal_id = d.principal_id"
            "   AND (k.revoked_at IS NULL OR k.revoked_at > d.decided_at)"
            " WHERE g.close_id = %s AND d.channel IN ('signed_callback', 'board')"
            " ORDER BY d.decision_id",
            (close_id,),
        )
        return await cur.fetchall()
