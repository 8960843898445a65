"""Every setting is validated in one place at start: one line per wrong or missing value, naming its variable."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from countersign.bootstrap.settings import (
    Settings,
    SettingsError,
    describe,
    dsn_without_password,
    load_settings,
    redact,
)

SLACK = {"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_SIGNING_SECRET": "s"}
TEAMS = {"TEAMS_APP_ID": "app-1", "TEAMS_APP_PASSWORD": "pw"}


@pytest.mark.parametrize(
    ("environment", "line"),
    [
        ({"COUNTERSIGN_OPENAPI": "maybe"}, "COUNTERSIGN_OPENAPI: not a boolean: use 1/0, true/false, yes/no ('maybe')"),
        ({"DATABASE_URL": "mysql://u:p@h/d"}, "DATABASE_URL: not a postgresql:// URL (scheme 'mysql')"),
        ({"COUNTERSIGN_ENGINE_DATABASE_URL": "localhost"}, "COUNTERSIGN_ENGINE_DATABASE_URL: not a postgresql:// URL"),
        ({"COUNTERSIGN_SPECIALISTS_URL": "ftp://x"}, "COUNTERSIGN_SPECIALISTS_URL: not an http(s):// URL"),
        ({"TEAMS_OPENID_METADATA_URL": "example.com"}, "TEAMS_OPENID_METADATA_URL: not an http(s):// URL (no scheme)"),
        ({"COUNTERSIGN_OUTBOX_BUDGET_HOURS": "0"}, "COUNTERSIGN_OUTBOX_BUDGET_HOURS: must be above 0 ('0')"),
        ({"COUNTERSIGN_OUTBOX_BUDGET_HOURS": "-2"}, "COUNTERSIGN_OUTBOX_BUDGET_HOURS: must be above 0 ('-2')"),
        (
            {"COUNTERSIGN_OUTBOX_BUDGET_HOURS": "inf"},
            "COUNTERSIGN_OUTBOX_BUDGET_HOURS: must be a finite number ('inf')",
        ),
        ({"COUNTERSIGN_OUTBOX_BUDGET_HOURS": "a day"}, "COUNTERSIGN_OUTBOX_BUDGET_HOURS: not a number ('a day')"),
        ({"COUNTERSIGN_LOG_FORMAT": "xml"}, "COUNTERSIGN_LOG_FORMAT: must be 'text' or 'json' ('xml')"),
        ({"TEAMS_APP_TYPE": "multitenant", **TEAMS}, "TEAMS_APP_TYPE: must be 'MultiTenant', 'SingleTenant' or"),
        ({"SLACK_BOT_TOKEN": "xoxb-1"}, "SLACK_SIGNING_SECRET: missing (SLACK_BOT_TOKEN is set"),
        ({"SLACK_SIGNING_SECRET": "s"}, "SLACK_BOT_TOKEN: missing (SLACK_SIGNING_SECRET is set)"),
        ({"TEAMS_APP_PASSWORD": "pw"}, "TEAMS_APP_ID: missing"),
        ({"TEAMS_APP_ID": "app-1"}, "TEAMS_APP_PASSWORD: missing (TEAMS_APP_TYPE=MultiTenant)"),
        ({"TEAMS_APP_TYPE": "SingleTenant", **TEAMS}, "TEAMS_APP_TENANT_ID: missing (required for TEAMS_APP_TYPE=Sin"),
        ({"TEAMS_APP_TYPE": "UserAssignedMSI", "TEAMS_APP_ID": "a"}, "TEAMS_APP_TENANT_ID: missing (required for"),
        (
            {"TEAMS_APP_TYPE": "UserAssignedMSI", "TEAMS_APP_TENANT_ID": "t", **TEAMS},
            "TEAMS_APP_PASSWORD: must be unset for TEAMS_APP_TYPE=UserAssignedMSI",
        ),
    ],
)
def test_a_wrong_or_missing_setting_is_one_line_naming_its_variable(environment: dict[str, str], line: str) -> None:
    with pytest.raises(SettingsError) as raised:
        load_settings(environment)
    (only,) = raised.value.lines
    assert only.startswith(line) and "\n" not in only


def test_a_secret_that_does_not_validate_is_not_echoed() -> None:
    with pytest.raises(SettingsError) as raised:
        load_settings({"DATABASE_URL": "mysql://root:hunter2@db/x"})
    assert "hunter2" not in str(raised.value)


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(SettingsError) as raised:
        load_settings({"COUNTERSIGN_OPENAPI": "maybe", "DATABASE_URL": "nope"})
    assert [line.split(":")[0] for line in raised.value.lines] == ["DATABASE_URL", "COUNTERSIGN_OPENAPI"]


def test_valid_settings_are_typed() -> None:
    settings = load_settings(
        {
            **SLACK,
            "COUNTERSIGN_SLACK_TEAM_IDS": " T1, ,T2 ",
            "COUNTERSIGN_OPENAPI": "yes",
            "COUNTERSIGN_STATE_DIR": "/srv/state",
            "TEAMS_APP_TYPE": "SingleTenant",
            "TEAMS_APP_TENANT_ID": "tenant-1",
            "COUNTERSIGN_SLACK_CHANNEL": "",  # empty means unset, as before
            **TEAMS,
        }
    )
    assert settings.slack_team_ids == ("T1", "T2") and settings.openapi is True
    assert str(settings.state_dir) == "/srv/state" and settings.teams_app_type == "SingleTenant"
    assert settings.slack_enabled and settings.teams_enabled and settings.slack_channel is None
    assert load_settings({}).outbox_budget_hours == 24.0
    assert load_settings({"COUNTERSIGN_OUTBOX_BUDGET_HOURS": "0.5"}).outbox_budget_hours == 0.5


def test_constructing_settings_reads_no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-from-the-environment")
    settings = Settings(database_url=None, state_dir="s", config_dir="c", callback_secret="x")  # type: ignore[arg-type]
    assert settings.slack_bot_token is None
    assert load_settings({}).slack_bot_token is None
    monkeypatch.setenv("SLACK_SIGNING_SECRET", "s")
    assert load_settings().slack_bot_token == "xoxb-from-the-environment"


def test_secrets_stay_out_of_the_repr() -> None:
    settings = load_settings({**SLACK, "SLACK_BOT_TOKEN": "xoxb-very-secret-token"})
    assert "xoxb-very-secret-token" not in repr(settings)


def test_describe_redacts_secrets_and_names_the_source() -> None:
    rows = {
        name: (value, source)
        for name, value, source in describe(
            {
                "SLACK_BOT_TOKEN": "xoxb-0123456789-abcdefWXYZ",
                "COUNTERSIGN_CALLBACK_SECRET": "short",
                "DATABASE_URL": "postgresql://owner:hunter2@db.internal:6543/close",
                "COUNTERSIGN_SLACK_CHANNEL": "C0CLOSE",
            }
        )
    }
    assert rows["SLACK_BOT_TOKEN"] == ("***WXYZ", "env")
    assert rows["COUNTERSIGN_CALLBACK_SECRET"] == ("***", "env")
    assert rows["DATABASE_URL"] == ("postgresql://owner:***@db.internal:6543/close", "env")
    assert rows["COUNTERSIGN_SLACK_CHANNEL"] == ("C0CLOSE", "env")
    assert rows["SLACK_SIGNING_SECRET"] == ("unset", "default")
    assert rows["TEAMS_APP_TYPE"] == ("MultiTenant", "default")


def test_redaction_never_shows_more_than_four_characters() -> None:
    assert redact("0123456789abcdef") == "***cdef" and redact("0123456789abcde") == "***"
    assert dsn_without_password("postgresql://u@h/d") == "postgresql://u@h/d"


@pytest.mark.parametrize(
    ("url", "line"),
    [
        ("postgresql://u:hunter2@localhost:abc/db", "DATABASE_URL: the port after the host must be a number from 1 to"),
        ("postgresql://u:hunter2@localhost:65536/db", "DATABASE_URL: the port after the host must be a number from 1"),
        ("postgresql://u:hunter2@localhost:0/db", "DATABASE_URL: the port after the host must be a number from 1 to"),
        ("postgresql://u:hunter2@h1:5432,h2:x/db", "DATABASE_URL: the port after the host must be a number from 1 to"),
        ("postgresql://u:hunter2@/db", "DATABASE_URL: no host (want postgresql://user:password@host:port/database"),
        ("postgresql://u:hunter2@:5432/db", "DATABASE_URL: no host (want postgresql://user:password@host:port/"),
        ("postgresql://u:hunter2@[::1/db", "DATABASE_URL: not a valid URL (want postgresql://user:password@host"),
        ("postgresql://u:hunter2@bad host/db", "DATABASE_URL: not a valid PostgreSQL URL: invalid domain character"),
        ("postgresql://u:hunter2/db", "DATABASE_URL: the port after the host must be a number"),  # `@host` forgotten
        ("mysql://u:hunter2@h/db", "DATABASE_URL: not a postgresql:// URL (scheme 'mysql')"),
        ("postgresql+psycopg://u:hunter2@h/db", "DATABASE_URL: not a postgresql:// URL (scheme 'postgresql+psycopg')"),
    ],
)
def test_a_database_url_that_cannot_connect_is_one_line_without_its_password(url: str, line: str) -> None:
    for name in ("DATABASE_URL", "COUNTERSIGN_ENGINE_DATABASE_URL", "COUNTERSIGN_CALLBACKS_DATABASE_URL"):
        with pytest.raises(SettingsError) as raised:
            load_settings({name: url})
        (only,) = raised.value.lines
        assert only.startswith(line.replace("DATABASE_URL", name, 1)) and "\n" not in only, only
        assert "hunter2" not in only
        (shown,) = [value for variable_name, value, _ in describe({name: url}) if variable_name == name]
        assert "hunter2" not in shown, shown


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://owner:pw@db.internal:6543/close?sslmode=require",
        "postgres://owner@db/close",
        "postgresql://postgres:@/postgres?host=/run/pg",  # the embedded server's Unix-socket form
        "postgresql://owner@db1:5432,db2:5433/close",  # libpq's multi-host form
        "postgresql://owner:p%40ss@[::1]:5432/close",
    ],
)
def test_database_urls_libpq_accepts_are_valid(url: str) -> None:
    assert load_settings({"DATABASE_URL": url}).database_url == url  # kept as given, not normalised


@pytest.mark.parametrize(
    ("environment", "line"),
    [
        (
            {"COUNTERSIGN_SPECIALISTS_URL": "http://h:abc"},
            "COUNTERSIGN_SPECIALISTS_URL: not a valid http(s) URL: inval",
        ),
        (
            {"COUNTERSIGN_MODEL_BASE_URL": "http://:80/v1"},
            "COUNTERSIGN_MODEL_BASE_URL: not a valid http(s) URL: empty h",
        ),
        ({"SLACK_API_URL": "http://h:0/api/"}, "SLACK_API_URL: not a valid http(s) URL: port 0"),
        (
            {"COUNTERSIGN_BOARD_URL": "http://localhost:99999"},
            "COUNTERSIGN_BOARD_URL: not a valid http(s) URL: invalid",
        ),
    ],
)
def test_an_http_url_with_a_bad_port_or_no_host_is_one_line(environment: dict[str, str], line: str) -> None:
    with pytest.raises(SettingsError) as raised:
        load_settings(environment)
    (only,) = raised.value.lines
    assert only.startswith(line), only


def test_a_state_dir_that_cannot_be_written_is_one_line(tmp_path: Path) -> None:
    afile = tmp_path / "a-file"
    afile.write_text("")
    refused = {
        afile / "state": f"COUNTERSIGN_STATE_DIR: {afile / 'state'} cannot be created: {afile} is a file, not a dir",
        afile: f"COUNTERSIGN_STATE_DIR: {afile} is not a directory (want a writable directory, or one that can be",
    }
    for path, line in refused.items():
        with pytest.raises(SettingsError) as raised:
            load_settings({"COUNTERSIGN_STATE_DIR": str(path)})
        (only,) = raised.value.lines
        assert only.startswith(line), only
    fresh = tmp_path / "new" / "state"
    assert load_settings({"COUNTERSIGN_STATE_DIR": str(fresh)}).state_dir == fresh
    assert not (tmp_path / "new").exists(), "checking a state dir must not create it"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only directory")
def test_a_read_only_state_dir_is_one_line(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    try:
        for path in (locked, locked / "state"):
            with pytest.raises(SettingsError) as raised:
                load_settings({"COUNTERSIGN_STATE_DIR": str(path)})
            (only,) = raised.value.lines
            assert only.startswith(f"COUNTERSIGN_STATE_DIR: {path} ") and "not writable by this user" in only, only
    finally:
        locked.chmod(0o700)


def test_config_cassette_and_xsd_paths_must_be_there(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    refused = {
        "COUNTERSIGN_CONFIG_DIR": f"COUNTERSIGN_CONFIG_DIR: {missing} is not a directory (want the folder holding risk",
        "COUNTERSIGN_CASSETTE_DIR": f"COUNTERSIGN_CASSETTE_DIR: {missing} is not a directory of recorded responses",
        "COUNTERSIGN_CAMT053_XSD": f"COUNTERSIGN_CAMT053_XSD: {missing} does not exist (want the camt.053 XSD file",
    }
    for name, line in refused.items():
        with pytest.raises(SettingsError) as raised:
            load_settings({name: str(missing)})
        (only,) = raised.value.lines
        assert only.startswith(line), only
    with pytest.raises(SettingsError) as raised:
        load_settings({"COUNTERSIGN_CONFIG_DIR": str(tmp_path)})
    assert raised.value.lines == [
        f"COUNTERSIGN_CONFIG_DIR: {tmp_path} has no risk.yaml (want the folder holding risk.yaml)"
    ]
    # Recording creates its cassette folder: a creatable one is fine then.
    recording = {"COUNTERSIGN_MODEL_PROVIDER": "record", "COUNTERSIGN_MODEL_BASE_URL": "http://localhost:1/v1"}
    assert load_settings({**recording, "COUNTERSIGN_CASSETTE_DIR": str(missing)}).cassette_dir == missing
