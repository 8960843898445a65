"""Wiring: settings -> database (at head) -> policy and workflows -> engine context with A2A specialists."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from countersign import installed_version
from countersign.bootstrap import migrate
from countersign.bootstrap.chat import channel_targets
from countersign.bootstrap.database import CALLBACKS_ROLE, ENGINE_ROLE, Database, open_database
from countersign.bootstrap.keys import load_trace_signer
from countersign.bootstrap.settings import Settings, variable
from countersign.bootstrap.unreachable import DatabaseUnreachable
from countersign.engine.orchestrator import EngineContext
from countersign.engine.workflows import shipped_handlers
from countersign.llm import OpenAICompatibleProvider, Provider, RecordingProvider, ReplayProvider, cassette_set_hash
from countersign.policy import Policy, PolicyError, Workflow, load_policy, load_workflows
from countersign.retrieval import Retriever, load_corpus
from countersign.services.starting import StartRules, start_close_on_books
from countersign.specialists.client import SpecialistClient, open_in_process
from countersign.specialists.narration import Narrator
from countersign.synthetic import generate_books, load_profile, seed_from_name

DEFAULT_PROFILE = "default"


def app_version() -> str:
    return installed_version()


@dataclass
class Runtime:
    settings: Settings
    database: Database
    policy: Policy
    workflows: Mapping[str, Workflow]  # every file in config/workflows, each checked against the policy
    _retriever: Retriever | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if CLOSE_WORKFLOW not in self.workflows:
            raise PolicyError(str(self.settings.workflows_dir), f"{CLOSE_WORKFLOW}.yaml", "missing: the close workflow")

    @property
    def workflow(self) -> Workflow:
        """The month-end close: what `close start` runs."""
        return self.workflows[CLOSE_WORKFLOW]

    def load_retriever(self) -> Retriever:
        """The clause retriever over the committed corpus, built once per process on first use (its hashes checked)."""
        if self._retriever is None:
            self._retriever = Retriever.build(load_corpus(self.settings.clauses_dir / CORPUS_FILE))
        return self._retriever

    def versions(self) -> dict[str, Any]:
        """What every trace event of a close started now carries: the code, and the model path it may take."""
        settings = self.settings
        return {
            "app_version": app_version(),
            "model_provider": settings.model_provider,
            "model_id": settings.model_id,
            "prompt_templates_sha256": files_sha256(settings.prompts_dir, "*.md"),
            "cassettes_sha256": cassette_set_hash(settings.cassettes_dir),
            "clause_corpus_version": load_corpus(settings.clauses_dir / CORPUS_FILE).version,
        }


def files_sha256(folder: Path, pattern: str) -> str:
    """SHA-256 over the sorted (name, SHA-256 of bytes) of the folder's files matching `pattern`."""
    digest = hashlib.sha256()
    for path in sorted(folder.glob(pattern)) if folder.is_dir() else []:
        digest.update(path.name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).hexdigest().encode() + b"\n")
    return digest.hexdigest()


CLOSE_WORKFLOW = "close"
CORPUS_FILE = "corpus.json"


def load_rules(settings: Settings) -> tuple[Policy, Workflow]:
    """The policy and the month-end close workflow; every workflow file is checked (see `load_rules_all`)."""
    policy, workflows = load_rules_all(settings)
    if CLOSE_WORKFLOW not in workflows:
        raise PolicyError(str(settings.workflows_dir), f"{CLOSE_WORKFLOW}.yaml", "missing: the close workflow")
    return policy, workflows[CLOSE_WORKFLOW]


def load_rules_all(settings: Settings) -> tuple[Policy, Mapping[str, Workflow]]:
    """Policy first, then every workflow file checked against it: a disagreeing one stops the process here."""
    policy = load_policy(settings.risk_path)
    return policy, load_workflows(settings.workflows_dir, policy)


