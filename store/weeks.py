"""ISO weeks (UTC), the unit of audit and trend: ``2026-W48``."""

from __future__ import annotations

import datetime as dt
import re

from fieldtrust.errors import InputError

_WEEK = re.compile(r"^(\d{4})-W(\d{2})$")


def iso_week(ts: dt.datetime | dt.date) -> str:
    """The ISO week label of a UTC timestamp or date."""
    year, week, _ = ts.isocalendar()
    return f"{year}-W{week:02d}"


def parse_week(label: str) -> tuple[int, int]:
    """``'2026-W48'`` -> ``(2026, 48)``; a clear ``ValueError`` otherwise."""
    match = _WEEK.match(label.strip())
    if not match:
        raise InputError(f"week {label[:40]!r} is not an ISO week like 2026-W48")
    year, week = int(match.group(1)), int(match.group(2))
    try:
        start = dt.date.fromisocalendar(year, week, 1)
    except ValueError as exc:
        raise InputError(f"week {label!r} does not exist ({year} has no week {week})") from exc
    if start > dt.date.max - dt.timedelta(days=7):
        # A week ends at the next Monday, which the calendar does not have.
        raise InputError(
            f"week {label!r} is the calendar's last week, which has no end; pick an earlier week"
        )
    return year, week


def week_bounds(label: str) -> tuple[dt.datetime, dt.datetime]:
    """Start (Monday 00:00 UTC, inclusive) and end (next Monday, exclusive) of a week."""
    year, week = parse_week(label)
    start = dt.datetime.combine(dt.date.fromisocalendar(year, week, 1), dt.time())
    return start, start + dt.timedelta(days=7)


def shift_week(label: str, weeks: int) -> str:
    """The week ``weeks`` after (or before, if negative) ``label``."""
    start, _ = week_bounds(label)
    try:
        return iso_week(start + dt.timedelta(weeks=weeks))
    except OverflowError as exc:
        raise InputError(f"{weeks} weeks from {label} is outside the calendar") from exc


#: SQL expression giving the ISO week label of a TIMESTAMP column; keep it in
#: step with :func:`iso_week` (tests check they agree).
def week_sql(column: str) -> str:
    return f"strftime({column}, '%G-W%V')"
