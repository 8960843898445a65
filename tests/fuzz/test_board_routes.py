"""Every Close Board route (countersign/board/passkeys.py and pages.py) fuzzed over HTTP on real PostgreSQL.

The board is left out of the OpenAPI document schemathesis reads (test_openapi_schemathesis.py), so its routes are
listed here from the app's router, and `test_every_board_route_is_fuzzed` fails when a mounted board route has no
entry in ROUTES. Each route gets hypothesis-drawn path parameters, query strings and bodies (garbage, and near-valid:
a real WebAuthn options or response body, a real enrolment link's token, a real CSRF form, changed in one place),
sent with no session cookie, a random one or a live signed-in session, with or without the CSRF token and Origin.

The property: never a 5xx and never an exception out of the app (through a real server, a reset connection); every
refusal is a 4xx whose body says what was refused in words, not a traceback; and the next request still works.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlencode

import httpx
import pytest
import pytest_asyncio
from fastapi import FastAPI
from fastapi.routing import iter_route_contexts
from hypothesis import given, settings
from hypothesis import strategies as st
from psycopg import AsyncConnection

from countersign.bootstrap.app import create_app
from countersign.bootstrap.runtime import Runtime
from countersign.callbacks.passkeys import issue_enrolment
from countersign.engine.orchestrator import advance
from countersign.engine.runs import close_status
from countersign.scenarios.software_authenticator import SoftwareAuthenticator, b64url
from countersign.services.reading import is_close_id, is_gate_id
from tests.fuzz.strategies import FUZZ, JSON_DATA, NASTY_CHARS, TEXT, mutated
from tests.support import count, import_default_principals, start_default_close

BOARD = "http://localhost:8000"  # the settings' default board URL: the passkeys' origin and relying-party id
SESSION_COOKIE = "countersign_session"
EXAMPLES = 30  # per route and method: the whole file stays well under a minute on two cores


@dataclass(frozen=True)
class Spec:
    """How to fuzz one route: what each path parameter names, and the valid body a near-valid one starts from."""

    params: dict[str, str] = field(default_factory=dict)  # name -> "close", "gate", "credential" or "static"
    body: str | None = None  # a key of World.bodies
    needs_close: bool = False  # a real close with an open escalation gate (a few hundred ms more to set up)


ROUTES: dict[tuple[str, str], Spec] = {
    ("GET", "/"): Spec(),
    ("GET", "/board/"): Spec(),
    ("GET", "/board/inbox"): Spec(),
    ("GET", "/board/static/board.js"): Spec(),
    ("GET", "/board/static/{name}"): Spec(params={"name": "static"}),
    ("GET", "/board/sign-in"): Spec(),
    ("POST", "/board/sign-in/options"): Spec(),
    ("POST", "/board/sign-in"): Spec(body="sign_in"),
    ("POST", "/board/sign-out"): Spec(body="csrf_form"),
    ("GET", "/board/enrol"): Spec(),
    ("POST", "/board/enrol/options"): Spec(body="enrol_options"),
    ("POST", "/board/enrol"): Spec(body="enrol"),
    ("GET", "/board/passkeys"): Spec(),
    ("POST", "/board/passkeys/{credential_id}/revoke"): Spec(params={"credential_id": "credential"}, body="csrf_form"),
    ("GET", "/board/closes/{close_id}"): Spec(params={"close_id": "close"}, needs_close=True),
    ("GET", "/board/gates/{gate_id}"): Spec(params={"gate_id": "gate"}, needs_close=True),
    ("POST", "/board/gates/{gate_id}/decision/options"): Spec(
        params={"gate_id": "gate"}, body="decision_options", needs_close=True
    ),
    ("POST", "/board/gates/{gate_id}/decision"): Spec(params={"gate_id": "gate"}, body="decision", needs_close=True),
    ("GET", "/board/charts/closes/{close_id}/variance.svg"): Spec(params={"close_id": "close"}, needs_close=True),
    ("GET", "/board/charts/closes/{close_id}/position.svg"): Spec(params={"close_id": "close"}, needs_close=True),
    ("GET", "/board/charts/closes/{close_id}/timeline.svg"): Spec(params={"close_id": "close"}, needs_close=True),
}


def board_routes(app: FastAPI) -> set[tuple[str, str]]:
    """Every (method, path) the board's modules mount on the app, read from its router."""
    found: set[tuple[str, str]] = set()
    for route in iter_route_contexts(app.routes):
        endpoint = route.endpoint
        if endpoint is not None and endpoint.__module__.startswith("countersign.board.") and route.path is not None:
            found |= {(method, route.path) for method in route.methods or ()}
    return found


