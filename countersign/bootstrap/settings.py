"""Settings read from the environment, once, at the edge of the process.

Every environment variable Countersign reads is a field here, named by its `validation_alias`. `load_settings()`
validates them all at start; a wrong value or a missing companion becomes one line naming the variable
(`SettingsError.lines`), which the CLI prints before exiting 2. Constructing `Settings(...)` directly (tests) reads
no environment at all.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, ValidationError, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, EnvSettingsSource, NoDecode, PydanticBaseSettingsSource, SettingsConfigDict

from countersign.bootstrap.setting_rules import companion_problems, path_problems
from countersign.bootstrap.setting_values import (
    dsn_without_password,
    http_url_problem,
    postgres_url_problem,
    redact,
    scheme_of,
)

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def running_from_checkout(root: Path = PROJECT_ROOT) -> bool:
    """True when the code runs from the source tree (editable install, tests), not from an installed wheel."""
    return (root / "pyproject.toml").is_file() and (root / "config" / "risk.yaml").is_file()


def default_config_dir() -> Path:
    """The checkout's config/, else the copy the wheel ships as countersign._config (ADR 0013)."""
    if running_from_checkout():
        return PROJECT_ROOT / "config"
    shipped = resources.files("countersign").joinpath("_config")
    return shipped if isinstance(shipped, Path) else PROJECT_ROOT / "config"


def default_state_dir() -> Path:
    """.countersign/ in the checkout, else in the user's home (never inside site-packages)."""
    return PROJECT_ROOT / ".countersign" if running_from_checkout() else Path.home() / ".countersign"


# A duration or budget: above zero and finite ("inf" and "nan" parse as floats but are no budget).
PositiveFiniteFloat = Annotated[float, Field(gt=0, allow_inf_nan=False)]

ModelProviderName = Literal["replay", "openai", "record"]
DEFAULT_MODEL_ID = "countersign-narrator-v1"

TeamsAppType = Literal["MultiTenant", "SingleTenant", "UserAssignedMSI"]
TEAMS_APP_TYPES: tuple[str, ...] = ("MultiTenant", "SingleTenant", "UserAssignedMSI")

# The mapping load_settings() reads; empty while tests construct Settings(...) directly.
_ENVIRONMENT: ContextVar[Mapping[str, str] | None] = ContextVar("countersign_settings_environment", default=None)


