"""Principals (humans and machines), their identities per channel, and identity normalisation.

Parses the principal files and normalises identities; the rows and their SQL are countersign.store.principals, which
this module calls with keys it has normalised. `Principal` and `Identity` live there and are re-exported here.
"""

from __future__ import annotations

import csv
import io
import re
import unicodedata
from pathlib import Path
from typing import Any

import yaml
from psycopg import AsyncConnection

from countersign.audit.person_proof import parse_public_key
from countersign.states import IdentityChannel, PrincipalKind
from countersign.store import principals as principal_store
from countersign.store.principals import Identity as Identity
from countersign.store.principals import Principal as Principal

# Zero-width and invisible formatting characters that make two ids look alike while comparing unequal.
INVISIBLE = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u200e\u200f\u2060\u2061\u2062\u2063\u2064\ufeff\u00ad\u180e"))
CHANNELS = tuple(channel.value for channel in IdentityChannel)  # ("slack", "teams", "login")
KINDS = tuple(kind.value for kind in PrincipalKind)
# PostgreSQL text cannot hold NUL; a lone surrogate (YAML's "\ud800" escape) is not valid Unicode at all.
_UNSTORABLE = re.compile(r"[\x00\ud800-\udfff]")
CSV_COLUMNS = (
    "id",
    "kind",
    "name",
    "roles",
    "slack_team",
    "slack_user",
    "teams_tenant",
    "teams_aad_object_id",
    "login",
)
# Optional trailing columns a CSV header may add after CSV_COLUMNS, in this order.
CSV_OPTIONAL_COLUMNS = ("public_key",)


def normalise_identity(raw: str) -> str:
    """NFKC, drop invisible characters and all whitespace, case-fold (ids never contain spaces).

    `Orchestrator\\u200b`, ` orchestrator` and the full-width `ｏｒｃｈｅｓｔｒａｔｏｒ` all become `orchestrator`.
    """
    text = unicodedata.normalize("NFKC", raw).translate(INVISIBLE)
    return unicodedata.normalize("NFKC", "".join(text.split()).casefold())


class PrincipalFileError(ValueError):
    def __init__(self, source: str, field: str, reason: str) -> None:
        super().__init__(f"{source}: {field}: {reason}")
        self.source = source
        self.field = field
        self.reason = reason


async def find_principal(conn: AsyncConnection[Any], raw_id: str) -> Principal | None:
    """By principal id (a login name) first, then by a `login` identity."""
    return await principal_store.read_principal(conn, normalise_identity(raw_id))


async def resolve_identity(
    conn: AsyncConnection[Any], channel: str, external_id: str, tenant: str = ""
) -> Principal | None:
    """The principal behind a chat identity (Slack user in a team, Teams AAD object in a tenant)."""
    if channel not in CHANNELS:
        raise ValueError(f"unknown channel {channel!r}; expected one of {CHANNELS}")
    return await principal_store.read_principal_by_identity(
        conn, IdentityChannel(channel), normalise_identity(tenant), normalise_identity(external_id)
    )


def _text(value: object, source: str, where: str, *, required: bool = True) -> str:
    if value is None or value == "":
        if required:
            raise PrincipalFileError(source, where, "is required")
        return ""
    if not isinstance(value, str):
        raise PrincipalFileError(source, where, f"must be a string, not {type(value).__name__}")
    _refuse_unstorable(value, source, where)
    return value


def _refuse_unstorable(value: str, source: str, where: str) -> None:
    if _UNSTORABLE.search(value):
        raise PrincipalFileError(source, where, "contains a NUL character or a lone surrogate (cannot be stored)")


def _string_keys(mapping: dict[Any, Any], source: str, where: str) -> None:
    for key in mapping:
        if not isinstance(key, str):
            raise PrincipalFileError(source, where, f"field names must be strings, found {type(key).__name__} {key!r}")


def _public_key(source: str, where: str, kind: object, raw: object) -> bytes | None:
    if raw is None or raw == "":
        return None
    if not isinstance(raw, str):
        raise PrincipalFileError(source, where, f"must be base64 text, not {type(raw).__name__}")
    if kind != PrincipalKind.HUMAN:
        raise PrincipalFileError(source, where, "only human principals carry a person key")
    try:
        return parse_public_key(raw)
    except ValueError as exc:
        raise PrincipalFileError(source, where, f"is not an Ed25519 public key: {exc}") from None