def test_every_board_route_is_fuzzed(runtime: Runtime) -> None:
    mounted = board_routes(create_app(runtime))  # the pools open lazily: the database is not touched
    assert mounted, "no board route found on the app: has the board's router moved?"
    assert sorted(mounted - ROUTES.keys()) == [], "board routes the fuzz does not cover: add them to ROUTES"
    assert sorted(ROUTES.keys() - mounted) == [], "ROUTES names routes the board no longer mounts"


# --- the world each route is fuzzed in ------------------------------------------------------------------------------


@dataclass
class World:
    """The app, a client, one signed-in person (alice.chen, a passkey on a software authenticator) and real ids."""

    app: FastAPI
    client: httpx.AsyncClient
    session: str  # alice's live session cookie
    csrf: str  # and its CSRF token
    credential_id: str
    close_id: str | None = None
    gate_id: str | None = None
    bodies: dict[str, Any] = field(default_factory=dict)  # the valid bodies near-valid ones start from


async def _json_ok(client: httpx.AsyncClient, path: str, body: Any = None, **kw: Any) -> Any:
    answer = await client.post(path, json=body, **kw)
    assert answer.status_code == 200, answer.text
    return answer.json()


async def _world(runtime: Runtime, conn: AsyncConnection[Any], close: tuple[str, str] | None) -> AsyncIterator[World]:
    app = create_app(runtime)
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BOARD)
    async with app.router.lifespan_context(app), client:
        await import_default_principals(conn)
        device = SoftwareAuthenticator("localhost", BOARD)
        async with conn.transaction():
            token = await issue_enrolment(conn, "alice.chen", issued_by="test-owner")
        begun = await _json_ok(client, "/board/enrol/options", {"token": token})
        enrolled = {"token": token, "response": device.register(begun["options"]), "label": "laptop"}
        await _json_ok(client, "/board/enrol", enrolled)
        options = await _json_ok(client, "/board/sign-in/options")
        signed_in = await client.post("/board/sign-in", json={"response": device.assert_(options["options"])})
        assert signed_in.status_code == 200, signed_in.text
        session, csrf = signed_in.cookies[SESSION_COOKIE], signed_in.json()["csrf_token"]
        client.cookies.clear()  # every fuzzed request says itself which cookie it carries

        # Near-valid bodies start from real ones: a fresh link and its new passkey, a live sign-in challenge
        # answered, and (with a close) a decision asked for and signed.
        async with conn.transaction():
            fresh = await issue_enrolment(conn, "bob.osei", issued_by="test-owner")
        other = SoftwareAuthenticator("localhost", BOARD)
        begun = await _json_ok(client, "/board/enrol/options", {"token": fresh})
        sign_in_options = await _json_ok(client, "/board/sign-in/options")
        credential = b64url(next(iter(device.credentials.values())).credential_id)
        world = World(app, client, session, csrf, credential)
        world.bodies = {
            "sign_in": {"response": device.assert_(sign_in_options["options"])},
            "enrol_options": {"token": fresh},
            "enrol": {"token": fresh, "response": other.register(begun["options"]), "label": "phone"},
            "csrf_form": {"csrf_token": csrf},
        }
        if close is not None:
            world.close_id, world.gate_id = close
            ask = {"decision": "approve", "reason": "reviewed the corrected feed"}
            headers = {"x-csrf-token": csrf, "cookie": f"{SESSION_COOKIE}={session}"}
            to_sign = await _json_ok(client, f"/board/gates/{world.gate_id}/decision/options", ask, headers=headers)
            client.cookies.clear()
            world.bodies["decision_options"] = ask
            world.bodies["decision"] = {"response": device.assert_(to_sign["options"])}
        yield world