def env(name: str, default: Any = None, *, secret: bool = False, doc: str = "") -> Any:
    """A field read from the environment variable `name`; `secret` values are redacted by `config check`."""
    return Field(default, validation_alias=name, repr=not secret, json_schema_extra={"secret": secret, "doc": doc})


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        frozen=True,
        extra="ignore",
        case_sensitive=True,
        validate_by_name=True,
        validate_by_alias=True,
        env_ignore_empty=True,
    )

    database_url: str | None = env("DATABASE_URL", secret=True, doc="owner role; unset: the embedded PostgreSQL")
    state_dir: Path = env("COUNTERSIGN_STATE_DIR", default_state_dir())
    config_dir: Path = env("COUNTERSIGN_CONFIG_DIR", default_config_dir())
    callback_secret: str | None = env("COUNTERSIGN_CALLBACK_SECRET", secret=True)
    specialists_url: str | None = env("COUNTERSIGN_SPECIALISTS_URL", doc="A2A specialists; unset: in process")
    engine_database_url: str | None = env("COUNTERSIGN_ENGINE_DATABASE_URL", secret=True)
    callbacks_database_url: str | None = env("COUNTERSIGN_CALLBACKS_DATABASE_URL", secret=True)
    engine_db_password: str | None = env(
        "COUNTERSIGN_ENGINE_DB_PASSWORD", secret=True, doc="`db upgrade` sets the engine role's password"
    )
    engine_db_password_file: Path | None = env("COUNTERSIGN_ENGINE_DB_PASSWORD_FILE", doc="the same, from a file")
    callbacks_db_password: str | None = env(
        "COUNTERSIGN_CALLBACKS_DB_PASSWORD", secret=True, doc="`db upgrade` sets the callbacks role's password"
    )
    callbacks_db_password_file: Path | None = env("COUNTERSIGN_CALLBACKS_DB_PASSWORD_FILE", doc="the same, from a file")
    slack_bot_token: str | None = env("SLACK_BOT_TOKEN", secret=True)
    slack_signing_secret: str | None = env("SLACK_SIGNING_SECRET", secret=True)
    slack_api_url: str | None = env("SLACK_API_URL", doc="test override of https://slack.com/api/")
    slack_channel: str | None = env("COUNTERSIGN_SLACK_CHANNEL")
    teams_app_id: str | None = env("TEAMS_APP_ID")
    teams_app_password: str | None = env("TEAMS_APP_PASSWORD", secret=True)
    teams_app_type: TeamsAppType = env("TEAMS_APP_TYPE", "MultiTenant")
    teams_app_tenant_id: str | None = env("TEAMS_APP_TENANT_ID", doc="the bot's home tenant (SingleTenant)")
    teams_openid_metadata_url: str | None = env("TEAMS_OPENID_METADATA_URL")
    teams_service_url: str | None = env("COUNTERSIGN_TEAMS_SERVICE_URL")
    teams_conversation: str | None = env("COUNTERSIGN_TEAMS_CONVERSATION")
    teams_token_url: str | None = env("TEAMS_TOKEN_URL", doc="test override of the token endpoint")
    teams_tenant_openid_metadata_url: str | None = env(
        "TEAMS_TENANT_OPENID_METADATA_URL", doc="test override of the tenant's OpenID metadata (SingleTenant, MSI)"
    )
    trace_signing_key: str | None = env("COUNTERSIGN_TRACE_SIGNING_KEY", secret=True)
    trace_origin: str = env("COUNTERSIGN_TRACE_ORIGIN", "countersign.local/close-trace")
    specialist_token: str | None = env("COUNTERSIGN_SPECIALIST_TOKEN", secret=True, doc="A2A bearer token")
    slack_team_ids: Annotated[tuple[str, ...], NoDecode] = env(
        "COUNTERSIGN_SLACK_TEAM_IDS", (), doc="the only Slack workspaces served, comma-separated"
    )
    teams_tenant_ids: Annotated[tuple[str, ...], NoDecode] = env(
        "COUNTERSIGN_TEAMS_TENANT_IDS", (), doc="the only Teams tenants served, comma-separated"
    )
    model_provider: ModelProviderName = env(
        "COUNTERSIGN_MODEL_PROVIDER", "replay", doc="replay (recorded responses, no network) | openai | record"
    )
    model_base_url: str | None = env("COUNTERSIGN_MODEL_BASE_URL", doc="OpenAI-compatible API, e.g. http://host/v1")
    model_api_key: str | None = env("COUNTERSIGN_MODEL_API_KEY", secret=True, doc="bearer key for the model API")
    model_id: str = env("COUNTERSIGN_MODEL_ID", DEFAULT_MODEL_ID, doc="the model the specialists ask")
    cassette_dir: Path | None = env(
        "COUNTERSIGN_CASSETTE_DIR", doc="recorded model responses; unset: the shipped config/cassettes"
    )
    camt053_xsd: Path | None = env(
        "COUNTERSIGN_CAMT053_XSD",
        doc="the ISO 20022 camt.053 XSD (a file, or a folder of them) statements are validated against on import",
    )
    openapi: bool = env("COUNTERSIGN_OPENAPI", False, doc="1 serves /docs, /redoc and /openapi.json")
    board_url: str = env(
        "COUNTERSIGN_BOARD_URL",
        "http://localhost:8000",
        doc="the Close Board's public base URL: card links, and the passkeys' origin and relying-party id",
    )
    locale: str = env("COUNTERSIGN_LOCALE", "en_GB", doc="how amounts and dates are written (CLDR, e.g. de_CH)")
    log_format: Literal["text", "json"] = env("COUNTERSIGN_LOG_FORMAT", "text", doc="json: one JSON object a line")
    outbox_budget_hours: PositiveFiniteFloat = env(
        "COUNTERSIGN_OUTBOX_BUDGET_HOURS",
        24.0,
        doc="how long the outbox retries a chat message (jittered backoff) before it is dead-lettered",
    )
    worker_concurrency: Annotated[int, Field(ge=1, le=256)] = env(
        "COUNTERSIGN_WORKER_CONCURRENCY", 4, doc="jobs one `countersign worker` process runs at once"
    )
    worker_pool_size: Annotated[int, Field(ge=0, le=1024)] = env(
        "COUNTERSIGN_WORKER_POOL_SIZE",
        0,
        doc="database connections one worker process may hold (0: its concurrency + 3)",
    )
    # Read by the OpenTelemetry SDK itself (countersign/bootstrap/telemetry.py); declared here to be checked and shown.
    otel_exporter_otlp_endpoint: str | None = env("OTEL_EXPORTER_OTLP_ENDPOINT", doc="traces on when set")
    otel_exporter_otlp_traces_endpoint: str | None = env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    otel_service_name: str | None = env("OTEL_SERVICE_NAME")
    otel_traces_exporter: str | None = env("OTEL_TRACES_EXPORTER", doc="none: tracing off")
    otel_sdk_disabled: str | None = env("OTEL_SDK_DISABLED", doc="true: tracing off")

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, _MappingEnvSource(settings_cls))

    @field_validator("slack_team_ids", "teams_tenant_ids", mode="before")
    @classmethod
    def _comma_list(cls, value: Any) -> Any:
        return id_list(value) if isinstance(value, str) else value

    @field_validator("database_url", "engine_database_url", "callbacks_database_url")
    @classmethod
    def _postgres_url(cls, value: str | None) -> str | None:
        if value is not None:
            postgres_url_problem(value)
        return value

    @field_validator("board_url")
    @classmethod
    def _board_origin(cls, value: str) -> str:
        """Passkeys are bound to the board's origin: https, or plain http only on this machine (development)."""
        parts = urlsplit(value)
        if parts.scheme not in ("https", "http") or not parts.hostname:
            raise ValueError(f"not an http(s) URL with a host ({scheme_of(value)})")
        http_url_problem(value)
        if parts.scheme == "http" and parts.hostname != "localhost":
            raise ValueError("must be https (passkeys need a secure origin); http only for localhost")
        if parts.hostname.replace(".", "").isdigit() or ":" in parts.hostname:
            raise ValueError("must name a host, not an IP address (a passkey's relying party is a domain)")
        if parts.path.rstrip("/") or parts.query or parts.fragment:
            raise ValueError("must be the board's origin only (scheme, host, port), without a path")
        return value.rstrip("/")

    @field_validator("locale")
    @classmethod
    def _known_locale(cls, value: str) -> str:
        from countersign.money.formatting import parse_locale

        parse_locale(value)  # UnknownMoneyLocale (a ValueError) names it
        return value

    @field_validator(
        "specialists_url",
        "model_base_url",
        "slack_api_url",
        "teams_openid_metadata_url",
        "teams_service_url",
        "teams_token_url",
        "teams_tenant_openid_metadata_url",
        "otel_exporter_otlp_endpoint",
        "otel_exporter_otlp_traces_endpoint",
    )
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None:
            if not value.startswith(("https://", "http://")):
                raise ValueError(f"not an http(s):// URL ({scheme_of(value)})")
            http_url_problem(value)
        return value

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
    def workflows_dir(self) -> Path:
        """Every `*.yaml` here is a workflow (the close is close.yaml); moves with COUNTERSIGN_CONFIG_DIR."""
        return self.config_dir / "workflows"

    @property
    def principals_path(self) -> Path:
        return self.config_dir / "principals.yaml"

    @property
    def prompts_dir(self) -> Path:
        """The model prompt templates (`<name>.md`); moves with COUNTERSIGN_CONFIG_DIR."""
        return self.config_dir / "prompts"

    @property
    def clauses_dir(self) -> Path:
        """The clause corpus (`corpus.json`); moves with COUNTERSIGN_CONFIG_DIR."""
        return self.config_dir / "clauses"

    @property
    def cassettes_dir(self) -> Path:
        """Recorded model responses: COUNTERSIGN_CASSETTE_DIR, else the config's cassettes/."""
        return self.cassette_dir if self.cassette_dir is not None else self.config_dir / "cassettes"

    def profile_path(self, name: str) -> Path:
        return self.config_dir / "profiles" / f"{name}.yaml"


