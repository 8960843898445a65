"""The shape of a signed Slack body, checked before slack-bolt sees it.

Bolt assumes Slack's shapes (`"actions"` is a list of objects, `"user"` an id or an object with a string `id`, ...)
and raises deep inside its request parsing when a signed body breaks them. A signed body proves only who sent it, not
that it is well formed, so this names the first field that breaks the shape and the door answers 400. Pure.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qsl

# Scalars bolt or the adapters read as ids or text; each must be a string (or absent / null).
STRING_FIELDS = frozenset(
    {
        "type",
        "team_id",
        "user_id",
        "channel_id",
        "enterprise_id",
        "event_id",
        "api_app_id",
        "token",
        "trigger_id",
        "response_url",
        "command",
        "thread_ts",
        "function_execution_id",
        "bot_access_token",
        "app_installed_team_id",
        "user_team",
        "context_team_id",
        "context_enterprise_id",
        "action_id",
        "block_id",
        "value",
        "action_ts",
        "ts",
        "event_ts",
        "message_ts",
        "id",
    }
)
# References: an id string, or an object whose `id` (and team or enterprise id) are strings.
REFERENCE_FIELDS = frozenset({"team", "user", "channel", "enterprise"})
# Nested objects bolt looks inside.
OBJECT_FIELDS = frozenset(
    {"event", "view", "message", "previous_message", "item", "assistant_thread", "function_data", "container"}
)
# Lists whose every element must be an object.
OBJECT_LIST_FIELDS = frozenset({"authorizations", "actions"})
MAX_DEPTH = 6


def parse_like_bolt(raw: bytes, content_type: str | None) -> Any:
    """The body as slack-bolt will parse it (`slack_bolt.request.internals.parse_body`); ValueError if unparsable."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("body: is not UTF-8") from None
    if not text:
        return {}
    try:
        if content_type == "application/json" or text.startswith("{"):
            return json.loads(text)
        if "payload" in text:
            payload = dict(parse_qsl(text, keep_blank_values=True)).get("payload")
            return {} if payload is None else json.loads(payload)
    except (ValueError, RecursionError):
        raise ValueError("body: is not valid JSON") from None
    return dict(parse_qsl(text, keep_blank_values=True))


def slack_body_problem(raw: bytes, content_type: str | None) -> str | None:
    """None when bolt can handle the body; otherwise `field: reason` naming the first field out of shape."""
    try:
        body = parse_like_bolt(raw, content_type)
    except ValueError as exc:
        return str(exc)
    if not isinstance(body, dict):
        return "body: must be a JSON object"
    return _object_problem(body, "", 0)


def _object_problem(node: dict[Any, Any], where: str, depth: int) -> str | None:
    if depth > MAX_DEPTH:
        return None  # bolt looks no deeper than this
    for key, value in node.items():
        if value is None or not isinstance(key, str):
            continue
        name = f"{where}{key}"
        if key in STRING_FIELDS and not isinstance(value, str):
            return f"{name}: must be a string"
        if key in REFERENCE_FIELDS and not isinstance(value, str):
            if not isinstance(value, dict):
                return f"{name}: must be an id or an object"
            for inner in ("id", "team_id", "enterprise_id"):
                if value.get(inner) is not None and not isinstance(value[inner], str):
                    return f"{name}.{inner}: must be a string"
        if key in OBJECT_FIELDS:
            if not isinstance(value, dict):
                return f"{name}: must be an object"
            problem = _object_problem(value, f"{name}.", depth + 1)
            if problem:
                return problem
        if key in OBJECT_LIST_FIELDS:
            if not isinstance(value, list):
                return f"{name}: must be a list of objects"
            for index, item in enumerate(value):
                if not isinstance(item, dict):
                    return f"{name}[{index}]: must be an object"
                problem = _object_problem(item, f"{name}[{index}].", depth + 1)
                if problem:
                    return problem
    return None