@pytest_asyncio.fixture
async def plain_world(runtime: Runtime, conn: AsyncConnection[Any]) -> AsyncIterator[World]:
    async for world in _world(runtime, conn, None):
        yield world


@pytest_asyncio.fixture
async def close_world(
    runtime: Runtime, conn: AsyncConnection[Any], engine_ctx: Any, default_books: Any
) -> AsyncIterator[World]:
    close_id = await start_default_close(conn, runtime, default_books)
    assert (await advance(conn, close_id, engine_ctx)).status == "halted"
    gates = (await close_status(conn, close_id))["gates"]
    gate_id = str(next(g["gate_id"] for g in gates if g["kind"] == "escalation"))
    async for world in _world(runtime, conn, (close_id, gate_id)):
        yield world


# --- what is sent ---------------------------------------------------------------------------------------------------

HUGE = st.tuples(st.sampled_from(["a", "\x00", "é", "A_-", "\ud800"]), st.integers(500, 6_000)).map(
    lambda part: part[0] * part[1]
)
BASE64URL = st.from_regex(r"[A-Za-z0-9_-]{1,60}", fullmatch=True)
HOSTILE = st.one_of(
    st.sampled_from(["a\x00b", "\x00", "\ud800", "x\udfffy", "\udc80\x00"]),  # the two PostgreSQL cannot hold
    TEXT,
    HUGE,
    BASE64URL,
    BASE64URL.map(lambda s: s + "\x00"),
    st.lists(NASTY_CHARS, min_size=1, max_size=4).map("".join),
    st.sampled_from(["", "../../etc/passwd", "%00", "null", "true", "0", "-1", "1e999", "board.css", "board.js"]),
    st.uuids().map(str),
)
# Text Python's uuid.UUID reads as a UUID and PostgreSQL's uuid type does not (a prefix, an underscore int() skips,
# full-width digits, a stray space), each around a real id or a zero one.
UUID_LOOKALIKES = st.tuples(
    st.sampled_from(["urn:uuid:{}", "{{{}}}", "{} ", " {}", "{}\x00"]), st.uuids().map(str)
).map(lambda pair: pair[0].format(pair[1])) | st.sampled_from(
    ["0_" + "0" * 30, "\uff10" * 32, "0" * 31 + " ", "urn:uuid:" + "0" * 32, "uuid:" + "0" * 32]
)
VALUES = st.one_of(HOSTILE, JSON_DATA, st.integers(min_value=-(10**30), max_value=10**30), st.floats())
CONTENT_TYPES = st.sampled_from(
    [
        "application/json",
        "application/json",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "text/plain",
        "application/json; charset=latin-1",
        "",
    ]
)
FORM_FIELDS = st.one_of(st.sampled_from(["csrf_token", "token", "response", "label", "decision", "reason"]), TEXT)


def _raw(text: str) -> bytes:
    """Text as a hostile client sends it: UTF-8, a lone surrogate as its (invalid) three bytes."""
    return text.encode("utf-8", "surrogatepass")


def _form(fields: dict[str, Any]) -> bytes:
    return urlencode({str(k): str(v) for k, v in fields.items()}, encoding="utf-8", errors="surrogatepass").encode()


def _json(data: Any, ascii_only: bool) -> bytes:
    # ensure_ascii escapes lone surrogates as \ud800, which json.loads gives back; otherwise their raw bytes go
    return _raw(json.dumps(data, ensure_ascii=ascii_only, allow_nan=True))


def _path_value(draw: Any, kind: str, world: World) -> str:
    real = {
        "close": world.close_id,
        "gate": world.gate_id,
        "credential": world.credential_id,
        "static": "board.css",
    }[kind]
    if draw(st.booleans()):  # the real id half the time, so the body's checks past it are reached
        return str(real)
    return str(draw(st.one_of(HOSTILE, st.uuids().map(str), UUID_LOOKALIKES)))


