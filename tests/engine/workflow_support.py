"""Test-only workflows: a YAML file written by the test, handlers defined by the test, the shipped engine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from psycopg import AsyncConnection

from countersign.bootstrap.migrate import seed_policy_async
from countersign.bootstrap.settings import default_config_dir
from countersign.engine.books import load_books
from countersign.engine.runs import close_status, start_close
from countersign.policy import Policy, Workflow, load_workflow, load_workflows
from tests.support import APPROVERS, import_default_principals, post_decision


def write_workflow(folder: Path, name: str, text: str, policy: Policy) -> Workflow:
    """Write `text` as `<folder>/<name>.yaml` and load it through the same checks as a shipped workflow file."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.yaml"
    path.write_text(text, encoding="utf-8")
    return load_workflow(path, policy)


async def start_workflow_close(
    conn: AsyncConnection[Any], policy: Policy, workflow: Workflow, books: Path, *, started_by: str = "test-starter"
) -> str:
    await import_default_principals(conn)
    # The owner's `db upgrade` step for a workflow the shipped config does not have: its minimums, into the database.
    shipped = load_workflows(default_config_dir() / "workflows", policy)
    await seed_policy_async(conn, policy, {**shipped, workflow.name: workflow})
    loaded = await load_books(conn, books, loaded_by="test")
    return await start_close(
        conn,
        entity=loaded.entity,
        period=loaded.period,
        book_set_id=loaded.book_set_id,
        policy=policy,
        workflow=workflow,
        started_by=started_by,
    )


async def approve_open_gates(
    api: Any, conn: AsyncConnection[Any], close_id: str, *, tasks: set[str] | None = None
) -> list[dict[str, Any]]:
    """Every open gate of the close (of `tasks`, when given) approved by eligible people through the signed callback;
    returns those gates."""
    decided = []
    for gate in (await close_status(conn, close_id))["gates"]:
        if gate["status"] != "open" or (tasks is not None and gate["task"] not in tasks):
            continue
        excluded = {gate["prepared_by"], *gate["requested_by"]}
        eligible = [p for p in APPROVERS[gate["approver_role"]] if p not in excluded]
        assert len(eligible) >= gate["quorum"] - gate["approvals"], gate
        for principal in eligible[: gate["quorum"] - gate["approvals"]]:
            response = await post_decision(api, gate["gate_id"], principal)
            assert response.status_code == 200, response.text
        decided.append(gate)
    return decided
