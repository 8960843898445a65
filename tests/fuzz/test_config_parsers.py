"""Profile, policy, workflow, principal and books files: every parser returns a valid value or raises its own error.

Each test feeds both garbage (random data, text and bytes) and near-valid documents: a shipped config file with one
value replaced, one key dropped or one unknown key added, at the data level and at the text level.
"""

from __future__ import annotations

import csv
import io
import re
import tempfile
from collections.abc import Callable, Sequence
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any

import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from countersign.bootstrap.settings import PROJECT_ROOT
from countersign.callbacks.principals import CSV_COLUMNS, Principal, PrincipalFileError, parse_principals
from countersign.engine.books import (
    ACCOUNTS,
    AP_ITEMS,
    BANK_LINES_COLUMNS,
    GL_LINES,
    MAX_FIELD_CHARS,
    PNL_COLUMNS,
    BooksError,
    Parser,
    _amount,
    _date,
    read_rows,
)
from countersign.policy import (
    EscalationReason,
    Policy,
    PolicyError,
    Workflow,
    load_policy,
    load_workflow,
    parse_policy,
    parse_workflow,
)
from countersign.synthetic import Profile, ProfileError, load_profile, parse_profile
from tests.fuzz.strategies import FUZZ, PLAIN_DATA, TEXT, mutated

CONFIG = PROJECT_ROOT / "config"
PROFILE_TEXT = (CONFIG / "profiles" / "default.yaml").read_text(encoding="utf-8")
POLICY_TEXT = (CONFIG / "risk.yaml").read_text(encoding="utf-8")
WORKFLOW_TEXT = (CONFIG / "workflows" / "close.yaml").read_text(encoding="utf-8")
PRINCIPALS_TEXT = (CONFIG / "principals.yaml").read_text(encoding="utf-8")
PROFILE_DATA = yaml.safe_load(PROFILE_TEXT)
POLICY_DATA = yaml.safe_load(POLICY_TEXT)
WORKFLOW_DATA = yaml.safe_load(WORKFLOW_TEXT)
PRINCIPALS_DATA = {
    "principals": [
        *yaml.safe_load(PRINCIPALS_TEXT)["principals"],
        {
            "id": "alice.chen2",
            "kind": "human",
            "name": "Alice Chen",
            "roles": ["controller"],
            "identities": {
                "slack": {"team": "T01ACME", "user": "U0ALICE"},
                "teams": {"tenant": "72f988bf-tenant", "aad_object_id": "aad-alice"},
                "login": "alice@acme.example",
            },
        },
        {"id": "countersign-bot2", "kind": "machine", "name": "Bot", "roles": [], "identities": {"login": "bot2"}},
    ]
}
POLICY = load_policy(CONFIG / "risk.yaml")
LONE_SURROGATE = "\ud800"  # YAML's "\ud800" escape yields it; it cannot be encoded as UTF-8 for hashing
POLICY_WITH_SURROGATE = {**POLICY_DATA, "escalation": {**POLICY_DATA["escalation"], "rule": LONE_SURROGATE}}
WORKFLOW_WITH_SURROGATE = {
    **WORKFLOW_DATA,
    "tasks": [{**WORKFLOW_DATA["tasks"][0], "title": LONE_SURROGATE}, *WORKFLOW_DATA["tasks"][1:]],
}

# Scalars that YAML resolves specially (timestamps, huge ints, tags, anchors) or that break a flow mapping.
YAML_SCALARS = st.one_of(
    st.sampled_from(
        [
            "2026-10-01",
            "2026-13-45",
            "2026-02-30",
            "1" * 4301,
            "1e400",
            ".nan",
            ".inf",
            "0x1F",
            "0o17",
            "1_000",
            "~",
            "yes",
            "!!binary '@'",
            "!!str",
            "!!python/object:os.system x",
            "&a [*a]",
            "*undefined",
            "{",
            "[",
            "? [a, b]",
            "'",
            '"\\x"',
            "[a, {b: c}]",
            "{1: a, b: c}",
            "-1",
        ]
    ),
    st.text(max_size=20),
)
_KEY_VALUE = re.compile(r"(\w+): ([^,}\n]+)")


