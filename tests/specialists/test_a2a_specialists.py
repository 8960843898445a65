import asyncio
import importlib.util
import threading
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from countersign.specialists.client import SpecialistClient, SpecialistError, open_in_process
from countersign.specialists.errors import SpecialistInputError
from countersign.specialists.server import (
    SPECIALIST_NAMES,
    Handler,
    UnknownSpecialistError,
    build_specialists_app,
    current_idempotency_key,
    default_handlers,
)
from countersign.specialists.wire import restore_integers

BASE_URL = "http://specialists.test"
TOKEN = "specialist-token-for-tests"


class RecordingHandler:
    """Echoes its payload under "echo" and records every (payload, idempotency key) it was called with."""

    def __init__(self) -> None:
        self.calls: list[tuple[dict[str, Any], str | None]] = []

    def __call__(self, payload: dict[str, Any]) -> dict[str, Any]:
        self.calls.append((payload, current_idempotency_key()))
        return {"echo": payload, "key_seen": current_idempotency_key()}


def recording_handlers() -> dict[str, RecordingHandler]:
    return {name: RecordingHandler() for name in SPECIALIST_NAMES}


async def test_agent_card_is_served_for_every_specialist_with_its_reachable_url() -> None:
    app = build_specialists_app(BASE_URL, recording_handlers(), token=TOKEN)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE_URL) as http:
        for name in SPECIALIST_NAMES:
            response = await http.get(f"/{name}/.well-known/agent-card.json")
            assert response.status_code == 200
            card = response.json()
            assert [interface["url"] for interface in card["supportedInterfaces"]] == [f"{BASE_URL}/{name}"]
            assert card["supportedInterfaces"][0]["protocolBinding"] == "JSONRPC"
            assert [skill["id"] for skill in card["skills"]] == [name]


async def test_healthz_lists_the_mounted_specialists() -> None:
    app = build_specialists_app(BASE_URL, {"accruals": RecordingHandler()}, token=TOKEN)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE_URL) as http:
        response = await http.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "specialists": ["accruals"]}


def test_unknown_specialist_name_is_refused_when_building_the_app() -> None:
    with pytest.raises(UnknownSpecialistError) as caught:
        build_specialists_app(BASE_URL, {"payroll": RecordingHandler()}, token=TOKEN)
    assert caught.value.name == "payroll"


async def test_round_trip_returns_the_handler_result_and_the_key_reaches_the_handler() -> None:
    handlers = recording_handlers()
    payload = {"kind": "subledger", "ledger": "ap", "control_balance": "-1000.00", "items": 12}
    async with open_in_process(handlers, base_url=BASE_URL) as client:
        result = await client.call("reconciliation", payload, idempotency_key="run-7:bank_rec:1")
    assert result == {"echo": payload, "key_seen": "run-7:bank_rec:1"}
    assert handlers["reconciliation"].calls == [(payload, "run-7:bank_rec:1")]
    assert handlers["accruals"].calls == []


async def test_concurrent_calls_each_carry_their_own_key() -> None:
    handlers = recording_handlers()
    async with open_in_process(handlers, base_url=BASE_URL) as client:
        results = await asyncio.gather(
            *(
                client.call(name, {"n": index}, idempotency_key=f"key-{index}")
                for index, name in enumerate(SPECIALIST_NAMES * 2)
            )
        )
    calls = range(2 * len(SPECIALIST_NAMES))
    assert [result["key_seen"] for result in results] == [f"key-{index}" for index in calls]
    assert [result["echo"] for result in results] == [{"n": index} for index in calls]


async def test_specialist_input_error_becomes_specialist_error_naming_the_field() -> None:
    def rejecting(payload: dict[str, Any]) -> dict[str, Any]:
        raise SpecialistInputError("accounts[0].bank_lines[3].amount", "not a decimal: '12,50'")

    async with open_in_process({"reconciliation": rejecting}, base_url=BASE_URL) as client:
        with pytest.raises(SpecialistError) as caught:
            await client.call("reconciliation", {"kind": "bank"}, idempotency_key="k1")
    assert caught.value.specialist == "reconciliation"
    assert caught.value.reason == "SpecialistInputError: accounts[0].bank_lines[3].amount: not a decimal: '12,50'"


