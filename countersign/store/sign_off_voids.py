"""Sign-off voids (migration sign_off_voided, docs/adr/0046): reads `sign_off_void` (the account's name in the
close's books is recorded with it). The database alone writes the table (triggers on the changed tables); nothing here
writes it.

Called by `countersign.engine.sign_off_voids` (which reopens the task and traces the void), by the gate read in
`countersign.store.gates` and by the board's reads; every function runs on the caller's connection.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import class_row, scalar_row


@dataclass(frozen=True)
class SignOffVoid:
    """One change that voided a gate's approval: the table it landed in, its journal or line reference, the account
    (a contract, for a certificate) with its name in the close's books, the amount with its currency, and when."""

    void_id: int
    gate_id: str
    close_id: str
    task: str
    attempt: int
    change_table: str
    change_ref: str
    change_line: str
    account: str
    account_name: str | None
    description: str
    amount: Decimal
    currency: str
    changed_by: str
    changed_at: datetime

    def facts(self) -> dict[str, Any]:
        """The void as a trace event and a JSON read carry it."""
        return {
            "void_id": self.void_id,
            "gate_id": self.gate_id,
            "task": self.task,
            "attempt": self.attempt,
            "change_table": self.change_table,
            "change_ref": self.change_ref,
            "change_line": self.change_line,
            "account": self.account,
            "account_name": self.account_name,
            "description": self.description,
            "amount": str(self.amount),
            "currency": self.currency,
            "changed_by": self.changed_by,
            "changed_at": self.changed_at.isoformat(),
        }


_VOIDS = (
    "SELECT v.void_id, v.gate_id::text AS gate_id, v.close_id::text AS close_id, v.task, v.attempt, v.change_table,"
    " v.change_ref, v.change_line, v.account, v.account_name, v.description, v.amount, v.currency::text"
    " AS currency, v.changed_by, v.changed_at FROM public.sign_off_void v"
)


VOIDS_OF_GATE_JSON = (
    "(SELECT coalesce(jsonb_agg(jsonb_build_object('void_id', v.void_id, 'gate_id', v.gate_id::text,"
    " 'close_id', v.close_id::text, 'task', v.task, 'attempt', v.attempt, 'change_table', v.change_table,"
    " 'change_ref', v.change_ref, 'change_line', v.change_line, 'account', v.account, 'account_name', v.account_name,"
    " 'description', v.description, 'amount', v.amount::text, 'currency', v.currency::text,"
    " 'changed_by', v.changed_by, 'changed_at', v.changed_at) ORDER BY v.void_id), '[]'::jsonb)"
    " FROM public.sign_off_void v WHERE v.gate_id = g.gate_id)"
)
"""A scalar subquery over a gate row aliased `g`: its voids as one JSON array (the gate's one read, ADR 0025)."""


def voids_from_json(rows: Any) -> tuple[SignOffVoid, ...]:
    """The voids VOIDS_OF_GATE_JSON returned, typed (amounts exact: the database printed them as text)."""
    return tuple(
        SignOffVoid(
            **{
                **row,
                "amount": Decimal(row["amount"]),
                "changed_at": datetime.fromisoformat(row["changed_at"]),
            }
        )
        for row in rows or []
    )


async def voids_of_gate(conn: AsyncConnection[Any], gate_id: str) -> list[SignOffVoid]:
    """Every change that voided the gate, in the order the database recorded them."""
    async with conn.cursor(row_factory=class_row(SignOffVoid)) as cur:
        await cur.execute(_VOIDS + " WHERE v.gate_id = %s ORDER BY v.void_id", (gate_id,))
        return await cur.fetchall()


async def voids_of_close(conn: AsyncConnection[Any], close_id: str) -> list[SignOffVoid]:
    """Every void of the close's gates, in the order the database recorded them."""
    async with conn.cursor(row_factory=class_row(SignOffVoid)) as cur:
        await cur.execute(_VOIDS + " WHERE v.close_id = %s ORDER BY v.void_id", (close_id,))
        return await cur.fetchall()


async def voids_to_reopen(conn: AsyncConnection[Any], close_id: str) -> list[SignOffVoid]:
    """The voids of gates of the tasks' current attempts: each such task has not been reopened yet."""
    async with conn.cursor(row_factory=class_row(SignOffVoid)) as cur:
        await cur.execute(
            _VOIDS + " JOIN public.close_task t ON t.close_id = v.close_id AND t.task = v.task"
            " AND t.attempt = v.attempt WHERE v.close_id = %s ORDER BY v.void_id",
            (close_id,),
        )
        return await cur.fetchall()


async def attempt_voided(conn: AsyncConnection[Any], close_id: str, task: str, attempt: int) -> bool:
    """Whether a change voided the sign-off of the task's attempt (done work may then run again)."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute(
            "SELECT EXISTS (SELECT 1 FROM public.sign_off_void v"
            " WHERE v.close_id = %s AND v.task = %s AND v.attempt = %s)",
            (close_id, task, attempt),
        )
        found: bool | None = await cur.fetchone()
    return bool(found)


async def standing_voids(conn: AsyncConnection[Any], close_id: str) -> int:
    """How many voids of the close no later applied, approved approval gate of the same task answers."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute("SELECT public.standing_sign_off_voids(%s)", (close_id,))
        found: int | None = await cur.fetchone()
    return int(found or 0)


async def tasks_with_standing_voids(conn: AsyncConnection[Any], close_id: str) -> set[str]:
    """The tasks of the close with a void no later applied, approved approval gate answers."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute(
            "SELECT DISTINCT v.task FROM public.sign_off_void v WHERE v.close_id = %s AND NOT EXISTS ("
            " SELECT 1 FROM public.gate_state s WHERE s.close_id = v.close_id AND s.task = v.task"
            " AND s.attempt > v.attempt AND s.kind = 'approval' AND s.lifecycle = 'applied'"
            " AND s.status = 'approved')",
            (close_id,),
        )
        return set(await cur.fetchall())