def _body(draw: Any, spec: Spec, world: World) -> tuple[bytes | None, str | None]:
    valid = world.bodies.get(spec.body) if spec.body else None
    kinds = ["none", "bytes", "json", "form"] + (["near"] * 6 if valid is not None else [])
    kind = draw(st.sampled_from(kinds))
    if kind == "none":
        return None, None
    if kind == "bytes":
        return draw(st.binary(max_size=300)), draw(CONTENT_TYPES)
    if kind == "form":
        fields = draw(st.dictionaries(FORM_FIELDS, HOSTILE, max_size=4))
        return _form(fields), draw(st.sampled_from(["application/x-www-form-urlencoded", "application/json"]))
    data = draw(mutated(valid, VALUES)) if kind == "near" and valid is not None else draw(VALUES)
    if spec.body == "csrf_form" and kind == "near" and isinstance(data, dict) and draw(st.booleans()):
        return _form(data), "application/x-www-form-urlencoded"
    return _json(data, draw(st.booleans())), draw(st.one_of(st.just("application/json"), CONTENT_TYPES))


@dataclass(frozen=True)
class Request:
    method: str
    url: str
    headers: dict[str, bytes]
    content: bytes | None

    def __str__(self) -> str:
        return f"{self.method} {self.url} headers={self.headers!r} body={self.content!r:.300}"


def _request(draw: Any, method: str, template: str, spec: Spec, world: World) -> Request:
    path = template
    for name, kind in spec.params.items():
        path = path.replace(f"{{{name}}}", quote(_raw(_path_value(draw, kind, world)), safe=""))
    query = draw(st.dictionaries(TEXT, HOSTILE, max_size=3))
    url = path + ("?" + _form(query).decode() if query else "")
    headers: dict[str, bytes] = {}
    # Most requests come from the signed-in person's own page (their cookie, CSRF token and origin), so the fuzz
    # spends its time past the session checks; the rest mix no, random and live cookies, tokens and origins.
    honest = draw(st.sampled_from([True, True, True, False, False]))
    cookie = "live" if honest else draw(st.sampled_from(["none", "live", "random"]))
    if cookie == "live":
        headers["cookie"] = f"{SESSION_COOKIE}={world.session}".encode()
    elif cookie == "random":
        headers["cookie"] = _raw(f"{SESSION_COOKIE}={draw(HOSTILE)}")
    csrf = "live" if honest else draw(st.sampled_from(["none", "live", "random"]))
    if csrf != "none":
        headers["x-csrf-token"] = world.csrf.encode() if csrf == "live" else _raw(draw(HOSTILE)[:200])
    origin = draw(st.sampled_from(["none", "board"] if honest else ["none", "board", "other"]))
    if origin != "none":
        headers["origin"] = BOARD.encode() if origin == "board" else b"https://evil.example"
    headers["accept"] = draw(st.sampled_from([b"text/html", b"application/json", b"*/*"]))
    content, content_type = _body(draw, spec, world)
    if content_type:
        headers["content-type"] = content_type.encode()
    return Request(method, url, headers, content)


TRACEBACK = re.compile(r"Traceback \(most recent call last\)|File \"[^\"]+\.py\", line \d+")


async def _check(world: World, request: Request) -> None:
    world.client.cookies.clear()
    try:
        answer = await world.client.request(
            request.method, request.url, headers=request.headers, content=request.content
        )
    except Exception as exc:  # an exception out of the app: a 500 and, through a real server, a reset connection
        pytest.fail(f"{request} raised {exc!r}")
    assert answer.status_code < 500, f"{request} -> {answer.status_code} {answer.text[:500]}"
    assert not TRACEBACK.search(answer.text), f"{request} answered a traceback: {answer.text[:500]}"
    if answer.status_code >= 400:
        assert answer.text.strip(), f"{request} -> {answer.status_code} with an empty body"
        if answer.headers.get("content-type", "").startswith("application/json"):
            said = answer.json()
            assert isinstance(said, dict) and (said.get("error") or said.get("detail")), answer.text
    world.client.cookies.clear()
    still = await world.client.get("/board/sign-in")  # the next request on the same client works
    assert still.status_code == 200, f"after {request}: {still.status_code}"