async def test_unexpected_handler_exception_becomes_specialist_error_with_its_type() -> None:
    def crashing(payload: dict[str, Any]) -> dict[str, Any]:
        raise ZeroDivisionError("division by zero")

    async with open_in_process({"variance": crashing}, base_url=BASE_URL) as client:
        with pytest.raises(SpecialistError) as caught:
            await client.call("variance", {}, idempotency_key="k1")
    assert caught.value.specialist == "variance"
    assert caught.value.reason == "ZeroDivisionError: division by zero"


async def test_specialist_not_served_gives_specialist_error() -> None:
    async with open_in_process({"accruals": RecordingHandler()}, base_url=BASE_URL) as client:
        with pytest.raises(SpecialistError) as caught:
            await client.call("variance", {}, idempotency_key="k1")
    assert caught.value.specialist == "variance"
    assert "AgentCardResolutionError" in caught.value.reason


async def test_wait_is_bounded_by_timeout() -> None:
    release = threading.Event()

    def stalling(payload: dict[str, Any]) -> dict[str, Any]:
        release.wait(timeout=5)
        return {}

    async with open_in_process({"reconciliation": stalling}, base_url=BASE_URL) as client:
        try:
            with pytest.raises(SpecialistError) as caught:
                await client.call("reconciliation", {}, idempotency_key="k1", timeout_s=0.3)
        finally:
            release.set()
    assert "no answer within 0.3 s" in caught.value.reason


async def test_agent_card_is_fetched_once_per_specialist() -> None:
    card_fetches: list[str] = []

    async def record(request: httpx.Request) -> None:
        if request.url.path.endswith("agent-card.json"):
            card_fetches.append(request.url.path)

    app = build_specialists_app(BASE_URL, recording_handlers(), token=TOKEN)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, event_hooks={"request": [record]}) as http:
        client = SpecialistClient(http, BASE_URL, token=TOKEN)
        for index in range(3):
            await client.call("accruals", {}, idempotency_key=f"k{index}")
        await client.call("variance", {}, idempotency_key="k9")
        await client.aclose()
        assert not http.is_closed
    assert card_fetches == ["/accruals/.well-known/agent-card.json", "/variance/.well-known/agent-card.json"]


json_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**53), max_value=2**53),
    st.text(max_size=8),
    st.decimals(places=2, allow_nan=False, allow_infinity=False).map(str),
)
json_values = st.recursive(
    json_leaves,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=25, deadline=None)
@given(payload=st.dictionaries(st.text(max_size=6), json_values, max_size=5))
def test_nested_structures_and_integer_counts_survive_the_round_trip(payload: dict[str, Any]) -> None:
    async def round_trip() -> dict[str, Any]:
        async with open_in_process({"accruals": lambda received: {"copy": received}}) as client:
            return await client.call("accruals", payload, idempotency_key="k")

    result = asyncio.run(round_trip())
    assert result == {"copy": payload}
    assert _types(result["copy"]) == _types(payload)


