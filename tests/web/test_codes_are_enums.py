"""The codes the doors put on the wire are StrEnums of `countersign.states`, their words unchanged: the `error` of an
HTTP refusal (`ErrorCode`, beside a decision's `RefusalCode`) and why a caller may not run a command
(`AccessReason`). No door writes a bare string where a code goes."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import countersign
from countersign.policy.command_roles import READ_CLOSE, check_access
from countersign.policy.policy_loader import load_policy
from countersign.states import AccessReason, ErrorCode

PACKAGE = Path(countersign.__file__).parent
DOORS = ("web", "bot", "board")


def test_the_error_codes_keep_their_words_on_the_wire() -> None:
    assert {code.value for code in ErrorCode} == {
        "unauthenticated",
        "forbidden",
        "close_not_found",
        "gate_not_found",
        "body_too_large",
        "invalid_body",
        "signature_rejected",
        "invalid_activity",
        "unauthorized",
        "tenant_not_allowed",
        "malformed_slack_request",
    }


def test_the_access_reasons_keep_their_words() -> None:
    assert {reason.value for reason in AccessReason} == {
        "allowed",
        "unknown_principal",
        "machine_principal",
        "inactive_principal",
        "missing_role",
    }


@pytest.mark.parametrize(
    ("facts", "reason"),
    [
        ({"known": False, "human": True, "active": True, "roles": ()}, AccessReason.UNKNOWN_PRINCIPAL),
        ({"known": True, "human": False, "active": True, "roles": ()}, AccessReason.MACHINE_PRINCIPAL),
        ({"known": True, "human": True, "active": False, "roles": ()}, AccessReason.INACTIVE_PRINCIPAL),
        ({"known": True, "human": True, "active": True, "roles": ("nobody",)}, AccessReason.MISSING_ROLE),
        ({"known": True, "human": True, "active": True, "roles": ("auditor",)}, AccessReason.ALLOWED),
    ],
)
def test_check_access_answers_with_an_access_reason(facts: dict[str, object], reason: AccessReason) -> None:
    from countersign.bootstrap.settings import PROJECT_ROOT

    policy = load_policy(PROJECT_ROOT / "config" / "risk.yaml")
    decision = check_access(READ_CLOSE, policy, **facts)  # type: ignore[arg-type]
    assert decision.reason is reason


def bare_codes(source: str) -> list[int]:
    """Lines where a door writes a code as a bare string: `{"error": "..."}` or `error(<status>, "...", ...)`."""
    lines: list[int] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                is_code = isinstance(key, ast.Constant) and key.value in ("error", "code")
                if is_code and isinstance(value, ast.Constant) and isinstance(value.value, str):
                    lines.append(node.lineno)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "error":
            if len(node.args) > 1 and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str):
                lines.append(node.lineno)
        elif isinstance(node, ast.Tuple) and len(node.elts) == 3:  # an error table's (status, code, detail)
            status, code = node.elts[0], node.elts[1]
            is_refusal = isinstance(status, ast.Constant) and isinstance(status.value, int) and status.value >= 400
            if is_refusal and isinstance(code, ast.Constant) and isinstance(code.value, str):
                lines.append(node.lineno)
    return lines


@pytest.mark.parametrize("door", DOORS)
def test_no_door_writes_a_bare_error_code(door: str) -> None:
    files = sorted((PACKAGE / door).rglob("*.py"))
    assert files
    found = {
        path.relative_to(PACKAGE).as_posix(): lines
        for path in files
        if (lines := bare_codes(path.read_text(encoding="utf-8")))
    }
    assert found == {}, f"bare error codes (use countersign.states.ErrorCode): {found}"


@pytest.mark.parametrize(
    "smuggled",
    [
        'JSONResponse({"error": "body_too_large"}, status_code=413)',
        'error(404, "gate_not_found", "no such gate")',
        'lambda exc: (404, "close_not_found", str(exc))',
    ],
)
def test_negative_control_a_bare_code_is_found(smuggled: str) -> None:
    assert bare_codes(smuggled)
    assert not bare_codes(
        smuggled.replace('"body_too_large"', "ErrorCode.BODY_TOO_LARGE")
        .replace('"gate_not_found"', "ErrorCode.GATE_NOT_FOUND")
        .replace('"close_not_found"', "ErrorCode.CLOSE_NOT_FOUND")
    )
