"""Principals (humans and machines) and identity normalisation."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from psycopg import AsyncConnection

ZERO_WIDTH = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff\u00ad"), None)


def normalise_identity(raw: str) -> str:
    """NFKC, drop zero-width characters, strip, case-fold.

    `Orchestrator\u200b` and the full-width `ｏｒｃｈｅｓｔｒａｔｏｒ` both become `orchestrator`.
    """
    text = unicodedata.normalize("NFKC", raw).translate(ZERO_WIDTH)
    return text.strip().casefold()


@dataclass(frozen=True)
class Principal:
    principal_id: str
    kind: str
    display_name: str
    roles: tuple[str, ...]

    @property
    def is_human(self) -> bool:
        return self.kind == "human"


class PrincipalFileError(ValueError):
    def __init__(self, source: str, field: str, reason: str) -> None:
        super().__init__(f"{source}: {field}: {reason}")
        self.source = source
        self.field = field
        self.reason = reason


async def find_principal(conn: AsyncConnection[Any], raw_id: str) -> Principal | None:
    async with conn.cursor() as cur:
        await cur.execute(
            "SELECT principal_id, kind, display_name, roles FROM principal WHERE principal_id = %s",
            (normalise_identity(raw_id),),
        )
        row = await cur.fetchone()
    return Principal(row[0], row[1], row[2], tuple(row[3])) if row else None


def parse_principals(path: Path) -> list[Principal]:
    source = path.name
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise PrincipalFileError(source, "(file)", str(exc)) from None
    if not isinstance(data, dict) or not isinstance(data.get("principals"), list):
        raise PrincipalFileError(source, "principals", "must be a list")
    out: list[Principal] = []
    for index, item in enumerate(data["principals"]):
        where = f"principals[{index}]"
        if not isinstance(item, dict):
            raise PrincipalFileError(source, where, "must be a mapping")
        pid, kind, name, roles = item.get("id"), item.get("kind"), item.get("name"), item.get("roles", [])
        if not isinstance(pid, str) or not normalise_identity(pid):
            raise PrincipalFileError(source, f"{where}.id", "is required")
        if kind not in ("human", "machine"):
            raise PrincipalFileError(source, f"{where}.kind", f"must be human or machine, not {kind!r}")
        if not isinstance(name, str) or not name:
            raise PrincipalFileError(source, f"{where}.name", "is required")
        if not isinstance(roles, list) or not all(isinstance(r, str) for r in roles):
            raise PrincipalFileError(source, f"{where}.roles", "must be a list of strings")
        out.append(Principal(normalise_identity(pid), kind, name, tuple(roles)))
    return out


async def upsert_principals(conn: AsyncConnection[Any], principals: list[Principal]) -> int:
    """Insert or refresh principals. A machine principal can never be turned into a human one."""
    async with conn.transaction(), conn.cursor() as cur:
        for p in principals:
            await cur.execute(
                "INSERT INTO principal (principal_id, kind, display_name, roles) VALUES (%s, %s, %s, %s)"
                " ON CONFLICT (principal_id) DO UPDATE SET display_name = EXCLUDED.display_name,"
                " roles = EXCLUDED.roles WHERE principal.kind = EXCLUDED.kind RETURNING principal_id",
                (p.principal_id, p.kind, p.display_name, list(p.roles)),
            )
            if await cur.fetchone() is None:
                raise PrincipalFileError("principals", p.principal_id, "exists with a different kind; refusing")
    return len(principals)
