"""Scripted people with passkeys: the demos decide high and critical gates on the Close Board as a person would.

Each person gets an owner-issued enrolment link (as `countersign principals enroll` makes), enrols a passkey held by
a software authenticator (countersign/scenarios/software_authenticator.py; keys in memory, for demos only), signs in
over HTTP
and signs each decision: the board's challenge is the SHA-256 of the canonical decision message, which carries the
digest of the gate's summary. Nothing here is a shortcut a browser could not take: every step is the board's own
HTTP endpoint on the running server.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from typing import Any

import httpx

from countersign.bootstrap.runtime import Runtime, connection
from countersign.callbacks.passkeys import issue_enrolment
from countersign.scenarios.software_authenticator import SoftwareAuthenticator

BOARD_HOST = "localhost"  # a secure context without TLS, and a relying-party id browsers accept


def reserve_board_socket() -> tuple[socket.socket, str]:
    """A listening socket on a free local port and the board URL for it (the app must know its origin up front)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    return sock, f"http://{BOARD_HOST}:{port}"


@dataclass
class _Person:
    principal_id: str
    device: SoftwareAuthenticator
    client: httpx.AsyncClient
    csrf: str = ""


@dataclass
class PasskeyPeople:
    """People who decide on the board with their passkeys, each with their own HTTP session."""

    board_url: str
    server_url: str  # where the demo server listens (the board URL's host may resolve differently)
    people: dict[str, _Person] = field(default_factory=dict)

    async def enrol(self, rt: Runtime, principal_id: str) -> None:
        """Issue the person's one-time link as the owner, then enrol and sign in through the board."""
        async with connection(rt, "owner") as conn, conn.transaction():
            token = await issue_enrolment(conn, principal_id, issued_by="countersign-demo", hours=1)
        person = _Person(
            principal_id,
            SoftwareAuthenticator(BOARD_HOST, self.board_url),
            httpx.AsyncClient(base_url=self.server_url, timeout=30, headers={"origin": self.board_url}),
        )
        begun = _ok(await person.client.post("/board/enrol/options", json={"token": token}))
        response = person.device.register(begun["options"])
        _ok(await person.client.post("/board/enrol", json={"token": token, "response": response, "label": "demo"}))
        signing_in = _ok(await person.client.post("/board/sign-in/options"))
        signed_in = _ok(
            await person.client.post("/board/sign-in", json={"response": person.device.assert_(signing_in["options"])})
        )
        person.csrf = str(signed_in["csrf_token"])
        self.people[principal_id] = person

    async def decide(self, principal_id: str, gate_id: str, decision: str, reason: str) -> httpx.Response:
        """Ask the board what to sign, sign it with the person's passkey, send it back; the board's answer."""
        person = self.people[principal_id]
        headers = {"x-csrf-token": person.csrf}
        base = f"/board/gates/{gate_id}/decision"
        begun = await person.client.post(
            f"{base}/options", json={"decision": decision, "reason": reason}, headers=headers
        )
        if begun.status_code != 200:
            return begun
        assertion = person.device.assert_(begun.json()["options"])
        return await person.client.post(base, json={"response": assertion}, headers=headers)

    async def aclose(self) -> None:
        for person in self.people.values():
            await person.client.aclose()


def _ok(response: httpx.Response) -> dict[str, Any]:
    if response.status_code != 200:
        raise RuntimeError(f"the board refused {response.request.url.path}: {response.status_code} {response.text}")
    body: dict[str, Any] = response.json()
    return body
