"""Per-request bounds for the HTTP processes: body limits per door, and uvicorn's concurrency cap.

Bodies are refused while they are read (`engine.http_limits.BodyLimitMiddleware`), so a door's limit is also the most
one request can make the server hold for it; the concurrency cap bounds how many such requests are in flight.
"""

from __future__ import annotations

from callbacks.http import MAX_BODY_BYTES as CALLBACK_MAX_BODY_BYTES
from engine.http_limits import KIB, BodyLimit

SLACK_MAX_BODY_BYTES = 256 * KIB
"""Slack sends events, commands and interactivity form-encoded to one URL. The largest is a `block_actions` payload,
which echoes the whole message clicked: at most 50 blocks and 40,000 characters of text (Slack refuses blocks past
about 13,000 characters in practice), so well under 100 KB of JSON, and under 256 KiB even after URL-encoding
triples its punctuation. Countersign's own gate cards, the only messages with our buttons, are a few KB."""

TEAMS_MAX_BODY_BYTES = 256 * KIB
"""A Bot Framework activity (message or Adaptive Card invoke); Teams caps a message at about 100 KB. Same figure as
`bot.teams.MAX_BODY_BYTES`, not imported so that a Slack-only server does not load the Bot Framework SDK."""

DEFAULT_MAX_BODY_BYTES = 64 * KIB
"""Any other path (read APIs, health, unknown URLs): none takes a body; the cap keeps a stray POST cheap."""

DOOR_BODY_LIMITS = (
    BodyLimit("/callbacks/", CALLBACK_MAX_BODY_BYTES),  # 8 KiB: a decision is four short strings
    BodyLimit("/slack/", SLACK_MAX_BODY_BYTES),
    BodyLimit("/api/messages", TEAMS_MAX_BODY_BYTES),
)

SERVE_MAX_CONCURRENCY = 200
"""uvicorn's `limit_concurrency` for `countersign serve`: connections and tasks beyond it get 503 at once. With the
largest door at 256 KiB, bodies in flight stay under 50 MiB; the callback bench runs 32 clients."""

SPECIALISTS_MAX_CONCURRENCY = 64
"""uvicorn's `limit_concurrency` for `countersign specialists serve` (bodies up to 16 MiB each)."""