def _principal(
    source: str,
    where: str,
    pid: object,
    kind: object,
    name: object,
    roles: object,
    identities: list[Identity],
    public_key: object = None,
) -> Principal:
    principal_id = normalise_identity(_text(pid, source, f"{where}.id"))
    if not principal_id:
        raise PrincipalFileError(source, f"{where}.id", "is empty after normalisation")
    if kind not in KINDS:
        raise PrincipalFileError(source, f"{where}.kind", f"must be one of {list(KINDS)}, not {kind!r}")
    display = _text(name, source, f"{where}.name")
    if not isinstance(roles, list) or not all(isinstance(r, str) and r.strip() for r in roles):
        raise PrincipalFileError(source, f"{where}.roles", "must be a list of non-empty strings")
    for index, role in enumerate(roles):
        _refuse_unstorable(role, source, f"{where}.roles[{index}]")
    if kind == PrincipalKind.MACHINE and roles:
        raise PrincipalFileError(source, f"{where}.roles", "machine principals hold no approval roles")
    key = _public_key(source, f"{where}.public_key ({principal_id})", kind, public_key)
    return Principal(
        principal_id, PrincipalKind(kind), display, tuple(r.strip() for r in roles), tuple(identities), key
    )


def _identity(
    source: str, where: str, channel: str, tenant: object, external: object, tenant_where: str = ""
) -> Identity:
    external_id = normalise_identity(_text(external, source, where))
    if channel != "login" and not _text(tenant, source, tenant_where, required=False):
        raise PrincipalFileError(source, tenant_where, f"a {channel} identity needs its team or tenant id")
    return Identity(IdentityChannel(channel), normalise_identity(str(tenant or "")), external_id)


def _yaml_identities(source: str, where: str, raw: object) -> list[Identity]:
    if raw is None:
        return []
    if not isinstance(raw, dict):
        raise PrincipalFileError(source, f"{where}.identities", "must be a mapping")
    _string_keys(raw, source, f"{where}.identities")
    unknown = sorted(set(raw) - set(CHANNELS))
    if unknown:
        raise PrincipalFileError(source, f"{where}.identities.{min(unknown)}", f"unknown channel; expected {CHANNELS}")
    out: list[Identity] = []
    if "slack" in raw:
        slack = raw["slack"]
        if not isinstance(slack, dict):
            raise PrincipalFileError(source, f"{where}.identities.slack", "must have team and user")
        out.append(
            _identity(
                source,
                f"{where}.identities.slack.user",
                "slack",
                slack.get("team"),
                slack.get("user"),
                f"{where}.identities.slack.team",
            )
        )
    if "teams" in raw:
        teams = raw["teams"]
        if not isinstance(teams, dict):
            raise PrincipalFileError(source, f"{where}.identities.teams", "must have tenant and aad_object_id")
        out.append(
            _identity(
                source,
                f"{where}.identities.teams.aad_object_id",
                "teams",
                teams.get("tenant"),
                teams.get("aad_object_id"),
                f"{where}.identities.teams.tenant",
            )
        )
    if "login" in raw:
        out.append(_identity(source, f"{where}.identities.login", "login", "", raw["login"]))
    return out


def parse_principals(path: Path) -> list[Principal]:
    """Read principals from YAML (`principals:` list) or CSV (columns CSV_COLUMNS, roles separated by `;`)."""
    source = path.name
    if not path.is_file():
        raise PrincipalFileError(source, "(file)", "does not exist")
    principals = _parse_csv(path, source) if path.suffix.lower() == ".csv" else _parse_yaml(path, source)
    seen: dict[tuple[str, str, str], str] = {}
    ids: set[str] = set()
    for p in principals:
        if p.principal_id in ids:
            raise PrincipalFileError(source, p.principal_id, "appears twice")
        ids.add(p.principal_id)
        for ident in p.identities:
            key = (ident.channel, ident.tenant, ident.external_id)
            if key in seen:
                raise PrincipalFileError(
                    source, p.principal_id, f"{ident.channel} identity also belongs to {seen[key]}"
                )
            seen[key] = p.principal_id
    return principals


