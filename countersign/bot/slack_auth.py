"""Bolt's single-workspace authorization, with its `auth.test` call made once however many requests wait for it.

Bolt checks the bot token with `auth.test` on the first request that needs it and caches the answer, but every request
arriving before that answer makes its own call: a burst of clicks on a freshly started process sends one `auth.test`
per click to Slack, and a Slack that is slow to answer them (or rate-limits them) turns the burst into 500s. Here the
first caller makes the one call and the others wait for it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from slack_bolt.async_app import AsyncApp
from slack_bolt.middleware.authorization.async_internals import _is_no_auth_required
from slack_bolt.middleware.authorization.async_single_team_authorization import AsyncSingleTeamAuthorization
from slack_bolt.middleware.authorization.internals import _is_no_auth_test_call_required
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse
from slack_sdk.errors import SlackApiError


class SingleFlightAuthorization(AsyncSingleTeamAuthorization):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._first_call = asyncio.Lock()

    async def async_process(
        self,
        *,
        req: AsyncBoltRequest,
        resp: BoltResponse,
        next: Callable[[], Awaitable[BoltResponse]],  # bolt's own keyword
    ) -> BoltResponse:
        if self.auth_test_result is None and not _is_no_auth_required(req) and not _is_no_auth_test_call_required(req):
            async with self._first_call:
                # A refused token is left to bolt's own path below, which calls again and answers it its way.
                if self.auth_test_result is None and req.context.client is not None:
                    with contextlib.suppress(SlackApiError):
                        self.auth_test_result = await req.context.client.auth_test()
        return await super().async_process(req=req, resp=resp, next=next)


def single_flight_authorization(app: AsyncApp) -> int:
    """Replace the app's single-workspace authorization with the single-flight one; returns how many were replaced."""
    replaced = 0
    middleware = app._async_middleware_list
    for index, step in enumerate(middleware):
        if type(step) is AsyncSingleTeamAuthorization:
            middleware[index] = SingleFlightAuthorization(base_logger=app.logger)
            replaced += 1
    return replaced
