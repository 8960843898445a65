"""Settings read from the environment, once, at the edge of the process."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Settings:
    database_url: str | None
    state_dir: Path
    config_dir: Path
    callback_secret: str | None
    specialists_url: str | None = None
    engine_database_url: str | None = None
    callbacks_database_url: str | None = None
    slack_bot_token: str | None = None
    slack_signing_secret: str | None = None
    slack_api_url: str | None = None
    slack_channel: str | None = None
    teams_app_id: str | None = None
    teams_app_password: str | None = None
    teams_openid_metadata_url: str | None = None
    teams_service_url: str | None = None
    teams_conversation: str | None = None
    teams_token_url: str | None = None
    trace_signing_key: str | None = None
    trace_origin: str = "countersign.local/close-trace"
    specialist_token: str | None = None  # COUNTERSIGN_SPECIALIST_TOKEN: bearer token for the specialists' A2A calls
    slack_team_ids: tuple[str, ...] = ()  # COUNTERSIGN_SLACK_TEAM_IDS: the only Slack workspaces served
    teams_tenant_ids: tuple[str, ...] = ()  # COUNTERSIGN_TEAMS_TENANT_IDS: the only Teams tenants served
    openapi: bool = False  # COUNTERSIGN_OPENAPI=1 serves /docs, /redoc and /openapi.json

    @property
    def slack_enabled(self) -> bool:
        return bool(self.slack_bot_token or self.slack_signing_secret)

    @property
    def teams_enabled(self) -> bool:
        return self.teams_app_id is not None or bool(self.teams_app_password)

    @property
    def risk_path(self) -> Path:
        return self.config_dir / "risk.yaml"

    @property
    def checklist_path(self) -> Path:
        return self.config_dir / "checklist.yaml"

    @property
    def principals_path(self) -> Path:
        return self.config_dir / "principals.yaml"

    def profile_path(self, name: str) -> Path:
        return self.config_dir / "profiles" / f"{name}.yaml"


def id_list(raw: str | None) -> tuple[str, ...]:
    """A comma-separated list of ids; blanks dropped."""
    return tuple(part.strip() for part in (raw or "").split(",") if part.strip())


def load_settings(env: Mapping[str, str] | None = None) -> Settings:
    env = os.environ if env is None else env
    return Settings(
        database_url=env.get("DATABASE_URL") or None,
        state_dir=Path(env.get("COUNTERSIGN_STATE_DIR") or PROJECT_ROOT / ".countersign"),
        config_dir=Path(env.get("COUNTERSIGN_CONFIG_DIR") or PROJECT_ROOT / "config"),
        callback_secret=env.get("COUNTERSIGN_CALLBACK_SECRET") or None,
        specialists_url=env.get("COUNTERSIGN_SPECIALISTS_URL") or None,
        engine_database_url=env.get("COUNTERSIGN_ENGINE_DATABASE_URL") or None,
        callbacks_database_url=env.get("COUNTERSIGN_CALLBACKS_DATABASE_URL") or None,
        slack_bot_token=env.get("SLACK_BOT_TOKEN") or None,
        slack_signing_secret=env.get("SLACK_SIGNING_SECRET") or None,
        slack_api_url=env.get("SLACK_API_URL") or None,
        slack_channel=env.get("COUNTERSIGN_SLACK_CHANNEL") or None,
        teams_app_id=env.get("TEAMS_APP_ID"),
        teams_app_password=env.get("TEAMS_APP_PASSWORD") or None,
        teams_openid_metadata_url=env.get("TEAMS_OPENID_METADATA_URL") or None,
        teams_service_url=env.get("COUNTERSIGN_TEAMS_SERVICE_URL") or None,
        teams_conversation=env.get("COUNTERSIGN_TEAMS_CONVERSATION") or None,
        teams_token_url=env.get("TEAMS_TOKEN_URL") or None,
        trace_signing_key=env.get("COUNTERSIGN_TRACE_SIGNING_KEY") or None,
        trace_origin=env.get("COUNTERSIGN_TRACE_ORIGIN") or "countersign.local/close-trace",
        specialist_token=env.get("COUNTERSIGN_SPECIALIST_TOKEN") or None,
        slack_team_ids=id_list(env.get("COUNTERSIGN_SLACK_TEAM_IDS")),
        teams_tenant_ids=id_list(env.get("COUNTERSIGN_TEAMS_TENANT_IDS")),
        openapi=(env.get("COUNTERSIGN_OPENAPI") or "").strip().lower() in ("1", "true", "yes"),
    )
