"""Each StrEnum in `countersign.store.states` names exactly the words its table admits: the CHECKs of migrations 0001
and 0003,
the CASE of the `gate_state` view (migration 0002) and the decisions it counts."""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Any

import pytest

from countersign.store.states import Decision, DispatchStatus, GateStatus, OutboxKind, OutboxStatus, PrincipalKind


async def _check_words(conn: Any, table: str, column: str) -> set[str]:
    async with conn.cursor() as cur:
        await cur.execute(
            "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = %s::regclass AND contype = 'c'",
            (table,),
        )
        definitions = [definition for (definition,) in await cur.fetchall()]
    (found,) = [d for d in definitions if re.search(rf"\(?\b{column}\b\)? = ANY", d) or f"({column} IN" in d]
    return set(re.findall(r"'([a-z_]+)'::text", found))


@pytest.mark.parametrize(
    ("table", "column", "states"),
    [
        ("outbox_message", "kind", OutboxKind),
        ("outbox_message", "status", OutboxStatus),
        ("principal", "kind", PrincipalKind),
        ("gate_decision", "decision", Decision),
        ("dispatch", "status", DispatchStatus),
    ],
)
async def test_an_enum_names_the_words_its_column_admits(
    conn: Any, table: str, column: str, states: type[StrEnum]
) -> None:
    assert await _check_words(conn, table, column) == {state.value for state in states}


async def test_gate_status_names_every_outcome_the_view_derives(conn: Any) -> None:
    async with conn.cursor() as cur:
        await cur.execute("SELECT pg_get_viewdef('gate_state'::regclass)")
        (definition,) = await cur.fetchone()
    case = definition[definition.index("CASE") : definition.index("END AS status")]
    derived = set(re.findall(r"THEN '([a-z_]+)'::text", case)) | set(re.findall(r"ELSE '([a-z_]+)'::text", case))
    assert derived == {status.value for status in GateStatus}


async def test_proof_kinds_are_the_words_policy_and_both_proof_checks_admit(conn: Any) -> None:
    """records.ProofKind, policy's PROOF_KINDS and the CHECKs of policy_tier and gate name the same proofs."""
    from countersign.policy.model import PROOF_KINDS
    from countersign.store.states import ProofKind

    words = {kind.value for kind in ProofKind}
    assert set(PROOF_KINDS) == words
    for table in ("policy_tier", "gate"):
        async with conn.cursor() as cur:
            await cur.execute(
                "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = %s::regclass"
                " AND conname LIKE '%%accepted_proofs%%'",
                (table,),
            )
            (definition,) = [d for (d,) in await cur.fetchall()]
        assert set(re.findall(r"'([a-z_0-9]+)'::text", definition)) == words, table
