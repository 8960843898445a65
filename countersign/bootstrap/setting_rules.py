"""Rules across settings: variables that only make sense together, and paths checked where they are.

`load_settings()` runs both after the fields validate; each problem is one line naming its variable. The rules read
the settings through `RuledSettings`, the fields they look at, and name variables through the `variable` they are
given, so this module imports nothing of countersign/bootstrap/settings.py (which imports it).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from countersign.bootstrap.setting_values import is_dir, is_file, writable_directory_problem


class RuledSettings(Protocol):
    """The settings the rules read (`countersign.bootstrap.settings.Settings` has them; mypy checks it does)."""

    @property
    def engine_db_password(self) -> str | None: ...
    @property
    def engine_db_password_file(self) -> Path | None: ...
    @property
    def callbacks_db_password(self) -> str | None: ...
    @property
    def callbacks_db_password_file(self) -> Path | None: ...
    @property
    def model_provider(self) -> str: ...
    @property
    def model_base_url(self) -> str | None: ...
    @property
    def slack_bot_token(self) -> str | None: ...
    @property
    def slack_signing_secret(self) -> str | None: ...
    @property
    def teams_enabled(self) -> bool: ...
    @property
    def teams_app_id(self) -> str | None: ...
    @property
    def teams_app_password(self) -> str | None: ...
    @property
    def teams_app_type(self) -> str: ...
    @property
    def teams_app_tenant_id(self) -> str | None: ...
    @property
    def state_dir(self) -> Path: ...
    @property
    def config_dir(self) -> Path: ...
    @property
    def cassette_dir(self) -> Path | None: ...
    @property
    def camt053_xsd(self) -> Path | None: ...


def companion_problems(settings: RuledSettings, variable: Callable[[str], str]) -> list[str]:
    """Variables that only make sense together: one line per one that is missing. `variable` names a field's
    environment variable."""
    problems = []
    for role in ("engine", "callbacks"):
        if getattr(settings, f"{role}_db_password") and getattr(settings, f"{role}_db_password_file"):
            problems.append(
                f"{variable(f'{role}_db_password_file')}: set together with {variable(f'{role}_db_password')}; "
                "give one of them"
            )
    if settings.model_provider in ("openai", "record") and not settings.model_base_url:
        problems.append(
            f"COUNTERSIGN_MODEL_BASE_URL: missing (COUNTERSIGN_MODEL_PROVIDER={settings.model_provider} "
            "calls a model API)"
        )
    if settings.slack_bot_token and not settings.slack_signing_secret:
        problems.append("SLACK_SIGNING_SECRET: missing (SLACK_BOT_TOKEN is set; Slack requests could not be verified)")
    if settings.slack_signing_secret and not settings.slack_bot_token:
        problems.append("SLACK_BOT_TOKEN: missing (SLACK_SIGNING_SECRET is set)")
    if settings.teams_enabled:
        if not settings.teams_app_id:
            problems.append("TEAMS_APP_ID: missing (Teams is configured; the Bot Framework would skip authentication)")
        if settings.teams_app_type == "UserAssignedMSI":
            if settings.teams_app_password:
                problems.append("TEAMS_APP_PASSWORD: must be unset for TEAMS_APP_TYPE=UserAssignedMSI (no secret)")
        elif not settings.teams_app_password:
            problems.append(f"TEAMS_APP_PASSWORD: missing (TEAMS_APP_TYPE={settings.teams_app_type})")
        if settings.teams_app_type != "MultiTenant" and not settings.teams_app_tenant_id:
            problems.append(f"TEAMS_APP_TENANT_ID: missing (required for TEAMS_APP_TYPE={settings.teams_app_type})")
    return problems


def path_problems(settings: RuledSettings, variable: Callable[[str], str]) -> list[str]:
    """Paths the process will read or write, checked where they are: one line per one that cannot serve.

    Checked by load_settings(), not by the fields, so tests may construct Settings(...) with paths that do not exist.
    Nothing is created here; a state directory that does not exist yet must be creatable.
    """
    problems = []
    state = writable_directory_problem(settings.state_dir)
    if state:
        problems.append(f"{variable('state_dir')}: {state} (want a writable directory, or one that can be created)")
    config = settings.config_dir
    if not is_dir(config):
        problems.append(f"{variable('config_dir')}: {config} is not a directory (want the folder holding risk.yaml)")
    elif not is_file(config / "risk.yaml"):
        problems.append(f"{variable('config_dir')}: {config} has no risk.yaml (want the folder holding risk.yaml)")
    if settings.cassette_dir is not None:
        if settings.model_provider == "record":
            cassettes = writable_directory_problem(settings.cassette_dir)
            if cassettes:
                problems.append(f"{variable('cassette_dir')}: {cassettes} (recording writes the responses there)")
        elif not is_dir(settings.cassette_dir):
            problems.append(
                f"{variable('cassette_dir')}: {settings.cassette_dir} is not a directory of recorded responses"
            )
    xsd = settings.camt053_xsd
    if xsd is not None and not (is_file(xsd) or is_dir(xsd)):
        problems.append(f"{variable('camt053_xsd')}: {xsd} does not exist (want the camt.053 XSD file or its folder)")
    return problems
