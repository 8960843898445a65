"""`countersign principals keygen NAME`: a person's own Ed25519 key pair, registered by `principals import`."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

from countersign.audit.person_proof import load_private_key, parse_public_key, public_key_raw
from tests.cli.test_cli import cli


async def test_keygen_writes_a_private_key_only_its_owner_reads_and_a_public_key_import_registers(
    database: Any, conn: Any, tmp_path: Path
) -> None:
    out = tmp_path / "keys"
    done = cli(database, tmp_path, "principals", "keygen", "carol.main", "--out", str(out))
    assert done.returncode == 0, done.stderr
    private_path, public_path = out / "carol.main.key", out / "carol.main.pub"
    assert stat.S_IMODE(private_path.stat().st_mode) == 0o600
    public_text = public_path.read_text().strip()
    assert public_text in done.stdout and "principals import" in done.stdout
    raw = parse_public_key(public_text)
    assert public_key_raw(load_private_key(private_path.read_bytes())) == raw

    again = cli(database, tmp_path, "principals", "keygen", "carol.main", "--out", str(out))
    assert again.returncode != 0 and "refusing to overwrite" in again.stderr + again.stdout
    assert public_path.read_text().strip() == public_text  # untouched

    people = tmp_path / "people.yaml"
    people.write_text(
        f"principals:\n  - {{id: carol.main, kind: human, name: Carol, roles: [cfo], public_key: {public_text}}}\n"
    )
    imported = cli(database, tmp_path, "principals", "import", str(people))
    assert imported.returncode == 0, imported.stderr
    row = await (await conn.execute("SELECT public_key FROM principal WHERE principal_id = 'carol.main'")).fetchone()
    assert row is not None and bytes(row[0]) == raw


def test_keygen_refuses_a_name_that_is_not_a_plain_file_name(database: Any, tmp_path: Path) -> None:
    for name in ("../escape", ".hidden", "a/b", ""):
        done = cli(database, tmp_path, "principals", "keygen", name, "--out", str(tmp_path / "keys"))
        assert done.returncode != 0
    assert not (tmp_path / "keys").exists() or not any((tmp_path / "keys").iterdir())


def test_a_bad_public_key_in_the_import_file_is_a_clear_error(database: Any, tmp_path: Path) -> None:
    people = tmp_path / "people.yaml"
    people.write_text("principals:\n  - {id: carol.main, kind: human, name: C, roles: [cfo], public_key: nope}\n")
    done = cli(database, tmp_path, "principals", "import", str(people))
    assert done.returncode != 0
    assert "carol.main" in done.stderr and "public_key" in done.stderr