def _parse_yaml(path: Path, source: str) -> list[Principal]:
    try:
        data = yaml.safe_load(_read_text(path, source))
    except yaml.YAMLError as exc:
        raise PrincipalFileError(source, "(file)", str(exc).splitlines()[0]) from None
    except RecursionError:
        raise PrincipalFileError(source, "(file)", "invalid YAML: nested too deeply") from None
    except (ValueError, TypeError) as exc:
        # PyYAML's scalar constructors raise these for e.g. `2026-13-45` or an integer of over 4300 digits.
        raise PrincipalFileError(source, "(file)", f"invalid YAML: unreadable value ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("principals"), list):
        raise PrincipalFileError(source, "principals", "must be a list")
    out: list[Principal] = []
    for index, item in enumerate(data["principals"]):
        where = f"principals[{index}]"
        if not isinstance(item, dict):
            raise PrincipalFileError(source, where, "must be a mapping")
        _string_keys(item, source, where)
        unknown = sorted(set(item) - {"id", "kind", "name", "roles", "identities", "public_key"})
        if unknown:
            raise PrincipalFileError(source, f"{where}.{min(unknown)}", "is not a known field")
        identities = _yaml_identities(source, where, item.get("identities"))
        out.append(
            _principal(
                source,
                where,
                item.get("id"),
                item.get("kind"),
                item.get("name"),
                item.get("roles", []),
                identities,
                item.get("public_key"),
            )
        )
    return out


def _read_text(path: Path, source: str) -> str:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise PrincipalFileError(source, "(file)", f"cannot read: {exc.strerror or exc}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise PrincipalFileError(source, "(file)", f"not valid UTF-8 (line {line}, byte offset {exc.start})") from None


def _parse_csv(path: Path, source: str) -> list[Principal]:
    reader = csv.reader(io.StringIO(_read_text(path, source), newline=""))
    try:
        return _csv_principals(reader, source)
    except csv.Error as exc:
        raise PrincipalFileError(source, f"line {reader.line_num}", f"malformed CSV: {exc}") from None


def _csv_principals(reader: Any, source: str) -> list[Principal]:
    out: list[Principal] = []
    header = tuple(next(reader, ()))
    columns = CSV_COLUMNS + header[len(CSV_COLUMNS) :]
    if header[: len(CSV_COLUMNS)] != CSV_COLUMNS or header[len(CSV_COLUMNS) :] not in (
        CSV_OPTIONAL_COLUMNS[:n] for n in range(len(CSV_OPTIONAL_COLUMNS) + 1)
    ):
        raise PrincipalFileError(
            source,
            "(header)",
            f"expected columns {list(CSV_COLUMNS)}, optionally followed by {list(CSV_OPTIONAL_COLUMNS)}",
        )
    for cells in reader:
        where = f"line {reader.line_num}"
        if not cells:
            continue  # a blank line
        if len(cells) > len(columns):
            raise PrincipalFileError(source, where, f"has more fields than the {len(columns)} header columns")
        row = dict(zip(columns, [*cells, *[""] * (len(columns) - len(cells))], strict=True))
        roles = [r.strip() for r in (row["roles"] or "").split(";") if r.strip()]
        identities: list[Identity] = []
        if row["slack_user"] or row["slack_team"]:
            identities.append(
                _identity(
                    source,
                    f"{where}.slack_user",
                    "slack",
                    row["slack_team"],
                    row["slack_user"],
                    f"{where}.slack_team",
                )
            )
        if row["teams_aad_object_id"] or row["teams_tenant"]:
            identities.append(
                _identity(
                    source,
                    f"{where}.teams_aad_object_id",
                    "teams",
                    row["teams_tenant"],
                    row["teams_aad_object_id"],
                    f"{where}.teams_tenant",
                )
            )
        if row["login"]:
            identities.append(_identity(source, f"{where}.login", "login", "", row["login"]))
        out.append(
            _principal(
                source, where, row["id"], row["kind"], row["name"], roles, identities, row.get("public_key", "").strip()
            )
        )
    return out


async def upsert_principals(conn: AsyncConnection[Any], principals: list[Principal]) -> int:
    """Insert or refresh principals and their identities in one transaction. A machine never becomes a human."""
    async with conn.transaction(), conn.cursor() as cur:
        for p in principals:
            if not await principal_store.upsert_principal(cur, p):
                raise PrincipalFileError("principals", p.principal_id, "exists with a different kind; refusing")
            await principal_store.replace_identities(cur, p.principal_id, p.identities)
    return len(principals)
