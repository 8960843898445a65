"""`POST /slack/events`: the Slack door's one route, in front of the bolt app (countersign/bot/slack.py).

The signature is checked here, over the raw body, before bolt sees it (countersign/bot/slack_signature.py); a signed
body out of
the shape bolt can handle is refused here too (countersign/bot/slack_shape.py), so neither becomes a 500.
"""

from __future__ import annotations

import logging

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from slack_bolt.adapter.fastapi.async_handler import AsyncSlackRequestHandler

from countersign.bot.slack import build_slack_app
from countersign.bot.slack_shape import slack_body_problem
from countersign.bot.slack_signature import SlackSignatureRejected, verify_slack_request
from countersign.bot.wiring import ChatWiring
from countersign.states import ErrorCode

log = logging.getLogger("countersign.bootstrap.app")


def build_slack_router(*, token: str, signing_secret: str, api_url: str | None, wiring: ChatWiring) -> APIRouter:
    handler = AsyncSlackRequestHandler(
        build_slack_app(token=token, signing_secret=signing_secret, api_url=api_url, wiring=wiring)
    )
    router = APIRouter()

    @router.post("/slack/events")
    async def slack_events(request: Request) -> Response:
        raw = await request.body()
        try:
            verify_slack_request(signing_secret, request.headers, raw)
        except SlackSignatureRejected as exc:
            return JSONResponse({"error": ErrorCode.SIGNATURE_REJECTED, "detail": exc.reason}, status_code=401)
        problem = slack_body_problem(raw, request.headers.get("content-type"))
        if problem is not None:  # signed, so from Slack's side, but not in a shape bolt can handle
            log.info("refused a signed Slack body out of shape: %s", problem)
            return JSONResponse({"error": ErrorCode.MALFORMED_SLACK_REQUEST, "detail": problem}, status_code=400)
        try:
            return await handler.handle(request)
        except Exception:  # a signed but malformed payload: bolt cannot parse it
            log.exception("Slack sent a request bolt could not handle")
            return JSONResponse({"error": ErrorCode.MALFORMED_SLACK_REQUEST}, status_code=400)

    return router
