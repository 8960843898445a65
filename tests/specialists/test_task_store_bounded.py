"""A holder of the specialists' token cannot grow the process by sending: finished and refused calls are forgotten.

The attack: 200 authenticated SendMessage calls of 256 KiB each (50 MiB in all) that complete, 100 that the handler
refuses as bad input (a failed task), and 100 without the idempotency key (a task waiting for input, ADR 0037). Every
call gets its answer; afterwards the process's RSS is less than 16 MB above what it was (a store that keeps every
message keeps all 50 MiB, as protobufs outside the Python heap: 85 MB measured), and each specialist's task store
holds at most its bound of finished tasks, none of them failed, and of waiting ones.
"""

from __future__ import annotations

import gc
import json
import os
from typing import Any

import httpx
from a2a.helpers import new_data_part, new_message
from a2a.types import Role
from google.protobuf.json_format import MessageToDict

from countersign.specialists.errors import SpecialistInputError
from countersign.specialists.server import build_specialists_app
from countersign.specialists.task_store import (
    MAX_FINISHED_BYTES,
    MAX_FINISHED_TASKS,
    MAX_WAITING_BYTES,
    MAX_WAITING_TASKS,
    BoundedTaskStore,
)
from tests.http_edge.test_body_limits import rss_bytes

TOKEN = "specialist-token-for-tests"
HEADERS = {"authorization": f"Bearer {TOKEN}", "a2a-version": "1.0", "content-type": "application/json"}
PAYLOAD_BYTES = 256 * 1024
RETAINED_BUDGET_BYTES = 16 * 1000 * 1000


def _send(note: str, *, key: str | None) -> bytes:
    message = new_message([new_data_part({"kind": "bank", "note": note})], role=Role.ROLE_USER)
    if key is not None:
        message.metadata.update({"idempotency_key": key})
    request = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": MessageToDict(message)}}
    return json.dumps(request).encode()


def _echo_length(payload: dict[str, Any]) -> dict[str, Any]:
    return {"note_chars": len(payload["note"])}


def _refuse(payload: dict[str, Any]) -> dict[str, Any]:
    raise SpecialistInputError("note", "not a bank line")


def _outcome(answer: dict[str, Any]) -> str | int:
    """Only the outcome is kept: the answer echoes the request, and holding it would count against the budget."""
    if "error" in answer:
        return int(answer["error"]["code"])
    return str(answer["result"]["task"]["status"]["state"])


async def test_many_large_calls_leave_a_bounded_task_store() -> None:
    app = build_specialists_app(
        "http://specialists.test", {"reconciliation": _echo_length, "accruals": _refuse}, token=TOKEN
    )
    note = "x" * PAYLOAD_BYTES
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://specialists.test") as http:
        warm = await http.post("/reconciliation", content=_send("warm", key="k0"), headers=HEADERS)
        assert warm.status_code == 200, warm.text
        gc.collect()
        before = rss_bytes(os.getpid())
        answers = []
        for index in range(200):
            body = _send(note, key=f"ok-{index}")
            answers.append(_outcome((await http.post("/reconciliation", content=body, headers=HEADERS)).json()))
        refused = []
        for index in range(100):
            body = _send(note, key=f"bad-{index}")
            refused.append(_outcome((await http.post("/accruals", content=body, headers=HEADERS)).json()))
        invalid = []
        for _ in range(100):
            answer = await http.post("/accruals", content=_send(note, key=None), headers=HEADERS)
            invalid.append(_outcome(answer.json()))
        del body
        gc.collect()
        after = rss_bytes(os.getpid())
    assert answers == ["TASK_STATE_COMPLETED"] * 200
    assert refused == ["TASK_STATE_FAILED"] * 100
    assert invalid == ["TASK_STATE_INPUT_REQUIRED"] * 100  # a task saying what is needed; the handler never ran
    assert after - before < RETAINED_BUDGET_BYTES, f"the specialists kept {after - before} bytes after the calls"
    stores: dict[str, BoundedTaskStore] = app.state.task_stores
    assert stores["reconciliation"].task_count <= MAX_FINISHED_TASKS
    assert stores["reconciliation"].finished_bytes <= MAX_FINISHED_BYTES
    waiting = stores["accruals"]
    assert waiting.task_count == waiting.waiting_count  # failed calls leave nothing behind
    assert 0 < waiting.waiting_count <= MAX_WAITING_TASKS
    assert waiting.waiting_count * PAYLOAD_BYTES <= MAX_WAITING_BYTES


async def test_the_last_finished_task_can_still_be_read_back_without_its_request() -> None:
    app = build_specialists_app("http://specialists.test", {"reconciliation": _echo_length}, token=TOKEN)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://specialists.test") as http:
        sent = (await http.post("/reconciliation", content=_send("hello", key="k1"), headers=HEADERS)).json()
        task_id = sent["result"]["task"]["id"]
        get = {"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": task_id}}
        read = (await http.post("/reconciliation", content=json.dumps(get).encode(), headers=HEADERS)).json()
    assert read["result"]["status"]["state"] == "TASK_STATE_COMPLETED", read
    assert read["result"]["artifacts"][0]["parts"][0]["data"] == {"note_chars": 5}
    assert "history" not in read["result"] or read["result"]["history"] == []