class _MappingEnvSource(EnvSettingsSource):
    """pydantic-settings' environment source, reading the mapping load_settings() was given."""

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return {name: value for name, value in (_ENVIRONMENT.get() or {}).items() if value != ""}


class SettingsError(ValueError):
    """One or more settings are wrong or missing; `lines` has one line per problem, each naming its variable."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__("; ".join(lines))
        self.lines = lines


def id_list(raw: str | None) -> tuple[str, ...]:
    """A comma-separated list of ids; blanks dropped."""
    return tuple(part.strip() for part in (raw or "").split(",") if part.strip())


def variable(field: str) -> str:
    """The environment variable of a Settings field."""
    alias = Settings.model_fields[field].validation_alias
    assert isinstance(alias, str)
    return alias


@contextmanager
def _reading(environment: Mapping[str, str]) -> Iterator[None]:
    token = _ENVIRONMENT.set(environment)
    try:
        yield
    finally:
        _ENVIRONMENT.reset(token)


def load_settings(environment: Mapping[str, str] | None = None) -> Settings:
    """Read and validate every setting from the environment; raise SettingsError with one line per problem."""
    environment = os.environ if environment is None else environment
    with _reading(environment):
        try:
            settings = Settings()
        except ValidationError as exc:
            raise SettingsError([_error_line(error) for error in exc.errors()]) from None
    problems = companion_problems(settings, variable) + path_problems(settings, variable)
    if problems:
        raise SettingsError(problems)
    return settings


def _error_line(error: Mapping[str, Any]) -> str:
    loc = error.get("loc") or ()
    name = str(loc[0]) if loc else "settings"
    if name in Settings.model_fields:
        name = variable(name)
    value = error.get("input")
    kind = error.get("type", "")
    shown = repr(value) if isinstance(value, str) and not _is_secret_variable(name) else "(hidden)"
    if kind in ("float_parsing", "int_parsing", "float_type", "int_type", "int_from_float"):
        return f"{name}: not a number ({shown})"
    if kind in ("bool_parsing", "bool_type"):
        return f"{name}: not a boolean: use 1/0, true/false, yes/no ({shown})"
    if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        bound = next(iter((error.get("ctx") or {}).values()), "")
        words = {"greater_than": "above", "greater_than_equal": "at least", "less_than": "below"}.get(kind, "at most")
        number = f"{bound:g}" if isinstance(bound, int | float) else str(bound)
        return f"{name}: must be {words} {number} ({shown})"
    if kind == "finite_number":
        return f"{name}: must be a finite number ({shown})"
    if kind == "literal_error":
        expected = (error.get("ctx") or {}).get("expected", "")
        return f"{name}: must be {expected} ({shown})"
    if kind == "missing":
        return f"{name}: missing"
    if kind == "value_error":
        message = str(error.get("msg", "")).removeprefix("Value error, ")
        return f"{name}: {message}"
    return f"{name}: {error.get('msg', 'invalid')} ({shown})"


def _is_secret_variable(name: str) -> bool:
    return any(_is_secret(info) for info in Settings.model_fields.values() if info.validation_alias == name)


def _is_secret(info: FieldInfo) -> bool:
    extra = info.json_schema_extra
    return isinstance(extra, dict) and bool(extra.get("secret"))


# --- `countersign config check` ------------------------------------------------------------------------------


def describe(environment: Mapping[str, str] | None = None) -> list[tuple[str, str, str]]:
    """Each variable, its effective value (secrets redacted) and where it came from: `env` or `default`.

    Reads the raw environment, so it describes even settings that do not validate.
    """
    environment = os.environ if environment is None else environment
    rows = []
    for field, info in Settings.model_fields.items():
        name = variable(field)
        raw = environment.get(name) or None
        if raw is None:
            default = info.default
            shown = ",".join(default) if isinstance(default, tuple) else str(default)
            rows.append((name, shown if default not in (None, ()) else "unset", "default"))
        elif field.endswith("database_url"):
            rows.append((name, dsn_without_password(raw), "env"))
        else:
            rows.append((name, redact(raw) if _is_secret(info) else raw, "env"))
    return rows
