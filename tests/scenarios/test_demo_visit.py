"""`countersign demo --serve`: a close left open on a running server, its board at the port it listens on, and
one-time enrolment links a visitor's browser can use (here: the software authenticator over the board's HTTP)."""

from __future__ import annotations

from typing import Any

import httpx

from countersign.bootstrap.runtime import Runtime
from countersign.scenarios.demo_visit import board_url_for, serving_visit
from countersign.scenarios.passkey_people import BOARD_HOST
from countersign.scenarios.software_authenticator import SoftwareAuthenticator
from tests.support import import_default_principals


async def _enrol_and_sign_in(listen_url: str, origin: str, link: str) -> tuple[httpx.AsyncClient, int]:
    """What a browser does with the link: enrol a passkey at `origin`, then sign in; the client and the last status."""
    token = link.split("#token=", 1)[1]
    device = SoftwareAuthenticator(BOARD_HOST, origin)
    client = httpx.AsyncClient(base_url=listen_url, timeout=30, headers={"origin": origin})
    begun = await client.post("/board/enrol/options", json={"token": token})
    if begun.status_code != 200:
        return client, begun.status_code
    enrolled = await client.post(
        "/board/enrol", json={"token": token, "response": device.register(begun.json()["options"]), "label": "visit"}
    )
    if enrolled.status_code != 200:
        return client, enrolled.status_code
    options = (await client.post("/board/sign-in/options")).json()["options"]
    signed_in = await client.post("/board/sign-in", json={"response": device.assert_(options)})
    return client, signed_in.status_code


async def test_the_visit_leaves_an_open_close_and_links_that_enrol_on_the_port_it_listens_on(
    runtime: Runtime, conn: Any
) -> None:
    await import_default_principals(conn)
    runtime = Runtime(
        runtime.settings.model_copy(update={"callback_secret": None}),
        runtime.database,
        runtime.policy,
        runtime.workflows,
    )  # as `countersign demo --serve` runs on a fresh machine: no secret configured
    async with serving_visit(runtime, seed=42, host="127.0.0.1", port=0) as visit:
        port = int(visit.listen_url.rsplit(":", 1)[1])
        assert port != 8000 and visit.board_url == f"http://localhost:{port}"  # the board follows the port
        assert visit.close.waiting, "the open close waits on people"
        async with httpx.AsyncClient(base_url=visit.listen_url) as anonymous:
            assert (await anonymous.get("/readyz")).status_code == 200
        links = dict((person.principal_id, link) for person, link in visit.links)
        assert {"alice.chen", "bob.osei", "carol.main"} <= set(links)  # everyone who may approve its gates
        assert all(link.startswith(f"{visit.board_url}/board/enrol#token=") for link in links.values())

        client, status = await _enrol_and_sign_in(visit.listen_url, visit.board_url, links["alice.chen"])
        try:
            assert status == 200
            page = await client.get(f"/board/closes/{visit.close.close_id}")
            assert page.status_code == 200 and visit.close.entity in page.text
        finally:
            await client.aclose()

        # Negative control: a browser on another origin (the board at the default port) is refused.
        stranger, refused = await _enrol_and_sign_in(visit.listen_url, "http://localhost:8000", links["bob.osei"])
        await stranger.aclose()
        assert refused >= 400


def test_the_board_url_is_the_configured_one_when_set(runtime: Runtime) -> None:
    assert board_url_for(runtime, 8123) == "http://localhost:8123"
    configured = runtime.settings.model_copy(update={"board_url": "https://close.acme.example/"})
    configured_runtime = Runtime(configured, runtime.database, runtime.policy, runtime.workflows)
    assert "board_url" in configured.model_fields_set
    assert board_url_for(configured_runtime, 8123) == "https://close.acme.example"