class PasswordFileUnreadable(RuntimeError):
    def __init__(self, variable: str, path: Path, exc: OSError) -> None:
        super().__init__(f"{variable}: cannot read {path}: {exc.strerror or exc}")
        self.variable = variable


def role_passwords(settings: Settings) -> dict[str, str]:
    """The service roles' passwords the configuration gives: COUNTERSIGN_{ENGINE,CALLBACKS}_DB_PASSWORD, or the
    file its `_FILE` names (the docker-secrets convention; one trailing newline dropped). Roles not given are absent."""
    passwords = {}
    for role, name in ((ENGINE_ROLE, "engine"), (CALLBACKS_ROLE, "callbacks")):
        value: str | None = getattr(settings, f"{name}_db_password")
        path: Path | None = getattr(settings, f"{name}_db_password_file")
        if path is not None:
            try:
                value = path.read_text(encoding="utf-8").removesuffix("\n").removesuffix("\r")
            except OSError as exc:
                raise PasswordFileUnreadable(variable(f"{name}_db_password_file"), path, exc) from None
        if value:
            passwords[role] = value
    return passwords


def open_configured_database(settings: Settings) -> Database:
    return open_database(
        settings.database_url,
        settings.state_dir,
        engine_url=settings.engine_database_url,
        callbacks_url=settings.callbacks_database_url,
        role_passwords=role_passwords(settings),
    )


def boot(
    settings: Settings,
    *,
    database: Database | None = None,
    upgrade: bool = False,
    roles: tuple[str, ...] = (),
) -> Runtime:
    """Rules, then the database: `upgrade` migrates it (the owner's `db upgrade`), and so does the embedded default
    (its own owner); any other process only checks the schema is at head (SchemaNotAtHead otherwise). `roles` are
    the connections the process will open: each must be configured (MissingRoleURL otherwise)."""
    policy, workflows = load_rules_all(settings)
    database = database or open_configured_database(settings)
    for role in roles:
        database.url_for(role)
    if upgrade or database.embedded_server is not None:
        migrate.upgrade(database, policy, workflows)
    else:
        migrate.require_head(database.schema_check_url())
        migrate.require_enforced(database.schema_check_url(), policy, workflows)
    return Runtime(settings, database, policy, workflows)


def connection(runtime: Runtime, role: str = "engine") -> AbstractAsyncContextManager[AsyncConnection[Any]]:
    """A connection as `role`: "engine" (the default), "callbacks", or "owner" (migrations, principal import)."""
    return role_connection(runtime.database.url_for(role), role)


@asynccontextmanager
async def role_connection(url: str, role: str) -> AsyncIterator[AsyncConnection[Any]]:
    """A connection to `url`, the URL `Database.url_for(role)` gave, for a process handed the URL instead of the
    Runtime (a drill's storm processes); one it cannot open raises DatabaseUnreachable naming the role."""
    try:
        conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
    except psycopg.OperationalError as exc:
        raise DatabaseUnreachable(role, url, exc) from exc
    try:
        yield conn
    finally:
        await conn.close()


def worker_pool(runtime: Runtime, concurrency: int) -> AsyncConnectionPool[Any]:
    """The worker process's one pool, as the engine role (not yet open), sized by COUNTERSIGN_WORKER_POOL_SIZE."""
    from countersign.engine.jobs import pool_for_jobs, pool_size_for

    size = runtime.settings.worker_pool_size or pool_size_for(concurrency)
    return pool_for_jobs(runtime.database.url_for("engine"), size=max(size, pool_size_for(1)))


class MissingSpecialistToken(RuntimeError):
    pass


