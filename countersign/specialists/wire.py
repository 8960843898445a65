"""Shared conventions for specialist data carried over A2A data parts.

A2A data parts are protobuf `Value`s, which store every number as a double: an integer count sent as `17`
arrives as `17.0`. Money never travels as a number (always a "1234.50" string), so the only numbers on the
wire are counts and small integral settings, and turning integral floats back into ints is lossless for them.
"""

import json
from typing import Any

IDEMPOTENCY_KEY_FIELD = "idempotency_key"


def restore_integers(value: Any) -> Any:
    """Return `value` with every integral float (at any depth) turned back into an int."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: restore_integers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [restore_integers(item) for item in value]
    return value


CASH_LINE_FIELDS = ("id", "date", "amount", "reference")
"""A bank reconciliation page's lines travel as one JSON text of rows in this field order (docs/adr/0041): the A2A
SDK converts and validates a data part node by node, so a page of 2,000 lines as objects is about 18,000 protobuf
values and as one text a single one, at the same byte size."""


def pack_rows(rows: list[dict[str, str]]) -> str:
    """Lines as one JSON text of rows, each a list of CASH_LINE_FIELDS in order."""
    return json.dumps([[row[field] for field in CASH_LINE_FIELDS] for row in rows], ensure_ascii=False)


def unpack_rows(text: object) -> list[dict[str, Any]]:
    """The lines `pack_rows` packed, as objects; ValueError naming what is wrong when the text is not such rows."""
    if not isinstance(text, str):
        raise ValueError(f"expected a JSON text of rows, got {type(text).__name__}")
    rows = json.loads(text)
    if not isinstance(rows, list) or not all(
        isinstance(row, list) and len(row) == len(CASH_LINE_FIELDS) for row in rows
    ):
        raise ValueError(f"expected a list of [{', '.join(CASH_LINE_FIELDS)}] rows")
    return [dict(zip(CASH_LINE_FIELDS, row, strict=True)) for row in rows]