PLAIN = [(method, path) for (method, path), spec in ROUTES.items() if not spec.needs_close]
WITH_CLOSE = [(method, path) for (method, path), spec in ROUTES.items() if spec.needs_close]


@pytest.mark.parametrize(("method", "path"), PLAIN, ids=[f"{m} {p}" for m, p in PLAIN])
@settings(FUZZ, max_examples=EXAMPLES)
@given(data=st.data())
async def test_a_board_route_never_answers_a_server_error(
    plain_world: World, method: str, path: str, data: st.DataObject
) -> None:
    await _check(plain_world, _request(data.draw, method, path, ROUTES[method, path], plain_world))


@pytest.mark.parametrize(("method", "path"), WITH_CLOSE, ids=[f"{m} {p}" for m, p in WITH_CLOSE])
@settings(FUZZ, max_examples=EXAMPLES)
@given(data=st.data())
async def test_a_board_route_on_a_real_close_never_answers_a_server_error(
    close_world: World, method: str, path: str, data: st.DataObject
) -> None:
    await _check(close_world, _request(data.draw, method, path, ROUTES[method, path], close_world))


# --- what the fuzz found, as plain tests ----------------------------------------------------------------------------


def _as_alice(world: World, **more: str) -> dict[str, str]:
    return {"cookie": f"{SESSION_COOKIE}={world.session}", "x-csrf-token": world.csrf, **more}


async def _still_signed_in(world: World) -> None:
    world.client.cookies.clear()
    assert (await world.client.get("/board/sign-in")).status_code == 200
    assert (await world.client.get("/board/passkeys", headers=_as_alice(world))).status_code == 200


async def test_a_nul_in_the_credential_id_at_sign_in_is_a_400_naming_it_and_the_client_goes_on(
    plain_world: World,
) -> None:
    answer = {**plain_world.bodies["sign_in"]["response"], "id": "ab\x00cd"}
    refused = await plain_world.client.post(
        "/board/sign-in",
        content=json.dumps({"response": answer}).encode(),
        headers={"content-type": "application/json"},
    )
    assert refused.status_code == 400 and refused.json()["field"] == "response.id", refused.text
    assert (await plain_world.client.post("/board/sign-in/options")).status_code == 200
    await _still_signed_in(plain_world)


@pytest.mark.parametrize("credential", ["%00", "ab%00cd", "%ED%A0%80", "a" * 1_400])
async def test_revoking_a_passkey_id_no_passkey_has_is_a_400_not_a_server_error(
    plain_world: World, credential: str
) -> None:
    """Found: a NUL in the path's credential id reached revoke_passkey's SQL (DataError, a 500)."""
    refused = await plain_world.client.post(
        f"/board/passkeys/{credential}/revoke", data={"csrf_token": plain_world.csrf}, headers=_as_alice(plain_world)
    )
    assert refused.status_code == 400 and refused.json()["field"] == "credential_id", refused.text
    await _still_signed_in(plain_world)  # alice's passkey, and so her session, is untouched


async def test_a_gate_id_that_is_not_a_uuid_is_refused_at_the_decision_endpoints(close_world: World) -> None:
    """Found: a gate id PostgreSQL's uuid type refuses ("0", a NUL) reached read_gate (a 500)."""
    assert close_world.gate_id is not None
    for gate in ("0", "%00", quote(f"urn:uuid:{close_world.gate_id}", safe=""), "0_" + "0" * 30):
        for step, body in (("decision/options", close_world.bodies["decision_options"]), ("decision", {})):
            refused = await close_world.client.post(
                f"/board/gates/{gate}/{step}", json=body, headers=_as_alice(close_world)
            )
            assert refused.status_code == 400 and refused.json()["field"] == "gate_id", (gate, step, refused.text)
    await _still_signed_in(close_world)