def build_narrator(settings: Settings, http: httpx.AsyncClient | None = None) -> Narrator:
    """The model seat the specialists narrate with: recorded responses by default (no network, no credentials);
    an OpenAI-compatible API (`openai`), or that API with every answer written as a cassette (`record`)."""
    provider: Provider = ReplayProvider(settings.cassettes_dir)
    if settings.model_provider != "replay":
        if settings.model_base_url is None or http is None:
            raise ValueError(f"COUNTERSIGN_MODEL_PROVIDER={settings.model_provider} needs COUNTERSIGN_MODEL_BASE_URL")
        provider = OpenAICompatibleProvider(settings.model_base_url, api_key=settings.model_api_key, http=http)
        if settings.model_provider == "record":
            provider = RecordingProvider(provider, settings.cassettes_dir)
    return Narrator(provider=provider, model=settings.model_id, prompts_dir=settings.prompts_dir)


@asynccontextmanager
async def model_narrator(settings: Settings) -> AsyncIterator[Narrator]:
    """`build_narrator` with an HTTP client that lives as long as the context (none for replay)."""
    if settings.model_provider == "replay":
        yield build_narrator(settings)
        return
    async with httpx.AsyncClient() as http:
        yield build_narrator(settings, http)


@asynccontextmanager
async def engine_context(runtime: Runtime) -> AsyncIterator[EngineContext]:
    """Specialists in-process over ASGI by default; over HTTP when COUNTERSIGN_SPECIALISTS_URL is set.

    In process, without COUNTERSIGN_SPECIALIST_TOKEN, app and client share a token made for this process; remote
    specialists need the deployment's token.
    """
    url = runtime.settings.specialists_url
    token = runtime.settings.specialist_token
    channels = channel_targets(runtime.settings)
    signer = load_trace_signer(runtime.settings)
    origin = runtime.settings.trace_origin
    if url is None:
        async with (
            model_narrator(runtime.settings) as narrator,
            open_in_process(token=token, narrator=narrator) as client,
        ):
            yield EngineContext(
                runtime.policy,
                runtime.workflows,
                call=client.call,
                channels=channels,
                signer=signer,
                origin=origin,
                handlers=shipped_handlers(runtime.load_retriever),
                locale=runtime.settings.locale,
            )
        return
    if not token:
        raise MissingSpecialistToken(
            f"COUNTERSIGN_SPECIALIST_TOKEN is not set: the specialists at {url} refuse calls without their token"
        )
    async with httpx.AsyncClient() as http:
        remote = SpecialistClient(http, url.rstrip("/"), token=token)
        try:
            yield EngineContext(
                runtime.policy,
                runtime.workflows,
                call=remote.call,
                channels=channels,
                signer=signer,
                origin=origin,
                handlers=shipped_handlers(runtime.load_retriever),
                locale=runtime.settings.locale,
            )
        finally:
            await remote.aclose()


def synthesize_for(runtime: Runtime, entity: str, period: str) -> Path:
    """Books for an entity nobody loaded books for: the default profile, seeded from the entity's name."""
    profile = load_profile(runtime.settings.profile_path(DEFAULT_PROFILE))
    out = runtime.settings.state_dir / "books" / f"{entity}-{period}"
    seed = seed_from_name(entity)
    generate_books(profile, seed, out, entity=entity, period=period)
    return out


def start_rules(runtime: Runtime, workflow: str = CLOSE_WORKFLOW) -> StartRules:
    """What a close of `workflow` starts under here: the policy, the workflow, the versions, the books synthesizer."""
    return StartRules(
        policy=runtime.policy,
        workflow=runtime.workflows[workflow],
        versions=runtime.versions(),
        synthesize=lambda entity, period: synthesize_for(runtime, entity, period),
    )


async def start_close_with_books(
    runtime: Runtime,
    conn: AsyncConnection[Any],
    *,
    entity: str,
    period: str,
    books_dir: Path | None,
    started_by: str,
    synthetic: bool = False,
) -> str:
    """`countersign.services.starting.start_close_on_books` under this runtime's rules (the server's chat doors call
    it)."""
    return await start_close_on_books(
        conn,
        start_rules(runtime),
        entity=entity,
        period=period,
        books_dir=books_dir,
        started_by=started_by,
        synthetic=synthetic,
    )
