"""Each StrEnum in `countersign.states` names exactly the words its table admits: the CHECKs of the migrations,
the CASE of the `gate_state` view (migration 0002) and the decisions it counts."""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Any

import pytest

from countersign.states import (
    ChallengePurpose,
    Channel,
    ChatPlatform,
    Decision,
    DispatchStatus,
    GateKind,
    GateLifecycle,
    GateStatus,
    IdentityChannel,
    NoticeKind,
    OutboxKind,
    OutboxStatus,
    PeriodState,
    PrincipalKind,
    RunState,
    TaskState,
)


async def _check_words(conn: Any, table: str, column: str) -> set[str]:
    async with conn.cursor() as cur:
        await cur.execute(
            "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = %s::regclass AND contype = 'c'",
            (table,),
        )
        definitions = [definition for (definition,) in await cur.fetchall()]
    lists = [d for d in definitions if re.search(rf"\(?\b{column}\b\)? = ANY", d) or f"({column} IN" in d]
    # a column that admits one word is checked as `(column = 'word'::text)`
    (found,) = lists or [d for d in definitions if re.fullmatch(rf"CHECK \(\({column} = '[a-z_]+'::text\)\)", d)]
    return set(re.findall(r"'([a-z_]+)'::text", found))


@pytest.mark.parametrize(
    ("table", "column", "states"),
    [
        ("outbox_message", "kind", OutboxKind),
        ("outbox_message", "status", OutboxStatus),
        ("principal", "kind", PrincipalKind),
        ("gate_decision", "decision", Decision),
        ("dispatch", "status", DispatchStatus),
        ("webauthn_challenge", "purpose", ChallengePurpose),
        ("close_run", "status", RunState),
        ("close_task", "status", TaskState),
        ("gate", "lifecycle", GateLifecycle),
        ("accounting_period", "status", PeriodState),
        ("gate", "kind", GateKind),
        ("principal_identity", "channel", IdentityChannel),
        ("outbox_message", "platform", ChatPlatform),
    ],
)
async def test_an_enum_names_the_words_its_column_admits(
    conn: Any, table: str, column: str, states: type[StrEnum]
) -> None:
    assert await _check_words(conn, table, column) == {state.value for state in states}


async def test_notice_kind_names_the_words_both_notice_tables_admit(conn: Any) -> None:
    """The payer's notices (`payment_notice`) and the payee's default notice (`payee_default_notice`), no more."""
    payer, payee = (
        await _check_words(conn, "payment_notice", "kind"),
        await _check_words(conn, "payee_default_notice", "kind"),
    )
    assert payer == {NoticeKind.PAY_LESS, NoticeKind.PAYMENT} and payee == {NoticeKind.PAYEE_DEFAULT}
    assert payer | payee == {kind.value for kind in NoticeKind}


async def test_job_state_names_the_job_librarys_statuses(conn: Any) -> None:
    """`JobState` is the job library's own enum type (`procrastinate_job_status`), word for word."""
    from countersign.states import JobState

    async with conn.cursor() as cur:
        await cur.execute("SELECT enum_range(NULL::procrastinate.procrastinate_job_status)::text[]")
        (words,) = await cur.fetchone()
    assert words == [state.value for state in JobState]


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
    from countersign.states import ProofKind

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


def channels_admitted(function_source: str) -> dict[str, str]:
    """The channels a decision may come through and the proof each carries, read off the trigger's CASE."""
    case = function_source[function_source.index("CASE NEW.channel") :]
    case = case[: case.index("END;")]
    return dict(re.findall(r"WHEN '([a-z_]+)' THEN '([a-z_0-9]+)'", case))


async def test_channels_are_the_doors_the_decision_trigger_admits(conn: Any) -> None:
    """`Channel` names each door `admit_gate_decision` (migration 0017) maps to a proof, and no other (not "web")."""
    from countersign.callbacks.decision_writer import CHANNEL_PROOF

    async with conn.cursor() as cur:
        await cur.execute("SELECT pg_get_functiondef('public.admit_gate_decision'::regproc)")
        (source,) = await cur.fetchone()
    admitted = channels_admitted(source)
    assert set(admitted) == {channel.value for channel in Channel}
    assert admitted == {channel.value: proof.value for channel, proof in CHANNEL_PROOF.items()}


def proof_kinds_admitted(function_source: str) -> set[str]:
    """The proof kinds the trigger admits: each door's required `proof->>'kind'`, and a chat door's own channel."""
    required = set(re.findall(r"NEW\.proof->>'kind' IS DISTINCT FROM '([a-z_0-9]+)'", function_source))
    if "NEW.proof->>'kind' IS DISTINCT FROM NEW.channel" in function_source:
        required |= {"slack", "teams"}  # the ELSE branch: the channel names the proof, only for the chat doors
    return required


async def test_decision_proofs_are_the_kinds_the_decision_trigger_admits(conn: Any) -> None:
    from countersign.states import DecisionProof

    async with conn.cursor() as cur:
        await cur.execute("SELECT pg_get_functiondef('public.admit_gate_decision'::regproc)")
        (source,) = await cur.fetchone()
    assert proof_kinds_admitted(source) == {proof.value for proof in DecisionProof}
    assert proof_kinds_admitted("IF NEW.proof->>'kind' IS DISTINCT FROM 'ed25519'") != {p.value for p in DecisionProof}


def test_a_channel_the_trigger_does_not_admit_is_seen() -> None:
    # Negative control: a trigger that admitted a "web" door would not match the Enum.
    source = "v := CASE NEW.channel WHEN 'slack' THEN 'platform_identity' WHEN 'web' THEN 'passkey' END;"
    assert channels_admitted(source) == {"slack": "platform_identity", "web": "passkey"}
    assert set(channels_admitted(source)) != {channel.value for channel in Channel}


def trace_kinds_in(function_sources: str) -> tuple[set[str], set[str]]:
    """The kinds the database's functions write into the trace queue themselves, and the decision side's own kinds
    the trace writers' trigger (migration 0006) guards."""
    written = set(re.findall(r"INSERT INTO public\.trace_pending[^;]*?VALUES[^;]*?'([a-z_]+)'", function_sources))
    guarded = re.findall(r"NEW\.kind = ANY \('\{([a-z_,]+)\}'::text\[\]\)", function_sources)
    return written, {kind for words in guarded for kind in words.split(",")}


async def test_trace_kinds_name_what_the_database_writes_and_guards(conn: Any) -> None:
    """`TraceKind` names the kinds the database traces itself (`gate_decided`, the passkey, delegation and
    routing events) and the decision
    side's kinds its trace writers' trigger reserves for the callbacks role (`gate_decided` is the database's own)."""
    from countersign.states import TraceKind

    async with conn.cursor() as cur:
        await cur.execute(
            "SELECT string_agg(pg_get_functiondef(p.oid), E'\\n') FROM pg_proc p"
            " JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'public' AND p.prokind = 'f'"
        )
        (sources,) = await cur.fetchone()
    written, guarded = trace_kinds_in(sources)
    assert written == {
        "gate_decided",
        "passkey_enrolled",
        "passkey_revoked",
        "delegation_set",
        "delegation_revoked",
        "gate_rerouted",
    }
    assert guarded == {"decision_refused", "trace_exported", "command_refused"}
    assert written | guarded <= {kind.value for kind in TraceKind}
