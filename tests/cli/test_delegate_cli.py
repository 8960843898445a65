"""`countersign delegate set | list | revoke`: who is away, until when, who stands in; refusals in one line."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

from countersign.bootstrap.settings import PROJECT_ROOT
from tests.cli.test_cli import cli

TODAY = dt.datetime.now(dt.UTC).date()
LAST = TODAY + dt.timedelta(days=7)


def _people(database: Any, tmp_path: Path) -> None:
    done = cli(database, tmp_path, "principals", "import", str(PROJECT_ROOT / "config" / "principals.yaml"))
    assert done.returncode == 0, done.stderr


def _set(database: Any, tmp_path: Path, *extra: str, first: dt.date = TODAY, last: dt.date = LAST) -> Any:
    return cli(
        database,
        tmp_path,
        "delegate",
        "set",
        "--from",
        "alice.chen",
        "--to",
        "bob.osei",
        "--from-date",
        first.isoformat(),
        "--until",
        last.isoformat(),
        "--reason",
        "annual leave",
        *extra,
    )


def test_a_person_sets_lists_and_revokes_their_delegation(database: Any, tmp_path: Path) -> None:
    _people(database, tmp_path)
    done = _set(database, tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"Alice Chen (Financial Controller) is away from {TODAY.day} {TODAY.strftime('%b %Y')}" in done.stdout
    assert f"until {LAST.day} {LAST.strftime('%b %Y')}" in done.stdout

    listed = cli(database, tmp_path, "delegate", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    [row] = json.loads(listed.stdout)
    assert (row["principal"], row["delegate"], row["set_by"], row["revoked"]) == (
        "alice.chen",
        "bob.osei",
        "alice.chen",
        False,
    )
    assert (row["first_day"], row["last_day"]) == (TODAY.isoformat(), LAST.isoformat())

    revoked = cli(
        database, tmp_path, "delegate", "revoke", str(row["delegation_id"]), "--by", "alice.chen", "--reason", "back"
    )
    assert revoked.returncode == 0, revoked.stderr
    [after] = json.loads(cli(database, tmp_path, "delegate", "list", "--json").stdout)
    assert after["revoked"] is True and after["revoked_by"] == "alice.chen"
    table = cli(database, tmp_path, "delegate", "list")
    assert "revoked by alice.chen" in table.stdout


def test_refusals_name_what_was_wrong(database: Any, tmp_path: Path) -> None:
    _people(database, tmp_path)
    by_nobody = _set(database, tmp_path, "--by", "dana.reyes")
    assert by_nobody.returncode == 2
    assert "dana.reyes is neither alice.chen nor an owner" in by_nobody.stderr
    back_dated = _set(database, tmp_path, first=TODAY - dt.timedelta(days=2))
    assert back_dated.returncode == 2 and "never back-dated" in back_dated.stderr
    backwards = _set(database, tmp_path, first=LAST, last=TODAY)
    assert backwards.returncode == 2 and "is before --from-date" in backwards.stderr
    not_a_date = cli(
        database, tmp_path, "delegate", "set", "--from", "alice.chen", "--to", "bob.osei", "--from-date", "14/12",
        "--until", LAST.isoformat(), "--reason", "x",
    )  # fmt: skip
    assert not_a_date.returncode == 2 and "--from-date '14/12' is not a date" in not_a_date.stderr
    self_appointed = cli(
        database, tmp_path, "delegate", "set", "--from", "carol.main", "--to", "alice.chen", "--from-date",
        TODAY.isoformat(), "--until", LAST.isoformat(), "--reason", "x", "--by", "alice.chen",
    )  # fmt: skip
    assert self_appointed.returncode == 2 and "may not make themselves the delegate" in self_appointed.stderr
    assert json.loads(cli(database, tmp_path, "delegate", "list", "--json").stdout) == []


def test_an_owner_sets_a_delegation_for_someone_else(database: Any, tmp_path: Path) -> None:
    _people(database, tmp_path)
    done = cli(
        database, tmp_path, "delegate", "set", "--from", "carol.main", "--to", "bob.osei", "--from-date",
        TODAY.isoformat(), "--until", LAST.isoformat(), "--reason", "parental leave", "--by", "alice.chen", "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["set_by"] == "alice.chen"