async def test_close_and_gate_pages_answer_404_for_text_python_reads_as_a_uuid_and_postgresql_does_not(
    close_world: World,
) -> None:
    """Found: uuid.UUID takes 'urn:uuid:...', underscores and full-width digits; the database did not (a 500)."""
    assert close_world.close_id is not None and close_world.gate_id is not None
    lookalikes = [f"urn:uuid:{close_world.close_id}", "0_" + "0" * 30, "\uff10" * 32, f"{close_world.close_id} "]
    for text in lookalikes:
        ids = quote(text, safe="")
        for path in (
            f"/board/closes/{ids}",
            f"/board/gates/{quote(text.replace(close_world.close_id, close_world.gate_id), safe='')}",
            *(f"/board/charts/closes/{ids}/{chart}.svg" for chart in ("variance", "position", "timeline")),
        ):
            page = await close_world.client.get(path, headers=_as_alice(close_world, accept="text/html"))
            assert page.status_code == 404, (path, page.status_code, page.text[:300])
    assert (
        await close_world.client.get(f"/board/closes/{close_world.close_id}", headers=_as_alice(close_world))
    ).status_code == 200


@pytest.mark.parametrize("reason", ["lone \ud800 surrogate", "a NUL \x00 here"])
async def test_a_reason_that_cannot_be_signed_or_stored_is_a_400_naming_it(close_world: World, reason: str) -> None:
    """Found: a lone surrogate in the reason failed to encode the message to sign (UnicodeEncodeError, a 500)."""
    body = json.dumps({"decision": "reject", "reason": reason}).encode()
    refused = await close_world.client.post(
        f"/board/gates/{close_world.gate_id}/decision/options",
        content=body,
        headers=_as_alice(close_world, **{"content-type": "application/json"}),
    )
    assert refused.status_code == 400 and refused.json()["field"] == "reason", refused.text
    await _still_signed_in(close_world)


@pytest.mark.parametrize(
    ("field", "value"), [("reason", None), ("reason", 7), ("decision", {"a": 1}), ("decision", None)]
)
async def test_a_decision_field_that_is_not_text_is_a_400_naming_it(close_world: World, field: str, value: Any) -> None:
    """Left by the fuzz: a JSON null reason was written as the reason "None", an object as its Python text."""
    fields: dict[str, Any] = {"decision": "reject", "reason": "the accrual is unsupported", field: value}
    refused = await close_world.client.post(
        f"/board/gates/{close_world.gate_id}/decision/options",
        content=json.dumps(fields).encode(),
        headers=_as_alice(close_world, **{"content-type": "application/json"}),
    )
    assert refused.status_code == 400 and refused.json()["field"] == field, refused.text
    await _still_signed_in(close_world)


async def test_a_nul_in_the_assertions_user_handle_is_a_400_and_records_nothing(
    close_world: World, conn: AsyncConnection[Any]
) -> None:
    """Found: the userHandle, which the signature does not cover, was copied into the stored proof; a NUL in it
    failed the jsonb insert (UntranslatableCharacter, a 500)."""
    signed = close_world.bodies["decision"]["response"]
    answer = {**signed, "response": {**signed["response"], "userHandle": "a\x00b"}}
    refused = await close_world.client.post(
        f"/board/gates/{close_world.gate_id}/decision",
        content=json.dumps({"response": answer}).encode(),
        headers=_as_alice(close_world, **{"content-type": "application/json"}),
    )
    assert refused.status_code == 400 and refused.json()["field"] == "response.response.userHandle", refused.text
    assert await count(conn, "SELECT count(*) FROM gate_decision") == 0
    done = await close_world.client.post(
        f"/board/gates/{close_world.gate_id}/decision",
        json=close_world.bodies["decision"],
        headers=_as_alice(close_world),
    )
    assert done.status_code == 200, done.text  # the honest assertion still records (its challenge was not used)


def test_a_close_or_gate_id_is_only_text_postgresql_reads_as_a_uuid() -> None:
    zero = "00000000-0000-0000-0000-000000000000"
    for accepted in (zero, zero.replace("-", ""), "{" + zero + "}", zero.upper().replace("0", "A")):
        assert is_close_id(accepted) and is_gate_id(accepted), accepted
    for refused in ("urn:uuid:" + zero, "0_" + "0" * 30, "\uff10" * 32, zero + " ", zero + "\n", "{" + zero, "", "0"):
        assert not is_close_id(refused) and not is_gate_id(refused), refused