@st.composite
def mutated_text(draw: st.DrawFn, text: str) -> str:
    """`text` (a YAML file) with one line's value replaced, one line dropped, duplicated or inserted."""
    lines = text.splitlines()
    index = draw(st.integers(0, len(lines) - 1))
    action = draw(st.sampled_from(["value", "value", "value", "drop", "duplicate", "insert"]))
    pairs = list(_KEY_VALUE.finditer(lines[index]))
    if action == "value" and pairs:
        pair = draw(st.sampled_from(pairs))
        line = lines[index]
        lines[index] = line[: pair.start(2)] + draw(YAML_SCALARS) + line[pair.end(2) :]
    elif action == "drop":
        del lines[index]
    elif action == "duplicate":
        lines.insert(index, lines[index])
    else:
        lines.insert(index, draw(YAML_SCALARS))
    return "\n".join(lines) + "\n"


def file_contents(text: str, data: Any) -> st.SearchStrategy[bytes]:
    """Bytes of a file: garbage, the shipped text mutated, or the shipped data mutated and dumped as YAML."""

    def dumped(doc: Any) -> bytes:
        return yaml.safe_dump(doc, allow_unicode=True).encode("utf-8", "replace")

    return st.one_of(
        st.binary(max_size=100),
        TEXT.map(lambda t: t.encode("utf-8", "replace")),
        mutated_text(text).map(lambda t: t.encode("utf-8", "replace")),
        mutated(data).map(dumped),
    )


def _assert_names(exc: ProfileError | PolicyError | PrincipalFileError | BooksError, source: str = "") -> None:
    """The error names the file, a field (empty only when the offending key itself is empty) and a reason."""
    assert exc.source.startswith(source) or exc.source.endswith(source)
    assert isinstance(exc.field, str) and exc.reason


def _write(directory: str, name: str, raw: bytes) -> Path:
    path = Path(directory) / name
    path.write_bytes(raw)
    return path


# --- synthetic profiles -----------------------------------------------------------------------------------------


def _check_profile(profile: Profile) -> None:
    assert re.fullmatch(r"[A-Z]{3}", profile.currency)
    assert profile.gl_lines >= 50 and profile.customers >= 1 and profile.vendors >= 1
    assert 0 <= profile.bank_lag_days <= 7
    assert profile.entity.strip() and profile.period


@settings(FUZZ, max_examples=300)
@given(st.one_of(PLAIN_DATA, mutated(PROFILE_DATA)))
def test_parse_profile_returns_a_profile_or_raises_profile_error(data: Any) -> None:
    try:
        profile = parse_profile(data, "fuzz.yaml")
    except ProfileError as exc:
        _assert_names(exc, "fuzz.yaml")
        return
    _check_profile(profile)


@settings(FUZZ, max_examples=150)
@given(file_contents(PROFILE_TEXT, PROFILE_DATA))
@example(b"period: 2026-13-45\n")  # found: ValueError from YAML's timestamp constructor escapes
@example(b"\xff")  # found: UnicodeDecodeError escapes (only OSError is caught around read_text)
def test_load_profile_returns_a_profile_or_raises_profile_error(raw: bytes) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = _write(directory, "fuzz.yaml", raw)
        try:
            profile = load_profile(path)
        except ProfileError as exc:
            _assert_names(exc)
            return
    _check_profile(profile)


# --- policy and workflow ----------------------------------------------------------------------------------------


def _check_policy(policy: Policy) -> None:
    assert policy.tiers and len(set(policy.tier_names)) == len(policy.tiers)
    assert policy.tier(policy.escalation_tier).gate
    approver_roles = {tier.approver_role for tier in policy.tiers if tier.gate}
    assert all(policy.escalation_owner(reason) in approver_roles for reason in EscalationReason)
    for tier in policy.tiers:
        if tier.gate:
            assert tier.quorum >= 1 and tier.approver_role and tier.due_hours and tier.expire_hours
            assert tier.expire_hours > tier.due_hours


def _check_workflow(workflow: Workflow) -> None:
    assert workflow.tasks and workflow.name and workflow.title.strip()
    assert sorted(workflow.topological_order()) == sorted(workflow.task_ids)
    assert all(re.fullmatch(r"[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+", task.handler) for task in workflow.tasks)


@settings(FUZZ, max_examples=300)
@given(st.one_of(PLAIN_DATA, mutated(POLICY_DATA)))
@example(POLICY_WITH_SURROGATE)  # found: UnicodeEncodeError from canonical_digest escapes
def test_parse_policy_returns_a_policy_or_raises_policy_error(data: Any) -> None:
    try:
        policy = parse_policy(data, "fuzz-risk.yaml")
    except PolicyError as exc:
        _assert_names(exc, "fuzz-risk.yaml")
        return
    _check_policy(policy)


