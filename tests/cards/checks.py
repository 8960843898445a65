"""Checks every rendered card must pass: Slack's limits and slack_sdk's validation; the Adaptive Card schema."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft6Validator
from slack_sdk.models.blocks import Block

from countersign.cards import teams

SCHEMA_PATH = Path(__file__).resolve().parents[1] / "data" / "adaptive-card-1.5.schema.json"
_SLACK_DATE_TOKEN = re.compile(r"<!date\^\d+\^\{date_short_pretty\} at \{time\}\|[^<>|]+>")


def utf16_units(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


@cache
def adaptive_card_validator() -> Draft6Validator:
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return Draft6Validator(schema)


def walk(value: Any) -> Iterator[dict[str, Any]]:
    """Every JSON object inside `value`, depth first."""
    if isinstance(value, dict):
        yield value
        for item in value.values():
            yield from walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from walk(item)


def assert_slack_message_valid(message: dict[str, Any]) -> None:
    assert set(message) == {"text", "blocks"}
    assert 0 < utf16_units(message["text"]) <= 3000
    blocks = message["blocks"]
    assert 0 < len(blocks) <= 50
    for block in blocks:
        parsed = Block.parse(block)
        assert parsed is not None, f"slack_sdk does not know block type {block.get('type')!r}"
        parsed.validate_json()
        assert parsed.to_dict() == block, "slack_sdk dropped or changed an attribute"
        assert_block_limits(block)
    for obj in walk(blocks):
        if obj.get("type") == "mrkdwn":
            assert_mrkdwn_escaped(obj["text"])


def assert_block_limits(block: dict[str, Any]) -> None:
    if "block_id" in block:
        assert utf16_units(block["block_id"]) <= 255
    kind = block["type"]
    if kind == "header":
        assert utf16_units(block["text"]["text"]) <= 150
    elif kind == "section":
        if "text" in block:
            assert utf16_units(block["text"]["text"]) <= 3000
        assert len(block.get("fields", [])) <= 10
        for field in block.get("fields", []):
            assert utf16_units(field["text"]) <= 2000
    elif kind == "context":
        assert len(block["elements"]) <= 10
    elif kind == "actions":
        assert len(block["elements"]) <= 25
        for button in block["elements"]:
            assert utf16_units(button["text"]["text"]) <= 75
            assert ("value" in button) != ("url" in button), "a button either carries a value or links"
            assert utf16_units(button.get("value", "")) <= 2000
            assert utf16_units(button.get("url", "")) <= 3000
            assert utf16_units(button["action_id"]) <= 255


def assert_mrkdwn_escaped(text: str) -> None:
    """Outside our own date tokens, no raw < or > and no & that does not start an entity."""
    rest = _SLACK_DATE_TOKEN.sub("", text)
    assert "<" not in rest and ">" not in rest, rest
    assert re.search(r"&(?!amp;|lt;|gt;)", rest) is None, rest


def assert_adaptive_card_valid(card: dict[str, Any]) -> None:
    adaptive_card_validator().validate(card)
    assert card["type"] == "AdaptiveCard"
    assert card["version"] == "1.5"
    assert card["$schema"] == "http://adaptivecards.io/schemas/adaptive-card.json"
    assert len(json.dumps(card, ensure_ascii=False).encode("utf-8")) <= teams.TEAMS_CARD_BYTES


def slack_actions(message: dict[str, Any]) -> list[dict[str, Any]]:
    return [b for b in message["blocks"] if b["type"] == "actions"]


def teams_action_objects(card: dict[str, Any]) -> list[dict[str, Any]]:
    return [o for o in walk(card) if str(o.get("type", "")).startswith("Action.")]
