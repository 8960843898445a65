"""Enrolled passkeys (`principal_passkey`) as the chat doors name them to their person.

Reads `principal_passkey` and `principal_identity`; called by countersign.bot.queries for the enrolment notice a
person's direct message carries. The ceremonies' own statements are still in countersign/callbacks/passkeys.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import class_row


@dataclass(frozen=True)
class EnrolledPasskey:
    label: str
    created_at: datetime


async def enrolled_passkey_for_slack_user(
    conn: AsyncConnection[Any], credential_id: str, slack_user: str
) -> EnrolledPasskey | None:
    """Returns the passkey's label and enrolment time, when `slack_user` is a Slack identity of the passkey's own
    person (identities are stored case-folded, Slack user ids are upper case); None otherwise."""
    async with conn.cursor(row_factory=class_row(EnrolledPasskey)) as cur:
        await cur.execute(
            "SELECT k.label, k.created_at FROM principal_passkey k"
            " JOIN principal_identity i ON i.principal_id = k.principal_id AND i.channel = 'slack'"
            " WHERE k.credential_id = %s AND upper(i.external_id) = %s LIMIT 1",
            (credential_id, slack_user),
        )
        return await cur.fetchone()