@settings(FUZZ, max_examples=300)
@given(st.one_of(PLAIN_DATA, mutated(WORKFLOW_DATA)))
@example(WORKFLOW_WITH_SURROGATE)  # found: UnicodeEncodeError from canonical_digest escapes
def test_parse_workflow_returns_a_workflow_or_raises_policy_error(data: Any) -> None:
    try:
        workflow = parse_workflow(data, "fuzz-workflow.yaml", POLICY)
    except PolicyError as exc:
        _assert_names(exc, "fuzz-workflow.yaml")
        return
    _check_workflow(workflow)


@settings(FUZZ, max_examples=150)
@given(file_contents(POLICY_TEXT, POLICY_DATA))
@example(b"version: 2026-02-30\n")  # found: ValueError from YAML's timestamp constructor escapes
@example(b"{[a]: b}\n")  # found: TypeError (unhashable key) from the duplicate-key check in _StrictLoader
@example(POLICY_TEXT.replace('rule: "', 'rule: "\\ud800').encode())  # found: UnicodeEncodeError (canonical_digest)
def test_load_policy_returns_a_policy_or_raises_policy_error(raw: bytes) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = _write(directory, "risk.yaml", raw)
        try:
            policy = load_policy(path)
        except PolicyError as exc:
            _assert_names(exc)
            return
    _check_policy(policy)


@settings(FUZZ, max_examples=150)
@given(file_contents(WORKFLOW_TEXT, WORKFLOW_DATA))
@example(b"version: 2026-13-45\n")  # found: ValueError from YAML's timestamp constructor escapes
@example(b"? [a]\n: b\n")  # found: TypeError (unhashable key) from the duplicate-key check in _StrictLoader
@example(WORKFLOW_TEXT.replace("workflow: close", "workflow: payment_certificate").encode())  # name != file stem
def test_load_workflow_returns_a_workflow_or_raises_policy_error(raw: bytes) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = _write(directory, "close.yaml", raw)
        try:
            workflow = load_workflow(path, POLICY)
        except PolicyError as exc:
            _assert_names(exc)
            return
    assert workflow.name == "close"
    _check_workflow(workflow)


# --- principals -------------------------------------------------------------------------------------------------

CSV_VALID_ROWS = [
    ["bob.osei", "human", "Bob Osei", "cfo;controller", "T01ACME", "U0BOB", "72f988bf-tenant", "0000-b0b", "bob@x"],
    ["carol.main", "human", "Carol Main", "cfo", "", "", "", "", ""],
    ["countersign-bot2", "machine", "Bot", "", "T01ACME", "UBOT2", "", "", ""],
]
CSV_CELLS = st.one_of(TEXT, st.sampled_from(["human", "machine", "cfo;;", ";", "T01ACME", "U0BOB", "", " "]))


@st.composite
def principal_csv(draw: st.DrawFn) -> bytes:
    header = list(CSV_COLUMNS)
    rows = [list(row) for row in draw(st.lists(st.sampled_from(CSV_VALID_ROWS), min_size=1, max_size=3))]
    action = draw(st.sampled_from(["cell", "cell", "cell", "short_row", "long_row", "header"]))
    if action == "cell":
        row = draw(st.sampled_from(rows))
        row[draw(st.integers(0, len(row) - 1))] = draw(CSV_CELLS)
    elif action == "short_row":
        row = draw(st.sampled_from(rows))
        del row[draw(st.integers(0, len(row) - 1)) :]
    elif action == "long_row":
        draw(st.sampled_from(rows)).append(draw(CSV_CELLS))
    else:
        header[draw(st.integers(0, len(header) - 1))] = draw(CSV_CELLS)
    out = io.StringIO()
    csv.writer(out).writerows([header, *rows])
    return out.getvalue().encode("utf-8", "replace")


def _check_principals(principals: list[Principal]) -> None:
    ids = [p.principal_id for p in principals]
    assert len(ids) == len(set(ids)) and all(ids)
    for principal in principals:
        assert principal.kind in ("human", "machine")
        assert principal.kind == "human" or not principal.roles


@settings(FUZZ, max_examples=200)
@given(file_contents(PRINCIPALS_TEXT, PRINCIPALS_DATA))
@example(b"principals:\n- {id: a, 1: x, b: y}\n")  # found: TypeError from sorting keys of mixed types
@example(b"principals:\n- {id: a, kind: human, name: A, identities: {1: x, slack: y}}\n")  # found: same TypeError
@example(b"principals: 2026-13-45\n")  # found: ValueError from YAML's timestamp constructor escapes
def test_principals_yaml_returns_principals_or_raises_principal_file_error(raw: bytes) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = _write(directory, "people.yaml", raw)
        try:
            principals = parse_principals(path)
        except PrincipalFileError as exc:
            _assert_names(exc, "people.yaml")
            return
    _check_principals(principals)


