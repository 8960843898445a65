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
    )
