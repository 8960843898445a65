"""The principal directory: YAML and CSV import, channel identities, normalisation before comparison."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from countersign.bootstrap.settings import PROJECT_ROOT
from countersign.callbacks.principals import (
    PrincipalFileError,
    find_principal,
    normalise_identity,
    parse_principals,
    resolve_identity,
    upsert_principals,
)

YAML = """
principals:
  - id: Alice.Chen
    kind: human
    name: Alice Chen
    roles: [controller]
    identities:
      slack: {team: T01ACME, user: U0ALICE}
      teams: {tenant: 72f988bf-tenant, aad_object_id: 00000000-0000-0000-0000-00000000a11c}
      login: alice@acme.example
  - id: countersign-bot
    kind: machine
    name: Countersign chat bot
    roles: []
    identities:
      slack: {team: T01ACME, user: UBOT}
"""

CSV = (
    "id,kind,name,roles,slack_team,slack_user,teams_tenant,teams_aad_object_id,login\n"
    "bob.osei,human,Bob Osei,cfo;controller,T01ACME,U0BOB,72f988bf-tenant,0000-b0b,bob@acme.example\n"
    "carol.main,human,Carol Main,cfo,,,,,\n"
)


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


async def test_yaml_and_csv_imports_resolve_every_channel(conn: Any, tmp_path: Path) -> None:
    await upsert_principals(conn, parse_principals(_write(tmp_path, "p.yaml", YAML)))
    await upsert_principals(conn, parse_principals(_write(tmp_path, "p.csv", CSV)))
    assert (await resolve_identity(conn, "slack", "U0ALICE", "T01ACME")).principal_id == "alice.chen"  # type: ignore[union-attr]
    assert (await resolve_identity(conn, "teams", "0000-B0B", "72F988BF-tenant")).principal_id == "bob.osei"  # type: ignore[union-attr]
    assert (await find_principal(conn, "ALICE@acme.example")).principal_id == "alice.chen"  # type: ignore[union-attr]
    bot = await resolve_identity(conn, "slack", "UBOT", "T01ACME")
    assert bot is not None and not bot.is_human
    assert await resolve_identity(conn, "slack", "U0ALICE", "T99OTHER") is None  # same user id, other workspace
    carol = await find_principal(conn, "carol.main")
    assert carol is not None and carol.roles == ("cfo",)


async def test_a_machine_cannot_be_reimported_as_a_human(conn: Any, tmp_path: Path) -> None:
    path = _write(tmp_path, "p.yaml", "principals:\n  - {id: Orchestrator, kind: human, name: Sneaky, roles: [cfo]}\n")
    with pytest.raises(PrincipalFileError, match="different kind"):
        await upsert_principals(conn, parse_principals(path))
    orchestrator = await find_principal(conn, "orchestrator")
    assert orchestrator is not None and orchestrator.kind == "machine" and orchestrator.roles == ()


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("principals: {}\n", "principals"),
        ("principals:\n  - {kind: human, name: X, roles: []}\n", "principals[0].id"),
        ("principals:\n  - {id: x, kind: robot, name: X, roles: []}\n", "principals[0].kind"),
        ("principals:\n  - {id: x, kind: human, name: X, roles: controller}\n", "principals[0].roles"),
        ("principals:\n  - {id: x, kind: human, name: X, roles: [], colour: red}\n", "principals[0].colour"),
        (
            "principals:\n  - {id: x, kind: human, name: X, roles: [], identities: {slack: {user: U1}}}\n",
            "principals[0].identities.slack.team",
        ),
        ("principals:\n  - {id: x, kind: machine, name: X, roles: [cfo]}\n", "principals[0].roles"),
    ],
)
def test_malformed_yaml_names_the_field(tmp_path: Path, text: str, field: str) -> None:
    with pytest.raises(PrincipalFileError) as failure:
        parse_principals(_write(tmp_path, "p.yaml", text))
    assert failure.value.field == field and failure.value.source == "p.yaml"


def test_malformed_csv_names_the_line(tmp_path: Path) -> None:
    bad = CSV.replace("carol.main,human", "carol.main,alien")
    with pytest.raises(PrincipalFileError) as failure:
        parse_principals(_write(tmp_path, "p.csv", bad))
    assert failure.value.field == "line 3.kind"


def test_two_principals_cannot_share_an_identity(tmp_path: Path) -> None:
    text = YAML.replace("user: UBOT", "user: U0ALICE")
    with pytest.raises(PrincipalFileError, match="also belongs to"):
        parse_principals(_write(tmp_path, "p.yaml", text))


def test_the_shipped_principals_file_loads() -> None:
    people = parse_principals(PROJECT_ROOT / "config" / "principals.yaml")
    assert {p.principal_id for p in people} >= {"alice.chen", "bob.osei", "carol.main", "dana.reyes"}


VARIANTS = [
    "orchestrator",
    "Orchestrator",
    " orchestrator",
    "orchestrator\u200b",
    "ｏｒｃｈｅｓｔｒａｔｏｒ",
    "ORCHESTRATOR",
    "\u00a0orchestrator",
    "orchestrator\u3000",
    "or\u00adchestrator",
    "\ufefforchestrator",
    "ORCHE\u200dSTRATOR",
    "orchestrator\t",
    "\norchestrator",
    "orc\u2060hestrator",
    "Ｏrchestrator",
    "orchestrato\u0280".replace("\u0280", "r"),
    "orchestrator\u180e",
    "o\u200crchestrator",
    "orchestrator\u200e",
    "or chestrator",
    "ＯＲＣＨＥＳＴＲＡＴＯＲ",
]


@pytest.mark.parametrize("variant", VARIANTS)
def test_identity_variants_normalise_to_one_id(variant: str) -> None:
    assert normalise_identity(variant) == "orchestrator"


@given(st.text(alphabet=st.characters(categories=["Ll", "Lu", "Nd"]), min_size=1, max_size=12))
def test_normalisation_is_idempotent(text: str) -> None:
    once = normalise_identity(text)
    assert normalise_identity(once) == once


# --- person keys (issue 9) -----------------------------------------------------------------------------------

KEY_A = base64.b64encode(bytes(range(32))).decode()
KEY_B = base64.b64encode(bytes(range(1, 33))).decode()


async def test_yaml_and_csv_register_each_persons_public_key(conn: Any, tmp_path: Path) -> None:
    yaml_text = f"principals:\n  - {{id: Alice.Chen, kind: human, name: A, roles: [controller], public_key: {KEY_A}}}\n"
    csv_text = CSV.replace(",login\n", ",login,public_key\n", 1).replace(
        "bob@acme.example\n", f"bob@acme.example,{KEY_B}\n"
    )
    await upsert_principals(conn, parse_principals(_write(tmp_path, "p.yaml", yaml_text)))
    await upsert_principals(conn, parse_principals(_write(tmp_path, "p.csv", csv_text)))
    rows = dict(
        await (
            await conn.execute("SELECT principal_id, public_key FROM principal WHERE public_key IS NOT NULL")
        ).fetchall()
    )
    assert rows == {"alice.chen": bytes(range(32)), "bob.osei": bytes(range(1, 33))}
    # A later import without a key leaves the registered key in place; a new key replaces it.
    await upsert_principals(
        conn, parse_principals(_write(tmp_path, "p2.yaml", yaml_text.replace(f", public_key: {KEY_A}", "")))
    )
    await upsert_principals(conn, parse_principals(_write(tmp_path, "p3.csv", CSV)))
    after = dict(
        await (
            await conn.execute("SELECT principal_id, public_key FROM principal WHERE public_key IS NOT NULL")
        ).fetchall()
    )
    assert after == rows


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        ("not base64!!", "base64"),
        (base64.b64encode(b"\x01" * 31).decode(), "31 bytes"),
        ("", None),  # an empty key is no key
        ("[1, 2]", "base64"),
    ],
)
def test_a_bad_public_key_names_the_person_and_field(tmp_path: Path, key: str, problem: str | None) -> None:
    text = f"principals:\n  - {{id: carol.main, kind: human, name: C, roles: [cfo], public_key: '{key}'}}\n"
    path = _write(tmp_path, "p.yaml", text)
    if problem is None:
        assert parse_principals(path)[0].public_key is None
        return
    with pytest.raises(PrincipalFileError) as failure:
        parse_principals(path)
    assert failure.value.field == "principals[0].public_key (carol.main)" and problem in failure.value.reason


def test_a_bad_public_key_in_csv_names_the_line_and_person(tmp_path: Path) -> None:
    csv_text = CSV.replace(",login\n", ",login,public_key\n", 1).replace(
        "carol.main,human,Carol Main,cfo,,,,,\n", "carol.main,human,Carol Main,cfo,,,,,,AAAA\n"
    )
    with pytest.raises(PrincipalFileError) as failure:
        parse_principals(_write(tmp_path, "p.csv", csv_text))
    assert failure.value.field == "line 3.public_key (carol.main)" and "3 bytes" in failure.value.reason


def test_a_csv_header_with_an_unknown_extra_column_is_refused(tmp_path: Path) -> None:
    csv_text = CSV.replace(",login\n", ",login,colour\n", 1)
    with pytest.raises(PrincipalFileError) as failure:
        parse_principals(_write(tmp_path, "p.csv", csv_text))
    assert failure.value.field == "(header)"


def test_a_non_string_key_and_a_machine_key_are_refused(tmp_path: Path) -> None:
    numeric = "principals:\n  - {id: carol.main, kind: human, name: C, roles: [cfo], public_key: 12}\n"
    machine = f"principals:\n  - {{id: countersign-bot, kind: machine, name: B, roles: [], public_key: {KEY_A}}}\n"
    with pytest.raises(PrincipalFileError, match="must be base64 text"):
        parse_principals(_write(tmp_path, "n.yaml", numeric))
    with pytest.raises(PrincipalFileError, match="only human principals"):
        parse_principals(_write(tmp_path, "m.yaml", machine))
