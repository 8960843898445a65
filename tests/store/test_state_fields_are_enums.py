"""A class field named for a state (status, state, lifecycle, kind, decision, platform, channel, outcome, proof) is
typed with an Enum of `countersign.states`, not `str`, unless it is listed here with the reason it is not a stored
state. Read from the source (no import), so a field added as `str` fails here before it reaches a card or a row."""

from __future__ import annotations

import ast
from pathlib import Path

import countersign

STATE_NAMES = frozenset({"status", "state", "lifecycle", "kind", "decision", "platform", "channel", "outcome", "proof"})

# module path (from the package root) and `Class.field`: why the value is text and not a stored state's Enum
NOT_STORED_STATES = {
    "audit/decision_proofs.py:DecisionKey.kind": "a bundle file's key type (ed25519 | passkey), read from JSON",
    "bot/slack_forms.py:DecisionForm.channel": "a Slack channel id: an address",
    "callbacks/decision_writer.py:DecisionRequest.decision": "the door's word, refused by the writer when unknown",
    "cards/certificates.py:Hold.kind": "a certificate hold's kind from the adjudication summary, shown in words",
    "cards/model.py:DecisionLine.channel": "the channel's word as the status JSON gives it, or empty when absent",
    "cards/targets.py:ChannelTarget.channel": "a Slack channel id or a Teams conversation id: an address",
    "delivery/worker.py:_Rendered.state": "a card's state key (status:approvals:rejections), not one word",
    "engine/workflows/close/bank_pages.py:DecidedLines.state": "a bank line's match class derived by the query",
    "evals/certificates.py:DuplicateKindScore.kind": "an evaluation's label for a seeded duplicate",
    "evals/certificates.py:TrickyScore.kind": "an evaluation's label for a seeded tricky record",
    "evals/gates.py:GateSpec.kind": "an evaluation case's label",
    "evals/retrieval.py:LabelledQuery.kind": "an evaluation query's label",
    "specialists/adjudication.py:Hold.kind": "a hold's kind in a specialist's answer (JSON), checked by its schema",
    "store/bank_lines.py:DecidedRow.state": "a bank line's match class derived by the query, not a column",
    "store/close_inputs.py:_StoredTaskLine.status": "the raw row, read back at once as a TaskState",
    "store/outbox.py:OutboxMessage.channel": "a Slack channel id or a Teams conversation id: an address",
    "store/outbox.py:PostedCard.channel": "a Slack channel id or a Teams conversation id: an address",
    "store/outbox.py:FailedDelivery.channel": "a Slack channel id or a Teams conversation id: an address",
    "store/trace.py:ClaimedEvent.kind": "the queued word: the sealer hashes what is stored",
    "store/trace.py:StoredEventText.kind": "the stored word: the verifier hashes what is stored",
    "synthetic/construction_third_style.py:_Instruction.kind": "the generator's variation kind",
    "synthetic/profile.py:BankFeedMismatch.kind": "a profile file's scenario name",
    "synthetic/profile.py:IntercompanyMismatch.kind": "a profile file's scenario name",
    "web/callbacks.py:DecisionLine.decision": "the signed callback's response body: a documented wire schema",
    "web/callbacks.py:DecisionLine.channel": "the signed callback's response body: a documented wire schema",
    "web/callbacks.py:GateStateBody.status": "the signed callback's response body: a documented wire schema",
}


# the store's function parameters named for a state and typed `str`: `function(parameter)`, and why
STORE_PARAMETERS_NOT_STATES = {
    "insert_message(channel)": "a Slack channel id or a Teams conversation id: an address",
    "posted_message_id(channel)": "a Slack channel id or a Teams conversation id: an address",
}


def _is_text(annotation: ast.expr | None) -> bool:
    if annotation is None:
        return False
    return ast.unparse(annotation).strip("\"'") in ("str", "str | None", "Optional[str]")


def state_fields_typed_text(root: Path) -> set[str]:
    """Every `module:Class.field` under `root` whose field is named for a state and annotated `str`."""
    found = set()
    for path in sorted(root.rglob("*.py")):
        if "migrations" in path.relative_to(root).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ClassDef):
                continue
            for statement in node.body:
                if (
                    isinstance(statement, ast.AnnAssign)
                    and isinstance(statement.target, ast.Name)
                    and statement.target.id in STATE_NAMES
                    and _is_text(statement.annotation)
                ):
                    found.add(f"{path.relative_to(root).as_posix()}:{node.name}.{statement.target.id}")
    return found


def store_parameters_typed_text(root: Path) -> set[str]:
    """Every `function(parameter)` of the store's modules whose parameter is named for a state and annotated `str`."""
    found = set()
    for path in sorted(root.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                for arg in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs):
                    if arg.arg in STATE_NAMES and _is_text(arg.annotation):
                        found.add(f"{node.name}({arg.arg})")
    return found


PACKAGE = Path(countersign.__file__).parent


def test_every_state_field_is_an_enum_or_says_why_not() -> None:
    unexplained = state_fields_typed_text(PACKAGE) - set(NOT_STORED_STATES)
    assert not unexplained, f"state fields typed str (use an Enum of countersign.states, or say why): {unexplained}"


def test_every_exception_still_exists() -> None:
    """An exception whose field became an Enum (or went) leaves the list, so the list never hides a new field."""
    stale = set(NOT_STORED_STATES) - state_fields_typed_text(PACKAGE)
    assert not stale, f"listed but no longer typed str: {stale}"


def test_the_stores_functions_take_the_enum() -> None:
    """What a caller hands the store to write or to match is the Enum; mypy then holds every caller to it."""
    assert store_parameters_typed_text(PACKAGE / "store") == set(STORE_PARAMETERS_NOT_STATES)


def test_the_scan_finds_a_store_parameter_typed_str(tmp_path: Path) -> None:
    (tmp_path / "outbox.py").write_text(
        "async def insert_message(conn, *, platform: str, kind: OutboxKind, channel: str) -> None: ...\n",
        encoding="utf-8",
    )
    assert store_parameters_typed_text(tmp_path) == {"insert_message(platform)", "insert_message(channel)"}


def test_the_scan_finds_a_state_field_typed_str(tmp_path: Path) -> None:
    """The negative control: a card model whose status is `str` again is found, and an Enum-typed one is not."""
    (tmp_path / "cards").mkdir()
    (tmp_path / "cards" / "model.py").write_text(
        "from dataclasses import dataclass\n\n"
        "@dataclass(frozen=True)\nclass GateCard:\n    status: str\n    kind: GateKind\n    lifecycle: 'str | None'\n",
        encoding="utf-8",
    )
    assert state_fields_typed_text(tmp_path) == {"cards/model.py:GateCard.status", "cards/model.py:GateCard.lifecycle"}
