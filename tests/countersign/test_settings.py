"""Every setting is validated in one place at start: one line per wrong or missing value, naming its variable."""

from __future__ import annotations

import pytest

from countersign.settings import Settings, SettingsError, describe, dsn_without_password, load_settings, redact

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
