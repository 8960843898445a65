"""What a generic A2A client gets from a specialist (ADR 0037, docs/a2a-conformance.md).

A message without our contract (`metadata.idempotency_key` and exactly one data part holding an object) becomes a
task in state input-required whose agent message says what is needed; tasks/get finds it, a follow-up on it with
the contract runs, a cancel cancels it, and the handler never runs for it. A well-formed message is unchanged: the
engine's dispatch table still gives one result per key and refuses a key reused for another input. With
`root_agent`, one specialist is also served at the origin root.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from countersign.specialists.client import SpecialistContractError, SpecialistError, open_in_process
from countersign.specialists.server import (
    NEEDS_FIELD,
    REQUEST_SCHEMAS,
    SPECIALIST_NAMES,
    UnknownSpecialistError,
    build_specialists_app,
    current_idempotency_key,
)

BASE_URL = "http://specialists.test"
TOKEN = "specialist-token-for-tests"
HEADERS = {"a2a-version": "1.0", "content-type": "application/json", "authorization": f"Bearer {TOKEN}"}


class RecordingHandler:
    def __init__(self) -> None:
        self.calls: list[tuple[dict[str, Any], str | None]] = []

    def __call__(self, payload: dict[str, Any]) -> dict[str, Any]:
        self.calls.append((payload, current_idempotency_key()))
        return {"echo": payload}


def recording_handlers() -> dict[str, RecordingHandler]:
    return {name: RecordingHandler() for name in SPECIALIST_NAMES}


def _message(
    parts: list[dict[str, Any]], metadata: dict[str, Any] | None = None, task_id: str | None = None
) -> dict[str, Any]:
    message: dict[str, Any] = {"messageId": f"m-{len(parts)}-{task_id}", "role": "ROLE_USER", "parts": parts}
    if metadata is not None:
        message["metadata"] = metadata
    if task_id is not None:
        message["taskId"] = task_id
    return message


async def _rpc(http: httpx.AsyncClient, path: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    response = await http.post(
        path, json={"jsonrpc": "2.0", "id": 7, "method": method, "params": params}, headers=HEADERS
    )
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def _client(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE_URL)


def _texts(message: dict[str, Any]) -> str:
    return " ".join(part["text"] for part in message["parts"] if "text" in part)


def _needs(message: dict[str, Any]) -> dict[str, Any]:
    [data] = [part["data"] for part in message["parts"] if "data" in part]
    needs: dict[str, Any] = data[NEEDS_FIELD]
    return needs


@pytest.mark.parametrize("name", SPECIALIST_NAMES)
async def test_a_text_only_message_becomes_an_input_required_task_saying_what_is_needed(name: str) -> None:
    handlers = recording_handlers()
    async with _client(build_specialists_app(BASE_URL, handlers, token=TOKEN)) as http:
        sent = await _rpc(http, f"/{name}", "SendMessage", {"message": _message([{"text": "please reconcile"}])})
        task = sent["result"]["task"]
        read = await _rpc(http, f"/{name}", "GetTask", {"id": task["id"], "historyLength": 5})
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    explanation = task["status"]["message"]
    assert explanation["role"] == "ROLE_AGENT"
    text = _texts(explanation)
    schema = REQUEST_SCHEMAS[name][0]
    assert "metadata.idempotency_key" in text and "exactly one data part" in text and schema in text
    assert _needs(explanation) == {
        "missing": ["metadata.idempotency_key", "parts"],
        "reason": ANY_TEXT,
        "metadata_key": "idempotency_key",
        "data_part": "exactly one, holding a JSON object",
        "schema": schema,
    }
    stored = read["result"]
    assert stored["id"] == task["id"] and stored["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert _texts(stored["status"]["message"]) == text
    assert [_texts(entry) for entry in stored["history"]] == ["please reconcile"]
    assert all(handler.calls == [] for handler in handlers.values())


class _AnyText:
    def __eq__(self, other: object) -> bool:
        return isinstance(other, str) and bool(other)


ANY_TEXT = _AnyText()


@pytest.mark.parametrize(
    ("parts", "metadata", "missing"),
    [
        ([{"text": "please reconcile"}], {"idempotency_key": "k1"}, ["parts"]),
        ([{"data": {"a": 1}}, {"data": {"b": 2}}], {"idempotency_key": "k1"}, ["parts"]),
        ([{"data": [1, 2]}], {"idempotency_key": "k1"}, ["parts"]),
        ([{"data": {"kind": "bank"}}], None, ["metadata.idempotency_key"]),
        ([{"data": {"kind": "bank"}}], {"idempotency_key": ""}, ["metadata.idempotency_key"]),
        ([{"data": {"kind": "bank"}}], {"idempotency_key": 7}, ["metadata.idempotency_key"]),
    ],
)
async def test_each_missing_piece_of_the_contract_is_named_and_nothing_runs(
    parts: list[dict[str, Any]], metadata: dict[str, Any] | None, missing: list[str]
) -> None:
    handlers = recording_handlers()
    async with _client(build_specialists_app(BASE_URL, handlers, token=TOKEN)) as http:
        sent = await _rpc(http, "/reconciliation", "SendMessage", {"message": _message(parts, metadata)})
    task = sent["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert _needs(task["status"]["message"])["missing"] == missing
    assert handlers["reconciliation"].calls == []


@pytest.mark.parametrize("parked", [True, False], ids=["parked", "from-the-store"])
async def test_a_follow_up_with_the_contract_on_the_waiting_task_runs_it_once(parked: bool) -> None:
    """The follow-up names the task but no context; `from-the-store` serves it from a second app sharing the task
    store, as after the SDK released its parked copy of the task (or on another replica)."""
    handlers = recording_handlers()
    first_app = build_specialists_app(BASE_URL, handlers, token=TOKEN)
    second_app = (
        first_app
        if parked
        else build_specialists_app(BASE_URL, handlers, token=TOKEN, task_stores=first_app.state.task_stores)
    )
    async with _client(first_app) as http:
        first = await _rpc(http, "/accruals", "SendMessage", {"message": _message([{"text": "accrue please"}])})
    task_id = first["result"]["task"]["id"]
    follow_up = _message([{"data": {"grni": [], "n": 3}}], {"idempotency_key": "k-follow"}, task_id=task_id)
    async with _client(second_app) as http:
        second = await _rpc(http, "/accruals", "SendMessage", {"message": follow_up})
        read = await _rpc(http, "/accruals", "GetTask", {"id": task_id})
    done = second["result"]["task"]
    assert done["id"] == task_id
    assert done["contextId"] == first["result"]["task"]["contextId"]
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    [artifact] = done["artifacts"]
    assert artifact["metadata"] == {"idempotency_key": "k-follow"}
    assert artifact["parts"][0]["data"] == {"echo": {"grni": [], "n": 3}}
    assert read["result"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert handlers["accruals"].calls == [({"grni": [], "n": 3}, "k-follow")]


async def test_a_waiting_task_can_be_cancelled_and_then_read_back() -> None:
    async with _client(build_specialists_app(BASE_URL, recording_handlers(), token=TOKEN)) as http:
        sent = await _rpc(http, "/variance", "SendMessage", {"message": _message([{"text": "explain"}])})
        task_id = sent["result"]["task"]["id"]
        cancelled = await _rpc(http, "/variance", "CancelTask", {"id": task_id})
        read = await _rpc(http, "/variance", "GetTask", {"id": task_id})
        again = await _rpc(http, "/variance", "CancelTask", {"id": task_id})
    assert cancelled["result"]["status"]["state"] == "TASK_STATE_CANCELED"
    assert read["result"]["status"]["state"] == "TASK_STATE_CANCELED"
    assert again["error"]["code"] == -32002  # task not cancelable: it is already final


async def test_our_client_sending_without_a_key_gets_a_contract_error_and_nothing_runs() -> None:
    handlers = recording_handlers()
    async with open_in_process(handlers, base_url=BASE_URL) as client:
        with pytest.raises(SpecialistContractError) as caught:
            await client.call("accruals", {"a": "1.00"}, idempotency_key="")
    assert isinstance(caught.value, SpecialistError)
    assert caught.value.reason.startswith("request refused as incomplete, a bug in the caller: countersign-accruals")
    assert "metadata.idempotency_key" in caught.value.reason
    assert handlers["accruals"].calls == []


async def test_a_well_formed_message_still_completes_with_its_key_on_the_result() -> None:
    handlers = recording_handlers()
    async with open_in_process(handlers, base_url=BASE_URL) as client:
        first = await client.call("reconciliation", {"kind": "bank", "n": 1}, idempotency_key="k-same")
        second = await client.call("reconciliation", {"kind": "bank", "n": 1}, idempotency_key="k-same")
    assert first == second == {"echo": {"kind": "bank", "n": 1}}
    assert [key for _, key in handlers["reconciliation"].calls] == ["k-same", "k-same"]


# --- the origin root -------------------------------------------------------------------------------------------


async def test_root_agent_serves_its_card_and_json_rpc_at_the_origin_root_sharing_its_tasks() -> None:
    handlers = recording_handlers()
    app = build_specialists_app(BASE_URL, handlers, token=TOKEN, root_agent="variance")
    async with _client(app) as http:
        root_card = await http.get("/.well-known/agent-card.json")
        own_card = await http.get("/variance/.well-known/agent-card.json")
        message = _message([{"data": {"period": "2026-10"}}], {"idempotency_key": "k-root"})
        sent = await _rpc(http, "/", "SendMessage", {"message": message})
        read = await _rpc(http, "/variance", "GetTask", {"id": sent["result"]["task"]["id"]})
        unauthenticated = await http.post("/", json={"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {}})
    assert root_card.status_code == 200
    assert root_card.json() == own_card.json()
    assert root_card.json()["name"] == "countersign-variance"
    assert sent["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert read["result"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert handlers["variance"].calls == [({"period": "2026-10"}, "k-root")]
    assert unauthenticated.status_code == 401


async def test_without_root_agent_nothing_is_served_at_the_origin_root() -> None:
    async with _client(build_specialists_app(BASE_URL, recording_handlers(), token=TOKEN)) as http:
        card = await http.get("/.well-known/agent-card.json")
        rpc = await http.post("/", json={"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {}}, headers=HEADERS)
    assert card.status_code == 404
    assert rpc.status_code in (404, 405)


def test_a_root_agent_that_is_not_served_is_refused_when_building_the_app() -> None:
    with pytest.raises(UnknownSpecialistError) as caught:
        build_specialists_app(BASE_URL, {"accruals": RecordingHandler()}, token=TOKEN, root_agent="variance")
    assert caught.value.name == "variance"


def test_the_cli_refuses_an_unknown_root_agent_in_one_line() -> None:
    from countersign.cli.main import app

    result = CliRunner().invoke(
        app, ["specialists", "serve", "--root-agent", "payroll"], env={"COLUMNS": "300", "NO_COLOR": "1"}
    )
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines == [
        "error: --root-agent must be one of reconciliation, accruals, variance, extraction, adjudication, not 'payroll'"
    ]


# --- the idempotency guarantee, through the A2A server ---------------------------------------------------------


async def test_dispatch_over_a2a_still_calls_once_per_key_and_refuses_a_key_reused_for_other_input(
    conn: Any, runtime: Any, default_books: Any
) -> None:
    from countersign.engine.dispatch import DispatchConflict, dispatch_key, dispatch_once, input_digest
    from tests.support import start_default_close

    close_id = await start_default_close(conn, runtime, default_books)
    handlers = recording_handlers()
    args: dict[str, Any] = dict(close_id=close_id, task="ap_reconciliation", specialist="reconciliation")
    async with open_in_process(handlers, base_url=BASE_URL) as client:
        first = await dispatch_once(conn, client.call, attempt=1, payload={"n": 1}, actor="orchestrator", **args)
        second = await dispatch_once(conn, client.call, attempt=1, payload={"n": 1}, actor="orchestrator", **args)
        reused_key = dispatch_key(close_id, "ap_reconciliation", 2, input_digest({"n": 2}))
        await conn.execute(
            "INSERT INTO dispatch (idempotency_key, close_id, task, attempt, specialist, input_digest)"
            " VALUES (%s, %s, 'ap_reconciliation', 2, 'reconciliation', 'another input')",
            (reused_key, close_id),
        )
        with pytest.raises(DispatchConflict):
            await dispatch_once(conn, client.call, attempt=2, payload={"n": 2}, actor="orchestrator", **args)
    assert not first.reused and second.reused
    assert first.result == second.result == {"echo": {"n": 1}}
    assert handlers["reconciliation"].calls == [({"n": 1}, first.idempotency_key)]


def test_the_cli_default_header_timeout_is_the_one_in_countersign_limits() -> None:
    from countersign.bootstrap import limits
    from countersign.cli import serving

    assert serving.HEADER_READ_TIMEOUT_S == limits.HEADER_READ_TIMEOUT_S
