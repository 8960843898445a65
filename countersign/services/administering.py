"""The owner's use cases on people and machines: import principals from a file, list them, issue a passkey enrolment
link, issue and revoke API tokens.

The CLI calls these (`principals import`, `principals list`, `principals enroll`, `principals token`); the writes run on
the owner's connection (the list reads as the engine role); what
they write is checked and, where it grants a person a way in, traced (countersign/callbacks/passkeys.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from psycopg import AsyncConnection

from countersign.audit.trace import seal_pending
from countersign.callbacks import callers, passkeys, principals
from countersign.callbacks.passkeys import PasskeyRefused
from countersign.store.principals import PrincipalListing
from countersign.store.principals import list_principals as _list_principals

__all__ = [
    "PasskeyRefused",
    "PrincipalListing",
    "enrolment_token",
    "import_principals",
    "issue_api_token",
    "list_principals",
    "revoke_api_tokens",
]


async def import_principals(conn: AsyncConnection[Any], file: Path) -> int:
    """Load or refresh the principals of a YAML or CSV file in one transaction; returns how many.
    `PrincipalFileError` naming the file, row and field when the file is wrong: then nothing is written."""
    return await principals.upsert_principals(conn, principals.parse_principals(file))


async def list_principals(conn: AsyncConnection[Any]) -> list[PrincipalListing]:
    """Every principal by id: kind, roles, active, the channels it is mapped on, its key and live passkeys."""
    return await _list_principals(conn)


async def enrolment_token(conn: AsyncConnection[Any], name: str, *, issued_by: str, hours: int) -> tuple[str, str]:
    """A one-time passkey enrolment token for the active person `name` names, traced and sealed; returns (principal
    id, token). `PasskeyRefused` when `name` is not an active human principal."""
    principal = principals.normalise_identity(name)
    async with conn.transaction():
        token = await passkeys.issue_enrolment(conn, principal, issued_by=issued_by, hours=hours)
    await seal_pending(conn)
    return principal, token


async def issue_api_token(conn: AsyncConnection[Any], name: str) -> str:
    """A new API token reading as `name` (shown once; only its SHA-256 is stored). `UnknownPrincipal` otherwise."""
    return await callers.issue_token(conn, name)


async def revoke_api_tokens(conn: AsyncConnection[Any], name: str) -> int:
    """Revoke every live API token of `name`; returns how many were revoked."""
    return await callers.revoke_tokens(conn, name)
