"""The gateway retries a 429 and a 5xx inside the loop's wall-clock bound, then escalates `model_unavailable`.

Every test talks to the local fake OpenAI server over a real socket; time is a fake clock that only the injected
sleep moves, so a 30-second Retry-After costs nothing and every wait the loop chose is on record.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import httpx
import pytest

from countersign.llm import (
    Limits,
    LoopStopped,
    Message,
    ModelRequest,
    OpenAICompatibleProvider,
    ProviderUnavailable,
    run_loop,
)
from countersign.llm.openai_compatible import retry_after_seconds
from tests.llm.fake_openai import FakeOpenAI, Reply, completion

REQUEST = ModelRequest(
    model="fake-model",
    template_hash="t" * 64,
    messages=(Message("system", "Explain."), Message("user", "Why did rent rise?")),
    max_tokens=200,
)
NOW = datetime(2025, 3, 31, 9, 0, 0, tzinfo=UTC)
OVERLOADED = {"error": {"message": "overloaded"}}
DEFAULT_LIMITS = Limits()


@dataclass
class FakeTime:
    """A clock that moves only when the loop sleeps; every sleep, and the clock at every attempt, is recorded."""

    now: float = 1000.0
    sleeps: list[float] = field(default_factory=list)

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def provider(base_url: str, http: httpx.AsyncClient) -> OpenAICompatibleProvider:
    return OpenAICompatibleProvider(base_url, api_key=None, http=http, wall_clock=lambda: NOW)


async def ask(
    fake: FakeOpenAI, http: httpx.AsyncClient, time: FakeTime, limits: Limits = DEFAULT_LIMITS
) -> tuple[str, list[dict[str, object]]]:
    result = await run_loop(provider(fake.base_url, http), REQUEST, limits=limits, clock=time.clock, sleep=time.sleep)
    return result.text, [dict(event) for event in result.events]


async def stopped_by(
    base_url: str, http: httpx.AsyncClient, time: FakeTime, limits: Limits = DEFAULT_LIMITS
) -> LoopStopped:
    with pytest.raises(LoopStopped) as stopped:
        await run_loop(provider(base_url, http), REQUEST, limits=limits, clock=time.clock, sleep=time.sleep)
    return stopped.value


async def test_a_429_with_retry_after_seconds_is_retried_after_exactly_that_wait(
    fake: FakeOpenAI, http: httpx.AsyncClient
) -> None:
    fake.replies += [Reply(status=429, json=OVERLOADED, headers={"Retry-After": "3"}), Reply(json=completion("Rent."))]
    time = FakeTime()
    text, events = await ask(fake, http, time)
    assert text == "Rent."
    assert len(fake.received) == 2 and fake.received[0] == fake.received[1]
    assert time.sleeps == [3.0]
    assert events[0]["attempts"] == 2 and events[0]["step"] == 1


async def test_a_429_with_retry_after_as_an_http_date_waits_until_that_date(
    fake: FakeOpenAI, http: httpx.AsyncClient
) -> None:
    later = format_datetime(NOW + timedelta(seconds=4), usegmt=True)  # e.g. "Mon, 31 Mar 2025 09:00:04 GMT"
    fake.replies += [Reply(status=429, json=OVERLOADED, headers={"Retry-After": later}), Reply(json=completion("ok"))]
    time = FakeTime()
    assert (await ask(fake, http, time))[0] == "ok"
    assert time.sleeps == [4.0]


async def test_two_503s_then_an_answer_is_one_answer_after_jittered_backoff(
    fake: FakeOpenAI, http: httpx.AsyncClient
) -> None:
    fake.replies += [
        Reply(status=503, json=OVERLOADED),
        Reply(status=503, json=OVERLOADED),
        Reply(json=completion("ok")),
    ]
    time = FakeTime()
    text, events = await ask(fake, http, time, Limits(retry_backoff_s=1.0, max_retry_wait_s=10.0))
    assert text == "ok" and len(fake.received) == 3 and events[0]["attempts"] == 3
    first, second = time.sleeps
    assert 0.0 <= first <= 1.0 and 0.0 <= second <= 2.0  # full jitter: uniform in [0, backoff * 2 ** (n - 1)]


async def test_backoff_waits_are_jittered_not_a_fixed_schedule(fake: FakeOpenAI, http: httpx.AsyncClient) -> None:
    # Eight retried steps' first waits: a fixed schedule would make them all equal.
    waits = []
    for _ in range(8):
        fake.replies += [Reply(status=502, json=OVERLOADED), Reply(json=completion("ok"))]
        time = FakeTime()
        await ask(fake, http, time)
        waits += time.sleeps
    assert len(waits) == 8 and len(set(waits)) > 4 and all(0.0 <= wait <= 1.0 for wait in waits)


async def test_5xx_until_the_wall_clock_bound_escalates_model_unavailable_before_the_deadline(
    fake: FakeOpenAI, http: httpx.AsyncClient
) -> None:
    # Each 503 asks for 3 s: attempts at 0, 3, 6 and 9 s; a fifth at 12 s would be past the 10 s deadline.
    fake.replies += [Reply(status=503, json=OVERLOADED, headers={"Retry-After": "3"}) for _ in range(10)]
    time = FakeTime()
    limits = Limits(deadline_s=10.0, max_attempts_per_step=100, max_retry_wait_s=5.0)
    stopped = await stopped_by(fake.base_url, http, time, limits)
    assert (stopped.reason, stopped.bound, stopped.step) == ("model_unavailable", None, 1)
    assert len(fake.received) == 4 and time.sleeps == [3.0, 3.0, 3.0]
    assert time.now - 1000.0 == 9.0 < limits.deadline_s
    assert "made 4 attempt(s)" in stopped.detail and "(503, 503, 503, 503)" in stopped.detail
    assert "a wait of 3.000s after 9.000s would leave less than min_attempt_s=1.0 of deadline_s=10.0" in stopped.detail
    assert "HTTP 503" in stopped.detail
    assert isinstance(stopped.__cause__, ProviderUnavailable)


async def test_jittered_5xx_retries_never_sleep_past_the_deadline(fake: FakeOpenAI, http: httpx.AsyncClient) -> None:
    for _ in range(2):
        fake.received.clear()
        fake.replies[:] = [Reply(status=500, json=OVERLOADED) for _ in range(200)]
        time = FakeTime()
        limits = Limits(deadline_s=6.0, max_attempts_per_step=200, retry_backoff_s=0.5, max_retry_wait_s=2.0)
        stopped = await stopped_by(fake.base_url, http, time, limits)
        assert stopped.reason == "model_unavailable"
        assert time.now - 1000.0 <= limits.deadline_s - limits.min_attempt_s
        assert len(fake.received) == len(time.sleeps) + 1 >= 3
        assert all(0.0 <= wait <= 2.0 for wait in time.sleeps)


async def test_the_attempt_bound_stops_retrying(fake: FakeOpenAI, http: httpx.AsyncClient) -> None:
    fake.replies += [Reply(status=504, json=OVERLOADED) for _ in range(10)]
    time = FakeTime()
    stopped = await stopped_by(fake.base_url, http, time, Limits(deadline_s=1000.0, max_attempts_per_step=3))
    assert stopped.reason == "model_unavailable" and len(fake.received) == 3 and len(time.sleeps) == 2
    assert "no retry after max_attempts_per_step=3" in stopped.detail


@pytest.mark.parametrize("status", [400, 401, 404, 422, 501])
async def test_a_4xx_other_than_429_and_a_501_are_not_retried(
    fake: FakeOpenAI, http: httpx.AsyncClient, status: int
) -> None:
    fake.replies += [Reply(status=status, json={"error": "no"}), Reply(json=completion("never asked"))]
    time = FakeTime()
    stopped = await stopped_by(fake.base_url, http, time)
    assert (stopped.reason, stopped.step) == ("provider_error", 1)
    assert len(fake.received) == 1 and time.sleeps == []
    assert f"HTTP {status}" in stopped.detail


async def test_a_retry_after_past_the_remaining_budget_escalates_at_once(
    fake: FakeOpenAI, http: httpx.AsyncClient
) -> None:
    fake.replies += [Reply(status=429, json=OVERLOADED, headers={"Retry-After": "30"}), Reply(json=completion("x"))]
    time = FakeTime()
    stopped = await stopped_by(fake.base_url, http, time, Limits(deadline_s=20.0, max_retry_wait_s=60.0))
    assert stopped.reason == "model_unavailable" and len(fake.received) == 1 and time.sleeps == []
    assert "a wait of 30.000s after 0.000s would leave less than min_attempt_s=1.0 of deadline_s=20.0" in stopped.detail


async def test_a_retry_after_over_the_cap_escalates_at_once_even_with_time_left(
    fake: FakeOpenAI, http: httpx.AsyncClient
) -> None:
    fake.replies += [Reply(status=503, json=OVERLOADED, headers={"Retry-After": "30"}), Reply(json=completion("x"))]
    time = FakeTime()
    stopped = await stopped_by(fake.base_url, http, time, Limits(deadline_s=600.0, max_retry_wait_s=10.0))
    assert stopped.reason == "model_unavailable" and len(fake.received) == 1 and time.sleeps == []
    assert "over max_retry_wait_s=10.0" in stopped.detail


@pytest.mark.parametrize(("retry_after", "retried"), [("4", True), ("4.001", False)])
async def test_a_retry_is_made_only_with_min_attempt_s_left_after_the_wait(
    fake: FakeOpenAI, http: httpx.AsyncClient, retry_after: str, retried: bool
) -> None:
    # 5 s deadline, 1 s an attempt needs: a wait of 4 s leaves exactly that; a wait of 4.001 s does not.
    fake.replies += [
        Reply(status=429, json=OVERLOADED, headers={"Retry-After": retry_after}),
        Reply(json=completion("ok")),
    ]
    time = FakeTime()
    limits = Limits(deadline_s=5.0, min_attempt_s=1.0)
    if retried:
        assert (await ask(fake, http, time, limits))[0] == "ok"
        assert time.sleeps == [4.0]
    else:
        assert (await stopped_by(fake.base_url, http, time, limits)).reason == "model_unavailable"
        assert time.sleeps == [] and len(fake.received) == 1


async def test_a_connection_never_made_is_retried_then_escalates(http: httpx.AsyncClient) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    time = FakeTime()
    stopped = await stopped_by(f"http://127.0.0.1:{port}/v1", http, time, Limits(max_attempts_per_step=3))
    assert stopped.reason == "model_unavailable" and len(time.sleeps) == 2
    assert "(httpx.ConnectError, httpx.ConnectError, httpx.ConnectError)" in stopped.detail


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        ("0", 0.0),
        ("120", 120.0),
        (" 7 ", 7.0),
        ("1.5", 1.5),
        ("Mon, 31 Mar 2025 09:00:30 GMT", 30.0),
        ("Monday, 31-Mar-25 09:01:00 GMT", 60.0),  # RFC 850, obsolete but allowed
        ("Mon Mar 31 09:00:05 2025", 5.0),  # asctime, obsolete, no zone: GMT
        ("Mon, 31 Mar 2025 08:00:00 GMT", 0.0),  # already past
        ("soon", None),
        ("-5", None),
        ("", None),
        (None, None),
    ],
)
def test_retry_after_reads_delay_seconds_and_http_dates(header: str | None, seconds: float | None) -> None:
    assert retry_after_seconds(header, NOW) == seconds