@settings(FUZZ, max_examples=200)
@given(st.one_of(st.binary(max_size=100), TEXT.map(lambda t: t.encode("utf-8", "replace")), principal_csv()))
@example(b"\xff")  # found: UnicodeDecodeError escapes
@example(b'"' + b"a" * 131_073 + b'"\n')  # found: _csv.Error (field larger than field limit) escapes
def test_principals_csv_returns_principals_or_raises_principal_file_error(raw: bytes) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = _write(directory, "people.csv", raw)
        try:
            principals = parse_principals(path)
        except PrincipalFileError as exc:
            _assert_names(exc, "people.csv")
            return
    _check_principals(principals)


# --- books CSV files --------------------------------------------------------------------------------------------

SPECS: dict[str, Sequence[tuple[str, str, Parser]]] = {
    "accounts.csv": ACCOUNTS.columns,
    "gl_lines.csv": GL_LINES.columns,
    "bank_lines.csv": BANK_LINES_COLUMNS,
    "ap_subledger.csv": AP_ITEMS.columns,
    "budget.csv": PNL_COLUMNS,
}
AMOUNT_TEXT = st.sampled_from(
    ["1E+26", "1e30", "NaN", "sNaN", "-Infinity", "1.005", "+1", "1_000.00", " 1.00", "1,00", "٣.٥٠", "-0.00", ""]
)
DATE_TEXT = st.sampled_from(["2026-02-30", "2026-13-01", "20261001", "2026-W40-1", "2026-10-01T00:00", "0000-01-01"])


def _valid_cell(parse: Callable[[str], object]) -> st.SearchStrategy[str]:
    if parse is _amount:
        return st.decimals(min_value=-(10**12), max_value=10**12, places=2).map(str)
    if parse is _date:
        return st.dates().map(date.isoformat)
    return st.text(max_size=20)


@st.composite
def books_csv(draw: st.DrawFn, columns: Sequence[tuple[str, str, Parser]]) -> bytes:
    header = [name for name, _, _ in columns]
    rows = [[draw(_valid_cell(parse)) for _, _, parse in columns] for _ in range(draw(st.integers(0, 3)))]
    action = draw(st.sampled_from(["none", "cell", "cell", "cell", "row_length", "header"]))
    if action == "cell" and rows:
        row = draw(st.sampled_from(rows))
        row[draw(st.integers(0, len(row) - 1))] = draw(st.one_of(TEXT, AMOUNT_TEXT, DATE_TEXT))
    elif action == "row_length" and rows:
        row = draw(st.sampled_from(rows))
        if draw(st.booleans()):
            row.pop()
        else:
            row.append(draw(TEXT))
    elif action == "header":
        header[draw(st.integers(0, len(header) - 1))] = draw(TEXT)
    out = io.StringIO()
    csv.writer(out).writerows([header, *rows])
    return out.getvalue().encode("utf-8", "replace")


@st.composite
def books_file(draw: st.DrawFn) -> tuple[str, bytes]:
    name = draw(st.sampled_from(sorted(SPECS)))
    raw = draw(
        st.one_of(st.binary(max_size=100), TEXT.map(lambda t: t.encode("utf-8", "replace")), books_csv(SPECS[name]))
    )
    return name, raw


@settings(FUZZ, max_examples=300)
@given(books_file())
@example(("budget.csv", b"account,amount\r\n4000,1E+26\r\n"))  # found: decimal.InvalidOperation escapes
@example(("budget.csv", b"account,amount\r\n4000,\xff\r\n"))  # found: UnicodeDecodeError escapes
@example(("budget.csv", b'account,amount\r\n"' + b"a" * 131_073 + b'",1.00\r\n'))  # found: _csv.Error escapes
def test_read_rows_yields_typed_rows_or_raises_books_error(file: tuple[str, bytes]) -> None:
    name, raw = file
    columns = SPECS[name]
    with tempfile.TemporaryDirectory() as directory:
        path = _write(directory, name, raw)
        try:
            rows = list(read_rows(path, columns))
        except BooksError as exc:
            _assert_names(exc, name)
            return
    for row in rows:
        assert len(row) == len(columns)
        for value, (_, _, parse) in zip(row, columns, strict=True):
            if parse is _amount:
                assert isinstance(value, Decimal) and value.is_finite() and value.as_tuple().exponent >= -2
            elif parse is _date:
                assert isinstance(value, date)
            else:
                assert isinstance(value, str) and len(value) <= MAX_FIELD_CHARS
