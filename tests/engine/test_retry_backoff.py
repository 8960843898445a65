"""The retry schedules (ADR 0035): the outbox's and dispatch's waits are jittered, exponential and capped."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from countersign.delivery.worker import _retry_after
from countersign.engine import dispatch, outbox

SAMPLES = 200


@pytest.mark.parametrize("failures", [1, 2, 3, 5, 9, 10, 40, 10_000])
def test_each_outbox_wait_is_between_half_and_all_of_its_capped_exponential_step(failures: int) -> None:
    step = min(outbox.BACKOFF_BASE_S * 2.0 ** min(failures - 1, 64), outbox.BACKOFF_CAP_S)
    waits = [outbox.backoff_s(failures) for _ in range(SAMPLES)]
    assert all(step / 2 <= wait <= step for wait in waits), (min(waits), max(waits), step)
    assert len(set(waits)) > SAMPLES // 2  # jittered: workers that failed together come back apart


def test_the_outbox_waits_grow_then_stop_at_the_cap() -> None:
    assert outbox.backoff_s(1) <= 1.0
    assert 64.0 <= outbox.backoff_s(8) <= 128.0
    assert max(outbox.backoff_s(n) for n in range(1, 60)) <= outbox.BACKOFF_CAP_S == 300.0
    # The old schedule gave up after 8 attempts, 127 s; the first 8 waits now sum to about as much, then it goes on.
    assert sum(outbox.backoff_s(n) for n in range(1, 8)) <= 127.0


@pytest.mark.parametrize("failures", [1, 2])
def test_dispatch_waits_are_jittered_above_the_old_fixed_ones(failures: int) -> None:
    floor = (1.0, 4.0)[failures - 1]  # the old fixed waits are now each step's floor
    waits = [dispatch.retry_backoff_s(failures) for _ in range(SAMPLES)]
    assert all(floor <= wait <= 2 * floor for wait in waits)
    assert len(set(waits)) > SAMPLES // 2


def test_dispatch_waits_are_capped() -> None:
    assert max(dispatch.retry_backoff_s(n) for n in range(1, 30)) <= dispatch.RETRY_CAP_S


def test_retry_after_reads_seconds_and_http_dates() -> None:
    assert _retry_after({"Retry-After": "7"}) == 7.0
    assert _retry_after({"retry-after": "-3"}) == 0.0
    in_two_minutes = format_datetime(datetime.now(UTC) + timedelta(seconds=120), usegmt=True)
    parsed = _retry_after({"Retry-After": in_two_minutes})
    assert parsed is not None and 115 <= parsed <= 120
    assert _retry_after({"Retry-After": "soon"}) is None
    assert _retry_after({}) is None


def test_an_outbox_budget_is_positive() -> None:
    assert outbox.budget_seconds(24) == 86_400
    with pytest.raises(ValueError, match="positive number of hours"):
        outbox.budget_seconds(0)
