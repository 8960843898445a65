"""Wiring: settings -> database (migrated) -> policy and checklist -> engine context with A2A specialists."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import httpx
import psycopg
from psycopg import AsyncConnection

from engine.books import BooksError, LoadedBooks, load_books, read_manifest
from engine.closes import check_entity_and_period, start_close
from engine.dispatch_client import SpecialistClient, open_in_process
from engine.orchestrator import EngineContext
from policy import Checklist, Policy, load_checklist, load_policy
from synthetic import generate_books, load_profile, seed_from_name

from . import migrate
from .chat import channel_targets
from .database import Database, open_database
from .keys import load_trace_signer
from .settings import Settings

DEFAULT_PROFILE = "default"


def app_version() -> str:
    try:
        return metadata.version("countersign")
    except metadata.PackageNotFoundError:
        return "0+unknown"


@dataclass
class Runtime:
    settings: Settings
    database: Database
    policy: Policy
    checklist: Checklist

    def versions(self) -> dict[str, Any]:
        return {"app_version": app_version()}


def load_rules(settings: Settings) -> tuple[Policy, Checklist]:
    """Policy first, then the checklist checked against it: a disagreeing checklist stops the process here."""
    policy = load_policy(settings.risk_path)
    return policy, load_checklist(settings.checklist_path, policy)


def boot(settings: Settings, *, database: Database | None = None) -> Runtime:
    policy, checklist = load_rules(settings)
    database = database or open_database(
        settings.database_url,
        settings.state_dir,
        engine_url=settings.engine_database_url,
        callbacks_url=settings.callbacks_database_url,
    )
    migrate.upgrade(database)
    return Runtime(settings, database, policy, checklist)


@asynccontextmanager
async def connection(runtime: Runtime, role: str = "engine") -> AsyncIterator[AsyncConnection[Any]]:
    """A connection as `role`: "engine" (the default), "callbacks", or "owner" (migrations, principal import)."""
    conn = await psycopg.AsyncConnection.connect(runtime.database.url_for(role), autocommit=True)
    try:
        yield conn
    finally:
        await conn.close()


class MissingSpecialistToken(RuntimeError):
    pass


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
        async with open_in_process(token=token) as client:
            yield EngineContext(
                runtime.policy, runtime.checklist, call=client.call, channels=channels, signer=signer, origin=origin
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
                runtime.policy, runtime.checklist, call=remote.call, channels=channels, signer=signer, origin=origin
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


async def latest_books(conn: AsyncConnection[Any], entity: str, period: str) -> int | None:
    async with conn.cursor() as cur:
        await cur.execute(
            "SELECT book_set_id FROM book_set WHERE entity = %s AND period = %s ORDER BY book_set_id DESC LIMIT 1",
            (entity, period),
        )
        row = await cur.fetchone()
    return int(row[0]) if row else None


async def ensure_books(
    runtime: Runtime, conn: AsyncConnection[Any], entity: str, period: str, books_dir: Path | None
) -> LoadedBooks | int:
    """Load the given books, or reuse loaded ones, or synthesize some. Returns the load or the book set id."""
    check_entity_and_period(entity, period)
    if books_dir is not None:
        manifest = read_manifest(books_dir)
        if (manifest["entity"], manifest["period"]) != (entity, period):
            raise BooksError(
                "entity.json",
                "entity/period",
                f"books are for {manifest['entity']} {manifest['period']}, not {entity} {period}",
            )
        return await load_books(conn, books_dir, loaded_by="countersign-cli")
    existing = await latest_books(conn, entity, period)
    if existing is not None:
        return existing
    return await load_books(conn, synthesize_for(runtime, entity, period), loaded_by="countersign-cli")


async def start_close_with_books(
    runtime: Runtime,
    conn: AsyncConnection[Any],
    *,
    entity: str,
    period: str,
    books_dir: Path | None,
    started_by: str,
) -> str:
    """`close start` from any door (CLI, Slack): books loaded or synthesized, then the close and its tasks."""
    loaded = await ensure_books(runtime, conn, entity, period, books_dir)
    return await start_close(
        conn,
        entity=entity,
        period=period,
        book_set_id=loaded.book_set_id if isinstance(loaded, LoadedBooks) else loaded,
        policy=runtime.policy,
        checklist=runtime.checklist,
        started_by=started_by,
        versions=runtime.versions(),
    )
