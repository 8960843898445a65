"""Per-request bounds for the HTTP processes: body limits per door, head limits and timeouts, requests in flight.

Bodies are refused while they are read (`countersign.http_edge.limits.BodyLimitMiddleware`), so a door's limit is also
the most
one request can make the server hold for it; the concurrency cap bounds how many such requests are in flight.
"""

from __future__ import annotations

from countersign.http_edge.limits import KIB, BodyLimit
from countersign.web.callbacks import MAX_BODY_BYTES as CALLBACK_MAX_BODY_BYTES

SLACK_MAX_BODY_BYTES = 256 * KIB
"""Slack sends events, commands and interactivity form-encoded to one URL. The largest is a `block_actions` payload,
which echoes the whole message clicked: at most 50 blocks and 40,000 characters of text (Slack refuses blocks past
about 13,000 characters in practice), so well under 100 KB of JSON, and under 256 KiB even after URL-encoding
triples its punctuation. Countersign's own gate cards, the only messages with our buttons, are a few KB."""

TEAMS_MAX_BODY_BYTES = 256 * KIB
"""A Bot Framework activity (message or Adaptive Card invoke); Teams caps a message at about 100 KB. Same figure as
`countersign.bot.teams.MAX_BODY_BYTES`, not imported so that a Slack-only server does not load the Bot Framework SDK."""

DEFAULT_MAX_BODY_BYTES = 64 * KIB
"""Any other path (read APIs, health, unknown URLs): none takes a body; the cap keeps a stray POST cheap."""

DOOR_BODY_LIMITS = (
    BodyLimit("/callbacks/", CALLBACK_MAX_BODY_BYTES),  # 8 KiB: a decision is four short strings
    BodyLimit("/slack/", SLACK_MAX_BODY_BYTES),
    BodyLimit("/api/messages", TEAMS_MAX_BODY_BYTES),
)

SERVE_MAX_CONCURRENCY = 200
"""Requests in flight for `countersign serve` (`countersign.http_edge.protocol`): a request beyond it gets 503 at once.
Idle
connections do not count (uvicorn's own `limit_concurrency` counted them, so silent sockets could fill it). With the
largest door at 256 KiB, bodies in flight stay under 50 MiB; the callback bench runs 32 clients."""

SPECIALISTS_MAX_CONCURRENCY = 64
"""Requests in flight for `countersign specialists serve` (bodies up to 16 MiB each)."""

MAX_HEADER_BYTES = 32 * KIB
"""The request line and headers of one request, at every door. The largest real head is a Bot Framework invoke
(a JWT of 1 to 2 KB in `Authorization`) or a person's signed read (three short headers); nginx's default
`large_client_header_buffers 4 8k` holds 32 KiB, Node's 16 KiB. Past it: 431 and the connection closed, the rest
never read (`countersign.http_edge.protocol`, ADR 0023)."""

MAX_HEADER_COUNT = 100
"""Header fields in one request, at every door (Apache's `LimitRequestFields` default). Past it: 431."""

HEADER_READ_TIMEOUT_S = 10.0
"""A connection's request head must be complete this long after the connection opened or after its last response,
or the connection is closed: a socket that sends nothing, or dribbles its head, holds nothing for longer."""

BODY_READ_TIMEOUT_S = 30.0
"""A request's body must be complete this long after its head (the largest, 16 MiB to the specialists, takes well
under a second on any link they are deployed on), or the connection is closed."""

KEEP_ALIVE_TIMEOUT_S = 5
"""uvicorn's `timeout_keep_alive`: an idle kept-alive connection is closed after this many seconds (its default)."""
