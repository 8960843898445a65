"""A burst of clicks on a freshly started process checks the bot token with Slack once, not once per click.

Seen as a flaky click storm (`tests/bot/test_click_storm.py`): bolt's single-workspace authorization sends
`auth.test` for every request that arrives before the first answer, and when Slack is slow to answer that many the
burst turns into 500s. `countersign/bot/slack_auth.py` makes the first caller's call the only one.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from tests.bot.conftest import button_click, slack_headers

BURST = 30


async def test_a_burst_of_first_clicks_makes_one_auth_test_call(chat_api: Any, fake_slack: Any) -> None:
    fake_slack.hang("auth.test", seconds=1.0)  # slow enough that every click arrives before the first answer
    gate = str(uuid.uuid4())
    clicks = [button_click(gate, "U0ALICE", action_ts=f"1700001{n:03d}.000001") for n in range(BURST)]
    answers = await asyncio.gather(
        *(chat_api.post("/slack/events", content=body, headers=slack_headers(body)) for body in clicks)
    )
    assert {answer.status_code for answer in answers} == {200}
    assert len(fake_slack.calls_to("auth.test")) == 1
