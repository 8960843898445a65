import calendar
import re
from datetime import date

_PERIOD = re.compile(r"^(\d{4})-(\d{2})$")


def parse_period(period: str) -> tuple[int, int]:
    """Return (year, month) for "YYYY-MM"; ValueError with the reason otherwise."""
    match = _PERIOD.match(period)
    if match is None:
        raise ValueError(f"expected YYYY-MM, got {period!r}")
    year, month = int(match.group(1)), int(match.group(2))
    if not 1 <= month <= 12:
        raise ValueError(f"month must be 01..12, got {period!r}")
    return year, month


def period_days(period: str) -> list[date]:
    year, month = parse_period(period)
    last_day = calendar.monthrange(year, month)[1]
    return [date(year, month, day) for day in range(1, last_day + 1)]
