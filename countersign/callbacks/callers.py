"""Who is asking: chat callers and HTTP readers resolved to principals, per-principal API tokens, and the trace
events that record refused commands and exports. Every function here touches the database and says so by taking
a connection.

The reads and writes of principals and API tokens are countersign.store.principals (a caller is a principal read
for the access rules); `Caller` lives there and is re-exported here. The trace events go through countersign.audit.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection

from countersign.audit.person_proof import read_message, verify_signature
from countersign.audit.trace import append_event, seal_pending
from countersign.callbacks.decision_writer import Seal
from countersign.callbacks.principals import CHANNELS, normalise_identity
from countersign.policy.command_roles import AccessDecision, check_access
from countersign.policy.model import Policy
from countersign.states import IdentityChannel, TraceKind
from countersign.store import principals as principal_store
from countersign.store.principals import Caller as Caller

TOKEN_PREFIX = "cs_"
MAX_TOKEN_CHARS = 200
READ_WINDOW_S = 300
MAX_HEADER_CHARS = 256


def access_for(command: str, policy: Policy, caller: Caller | None) -> AccessDecision:
    if caller is None:
        return check_access(command, policy, known=False, human=False, active=False, roles=())
    return check_access(command, policy, known=True, human=caller.is_human, active=caller.active, roles=caller.roles)


async def resolve_chat_caller(conn: AsyncConnection[Any], channel: str, external_id: str, tenant: str) -> Caller | None:
    """The principal behind a Slack user in a team or a Teams AAD object in a tenant; None when unmapped."""
    if channel not in CHANNELS:
        raise ValueError(f"unknown channel {channel!r}; expected one of {CHANNELS}")
    return await principal_store.read_caller_by_identity(
        conn, IdentityChannel(channel), normalise_identity(tenant), normalise_identity(external_id)
    )


async def find_caller(conn: AsyncConnection[Any], raw_id: str) -> tuple[Caller, bytes | None] | None:
    """A principal by id (or login identity) with its registered Ed25519 public key, if any."""
    row = await principal_store.read_caller_with_key(conn, normalise_identity(raw_id))
    if row is None:
        return None
    return row.caller, bytes(row.public_key) if row.public_key is not None else None


async def record_command_refused(
    conn: AsyncConnection[Any],
    *,
    platform: str,
    tenant: str,
    user: str,
    command: str,
    reason: str,
    seal: Seal | None = None,
) -> None:
    """Trace a refused chat command (written by the callbacks role, actor `callbacks`)."""
    async with conn.transaction():
        await append_event(
            conn,
            actor="callbacks",
            kind=TraceKind.COMMAND_REFUSED,
            payload={"platform": platform, "tenant": tenant, "user": user, "command": command, "reason": reason},
        )
    await (seal() if seal is not None else seal_pending(conn))


async def record_trace_exported(
    conn: AsyncConnection[Any],
    *,
    principal_id: str,
    close_id: str,
    fmt: str,
    data: bytes,
    platform: str,
    seal: Seal | None = None,
) -> None:
    """Trace an export: who asked, which close, the format and the SHA-256 and size of the bytes handed out."""
    async with conn.transaction():
        await append_event(
            conn,
            actor=principal_id,
            close_id=close_id,
            kind=TraceKind.TRACE_EXPORTED,
            payload=export_payload(close_id=close_id, fmt=fmt, data=data, platform=platform),
        )
    await (seal() if seal is not None else seal_pending(conn))


def export_payload(*, close_id: str, fmt: str, data: bytes, platform: str) -> dict[str, Any]:
    return {
        "close_id": close_id,
        "format": fmt,
        "sha256": hashlib.sha256(data).hexdigest(),
        "bytes": len(data),
        "platform": platform,
    }


# --- per-principal API tokens ---------------------------------------------------------------------------------


class UnknownPrincipal(LookupError):
    def __init__(self, principal: str) -> None:
        super().__init__(f"{principal}: no such principal")
        self.principal = principal


def token_digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


async def issue_token(conn: AsyncConnection[Any], principal: str) -> str:
    """A new API token for a principal. Only its SHA-256 is stored: the token is shown once, to the caller."""
    principal_id = await principal_store.read_principal_id(conn, normalise_identity(principal))
    if principal_id is None:
        raise UnknownPrincipal(principal)
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    await principal_store.insert_api_token(conn, token_digest(token), principal_id)
    return token


async def revoke_tokens(conn: AsyncConnection[Any], principal: str) -> int:
    """Revoke every live token of a principal; returns how many."""
    return await principal_store.revoke_api_tokens(conn, normalise_identity(principal))


async def caller_for_token(conn: AsyncConnection[Any], token: str) -> Caller | None:
    """The principal holding a live (unrevoked) token; None for an unknown, revoked or malformed token."""
    if not token.startswith(TOKEN_PREFIX) or len(token) > MAX_TOKEN_CHARS or not token.isascii():
        return None
    return await principal_store.read_caller_by_token(conn, token_digest(token))


@dataclass(frozen=True)
class ReadCredentials:
    """What a reader presented: a bearer token, or a person's signature over the request."""

    token: str | None = None
    principal: str | None = None
    signed_at: str | None = None
    signature: str | None = None


class ReadUnauthenticated(PermissionError):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


async def authenticate_reader(
    conn: AsyncConnection[Any], credentials: ReadCredentials, *, method: str, path: str, now_s: int | None = None
) -> Caller:
    """The principal behind a read request, or ReadUnauthenticated naming what was wrong (a 401)."""
    if credentials.token is not None:
        caller = await caller_for_token(conn, credentials.token)
        if caller is None:
            raise ReadUnauthenticated("unknown or revoked API token")
        return caller
    if credentials.principal is None and credentials.signature is None and credentials.signed_at is None:
        raise ReadUnauthenticated("no credentials: send Authorization: Bearer cs_... or a signed request")
    principal, signed_at_text, signature = credentials.principal, credentials.signed_at, credentials.signature
    if not principal or not signed_at_text or not signature:
        raise ReadUnauthenticated(
            "a signed request needs X-Countersign-Principal, X-Countersign-Signed-At and X-Countersign-Person-Signature"
        )
    if any(len(v) > MAX_HEADER_CHARS for v in (principal, signed_at_text, signature)):
        raise ReadUnauthenticated("a signature header is too long")
    if not (signed_at_text.isascii() and signed_at_text.isdigit()):
        raise ReadUnauthenticated("X-Countersign-Signed-At must be unix seconds")
    signed_at = int(signed_at_text)
    now = int(time.time()) if now_s is None else now_s
    if abs(now - signed_at) > READ_WINDOW_S:
        raise ReadUnauthenticated(f"X-Countersign-Signed-At is more than {READ_WINDOW_S} s away from now")
    found = await find_caller(conn, principal)
    if found is None:
        raise ReadUnauthenticated("unknown principal")
    caller, public_key = found
    if public_key is None:
        raise ReadUnauthenticated("this principal has no registered public key")
    message = read_message(method=method, path=path, principal=principal, signed_at=signed_at)
    if not verify_signature(public_key, message, signature):
        raise ReadUnauthenticated("the person signature does not verify")
    return caller
