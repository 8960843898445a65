"""The chat events already handled: `slack_event_seen`, written by countersign.bot.queries for the Slack door.

Slack retries an event it thinks was lost; the table's primary key makes the second delivery a no-op.
"""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection


async def record_slack_event(conn: AsyncConnection[Any], event_id: str) -> bool:
    """Records a Slack event id; returns False when it was recorded before."""
    async with conn.cursor() as cur:
        await cur.execute(
            "INSERT INTO slack_event_seen (event_id) VALUES (%s) ON CONFLICT DO NOTHING RETURNING event_id",
            (event_id,),
        )
        return await cur.fetchone() is not None
