"""Reading a close or a payment run for a caller, from any door: the one rule for who may read, and the reads.

Who is asking is found per door: an HTTP reader by API token or signed request (`authenticate_http_reader`), a chat
caller by Slack or Teams identity (`authorize_chat_command`, which traces a refusal), and a local operator at the
command line by holding the database URL (`LOCAL_OPERATOR`, never checked against roles). Every read then passes the
same rule, `authorize`: the roles of countersign/policy/command_roles.py. Errors are those of
countersign/services/errors.py.

Before any of that, a chat door answers only the Slack workspaces and Teams tenants on its allow-list
(`allowed_tenant`, checked before anything touches the database).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection

from countersign.callbacks.callers import (
    Caller,
    ReadCredentials,
    ReadUnauthenticated,
    access_for,
    authenticate_reader,
    record_command_refused,
    resolve_chat_caller,
)
from countersign.callbacks.decision_writer import Seal
from countersign.callbacks.principals import normalise_identity
from countersign.engine import runs
from countersign.engine.workflows.certificates.runs import payment_run_status
from countersign.http_edge.storable import storable_text
from countersign.policy.command_roles import PAYMENTS, READ_CLOSE, TRACE_EXPORT
from countersign.policy.model import Policy
from countersign.services.errors import CloseNotFound, Forbidden, NoCloseStarted, Unauthenticated

# What a door needs besides the functions, so no door reaches into the modules that run the SQL.
__all__ = [
    "LOCAL_OPERATOR",
    "MAX_ID_CHARS",
    "Caller",
    "LocalOperator",
    "ReadCredentials",
    "Reader",
    "allowed_tenant",
    "authenticate_http_reader",
    "authorize",
    "authorize_chat_command",
    "close_to_export",
    "is_close_id",
    "is_gate_id",
    "read_close_status",
    "read_payment_runs",
]

MAX_ID_CHARS = 255  # a chat user, team or tenant id longer than this is nobody


@dataclass(frozen=True)
class LocalOperator:
    """Whoever runs the command line on the machine: holding the database URL, they are not checked against roles.
    `principal_id` is the name the trace records them by (an export's `requested_by`)."""

    principal_id: str = "countersign-cli"


LOCAL_OPERATOR = LocalOperator()
Reader = Caller | LocalOperator


def authorize(command: str, policy: Policy, reader: Reader | None) -> Reader:
    """The one rule every door reads under: the reader, when it may run `command`; else `Forbidden`.

    `None` is a caller nobody knows. A known caller must be an active human holding one of the command's roles.
    """
    if isinstance(reader, LocalOperator):
        return reader
    access = access_for(command, policy, reader)
    if reader is None or not access.allowed:
        raise Forbidden(command, access)
    return reader


async def authenticate_http_reader(
    conn: AsyncConnection[Any], credentials: ReadCredentials, *, method: str, path: str
) -> Caller:
    """The principal behind an HTTP read request (callbacks role), or `Unauthenticated` naming what was wrong."""
    try:
        return await authenticate_reader(conn, credentials, method=method, path=path)
    except ReadUnauthenticated as exc:
        raise Unauthenticated(exc.reason) from None


def allowed_tenant(allowed: frozenset[str], tenant: str) -> bool:
    """Is this Slack team / Teams tenant on the configured allow-list? An empty list allows nobody. Pure."""
    if not tenant or len(tenant) > MAX_ID_CHARS or not storable_text(tenant):
        return False
    return normalise_identity(tenant) in {normalise_identity(t) for t in allowed}


def _printable(value: str) -> str:
    return (value if storable_text(value) else repr(value))[:MAX_ID_CHARS]


async def authorize_chat_command(
    conn: AsyncConnection[Any],
    policy: Policy,
    *,
    platform: str,
    tenant: str,
    user: str,
    command: str,
    seal: Seal | None = None,
) -> Caller:
    """The Slack or Teams caller, when it may run `command`; else `Forbidden`, traced as `command_refused` first.

    `conn` is the callbacks role's. The workspace or tenant allow-list is the door's to check, before this.
    """
    caller = None
    if user and tenant and len(user) <= MAX_ID_CHARS and storable_text(user + tenant):
        caller = await resolve_chat_caller(conn, platform, user, tenant)
    try:
        authorize(command, policy, caller)
    except Forbidden as refused:
        await record_command_refused(
            conn,
            platform=platform,
            tenant=_printable(tenant),
            user=_printable(user),
            command=command,
            reason=refused.access.reason,
            seal=seal,
        )
        raise
    assert caller is not None
    return caller


# A UUID as PostgreSQL's uuid type reads it: 32 ASCII hex digits, hyphenated or not, optionally in braces. Python's
# uuid.UUID also takes a urn:uuid: prefix, underscores, non-ASCII digits and surrounding space, which the database
# refuses (an error, not "no such close"), so they are not ids here.
_UUID_HEX = r"[0-9A-Fa-f]{8}-?[0-9A-Fa-f]{4}-?[0-9A-Fa-f]{4}-?[0-9A-Fa-f]{4}-?[0-9A-Fa-f]{12}"
_UUID_TEXT = re.compile(rf"{_UUID_HEX}|\{{{_UUID_HEX}\}}")


def is_close_id(text: str) -> bool:
    """Is this a close id (a UUID the database reads), rather than an entity's name?"""
    return isinstance(text, str) and _UUID_TEXT.fullmatch(text) is not None


def is_gate_id(text: str) -> bool:
    """Is this a gate id (a UUID the database reads)? Anything else names no gate and never reaches SQL."""
    return is_close_id(text)


async def _close_id(conn: AsyncConnection[Any], close_id: str | None, entity: str | None) -> str:
    if close_id is not None:
        return close_id
    latest = await runs.latest_close_id(conn, entity)
    if latest is None:
        raise NoCloseStarted(entity)
    return latest


async def read_close_status(
    conn: AsyncConnection[Any],
    policy: Policy,
    reader: Reader | None,
    close_id: str | None = None,
    *,
    entity: str | None = None,
    command: str = READ_CLOSE,
) -> dict[str, Any]:
    """The documented `close status --json` shape of `close_id`, or (None) of the latest close, of `entity` when
    given; `conn` is the engine role's. `Forbidden` before anything is read; `CloseNotFound` for an unknown id,
    `NoCloseStarted` when there is no latest close. `command` names the door's command when it has its own
    (`status` in chat), so a refusal names what the caller typed."""
    authorize(command, policy, reader)
    found = await _close_id(conn, close_id, entity)
    try:
        return await runs.close_status(conn, found)
    except runs.CloseNotFound:
        raise CloseNotFound(found) from None


async def close_to_export(
    conn: AsyncConnection[Any],
    policy: Policy,
    reader: Reader | None,
    close_id: str | None = None,
    *,
    entity: str | None = None,
) -> dict[str, Any]:
    """The check before `countersign.services.exports.export_trace`: the reader may export a trace and the close exists.
    Returns the close's status (its `close_id`, `entity` and `period` name the file); errors as `read_close_status`."""
    return await read_close_status(conn, policy, reader, close_id, entity=entity, command=TRACE_EXPORT)


async def read_payment_runs(
    conn: AsyncConnection[Any], policy: Policy, reader: Reader | None, period: str | None = None
) -> list[dict[str, Any]]:
    """The `payments status --json` rows (engine role): every payment run, or those of one month (YYYY-MM)."""
    authorize(PAYMENTS, policy, reader)
    return await payment_run_status(conn, period=period)
