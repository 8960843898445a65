"""Stopping a worker or server gracefully: let what is in flight finish (within a bound), then give back its claims.

The bound on what is in flight is the job library's (procrastinate's `shutdown_graceful_timeout`,
countersign/engine/jobs.py) for
a worker and uvicorn's for a server; this module turns SIGTERM and SIGINT into an event and gives the claims back.

A worker or server claims outbox messages (`claimed_by`, `claimed_until`) and dispatches (`leased_by`, `lease_until`)
under holder ids made by `countersign.engine.leases.holder_id()`: host, process id, a random part. A process that stops
sets the
expiry of every claim its own id prefix still holds to now, so another worker takes the rows over at once instead of
after the lease runs out. The holder stays written (the constraints want holder and expiry together), and a holder
whose lease has passed holds nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection

from countersign.engine.dispatch import release_dispatch_leases
from countersign.engine.leases import holder_id
from countersign.engine.outbox import release_outbox_claims

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def process_holder_prefix() -> str:
    """The part of every holder id this process writes that names the process (host and pid), with the separator."""
    return holder_id().rsplit(":", 1)[0] + ":"


@dataclass(frozen=True)
class Released:
    outbox_messages: int
    dispatches: int


async def release_claims(conn: AsyncConnection[Any], prefix: str | None = None) -> Released:
    """End now every live outbox claim and dispatch lease held under this process's holder ids."""
    prefix = prefix or process_holder_prefix()
    async with conn.transaction():
        messages = await release_outbox_claims(conn, prefix)
        dispatches = await release_dispatch_leases(conn, prefix)
    return Released(messages, dispatches)


class StopSignal:
    """SIGTERM and SIGINT set an event in the running loop instead of raising where the process happens to be."""

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.received: int | None = None

    def install(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in STOP_SIGNALS:
            loop.add_signal_handler(sig, self._set, sig)

    def uninstall(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in STOP_SIGNALS:
            loop.remove_signal_handler(sig)

    def _set(self, sig: int) -> None:
        self.received = sig
        self.event.set()

    @property
    def is_set(self) -> bool:
        return self.event.is_set()

    async def sleep(self, seconds: float) -> None:
        """Sleep `seconds` or until a stop signal, whichever comes first."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.event.wait(), timeout=seconds)