def _types(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _types(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_types(item) for item in value]
    return type(value)


@given(value=json_values)
def test_restore_integers_is_identity_on_float_free_json(value: Any) -> None:
    assert restore_integers(value) == value
    assert _types(restore_integers(value)) == _types(value)


@given(count=st.integers(min_value=-(2**53), max_value=2**53))
def test_restore_integers_turns_integral_floats_back_into_ints(count: int) -> None:
    restored = restore_integers({"counts": [float(count)], "share": 0.25})
    assert restored == {"counts": [count], "share": 0.25}
    assert type(restored["counts"][0]) is int


REAL_SPECIALISTS_PRESENT = all(
    importlib.util.find_spec(f"countersign.specialists.{name}") is not None for name in SPECIALIST_NAMES
)


@pytest.mark.skipif(not REAL_SPECIALISTS_PRESENT, reason="real specialist modules not written yet")
async def test_real_reconciliation_specialist_matches_a_bank_line_over_a2a() -> None:
    payload = {
        "kind": "bank",
        "date_window_days": 3,
        "unmatched_tolerance": "0.55",
        "accounts": [
            {
                "account": "1010",
                "bank_lines": [{"id": "B1", "date": "2026-10-02", "amount": "-10.00", "reference": "R1"}],
                "gl_lines": [{"id": "G1", "date": "2026-10-01", "amount": "-10.00", "reference": "R1"}],
            }
        ],
    }
    handlers: dict[str, Handler] = default_handlers()
    async with open_in_process(handlers, base_url=BASE_URL) as client:
        result = await client.call("reconciliation", payload, idempotency_key="real-1")
    assert result["accounts"][0]["matched"] == 1
    assert type(result["accounts"][0]["matched"]) is int


# --- bearer token and invalid params (issue 9) -----------------------------------------------------------------

A2A_HEADERS = {"a2a-version": "1.0", "content-type": "application/json"}


def _rpc_send(message: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": {"message": message}}


def _message(parts: list[dict[str, Any]], metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"messageId": "m-1", "role": "ROLE_USER", "parts": parts}
    if metadata is not None:
        message["metadata"] = metadata
    return message


async def test_agent_cards_declare_a_required_bearer_scheme_and_stay_readable_without_it() -> None:
    app = build_specialists_app(BASE_URL, recording_handlers(), token=TOKEN)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE_URL) as http:
        for name in SPECIALIST_NAMES:
            response = await http.get(f"/{name}/.well-known/agent-card.json")
            assert response.status_code == 200
            card = response.json()
            assert card["securitySchemes"] == {
                "bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer", "description": ANY_TEXT}}
            }
            assert card["securityRequirements"] == [{"schemes": {"bearer": {}}}]


class _AnyText:
    def __eq__(self, other: object) -> bool:
        return isinstance(other, str) and bool(other)


ANY_TEXT = _AnyText()


@pytest.mark.parametrize(
    "authorization",
    [None, "", "Bearer", "Bearer wrong-token", f"Basic {TOKEN}", f"Bearer {TOKEN}x", f"Bearer {TOKEN[:-1]}"],
)
async def test_a_call_without_the_right_token_is_401_and_the_specialist_never_runs(authorization: str | None) -> None:
    handlers = recording_handlers()
    app = build_specialists_app(BASE_URL, handlers, token=TOKEN)
    body = _rpc_send(_message([{"data": {"kind": "bank"}}], {"idempotency_key": "k1"}))
    headers = dict(A2A_HEADERS) | ({"authorization": authorization} if authorization is not None else {})
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE_URL) as http:
        response = await http.post("/reconciliation", json=body, headers=headers)
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert response.json()["error"] == "unauthorized"
    assert handlers["reconciliation"].calls == []


async def test_the_client_with_another_token_gets_a_specialist_error_and_nothing_runs() -> None:
    handlers = recording_handlers()
    app = build_specialists_app(BASE_URL, handlers, token=TOKEN)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE_URL) as http:
        client = SpecialistClient(http, BASE_URL, token="not-the-token")
        with pytest.raises(SpecialistError) as caught:
            await client.call("accruals", {"a": "1.00"}, idempotency_key="k1")
        await client.aclose()
    assert "401" in caught.value.reason
    assert handlers["accruals"].calls == []


def test_the_app_refuses_to_build_without_a_token() -> None:
    with pytest.raises(ValueError, match="COUNTERSIGN_SPECIALIST_TOKEN"):
        build_specialists_app(BASE_URL, recording_handlers(), token="")
