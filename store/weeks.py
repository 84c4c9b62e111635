"""ISO weeks (UTC), the unit of audit and trend: ``2026-W48``.

A week enters fieldtrust as text: a CLI option, a dashboard widget, an
argument of a library entry point. It is checked once there, into a
:class:`Week`, and carried as that value inside, so no function parses it
again. The store keeps weeks as text (``audit_samples.week``,
``extraction_counts.week``) and so does the JSON fieldtrust writes.
"""

from __future__ import annotations

import datetime as dt
import re

from fieldtrust.errors import InputError

_WEEK = re.compile(r"^(\d{4})-W(\d{2})$")


class Week(str):
    """An ISO week (UTC) such as ``2026-W48``, checked when made.

    A Week *is* its label, the store's text form: it binds as a SQL
    parameter, prints in JSON and equals the week text read back from the
    store, so a set of weeks from SQL and a set of Weeks compare as they
    should. ``Week(text)`` parses (``InputError`` naming the text when it is
    no ISO week); given a Week it returns it unchanged, which is how an entry
    point that accepts either converts at its edge without parsing twice.
    Weeks sort in time order.
    """

    __slots__ = ()

    def __new__(cls, label: str) -> Week:
        if isinstance(label, Week):
            return label
        if not isinstance(label, str):
            raise InputError(f"week {label!r} is not an ISO week like 2026-W48")
        match = _WEEK.match(label.strip())
        if not match:
            raise InputError(f"week {label[:40]!r} is not an ISO week like 2026-W48")
        year, number = int(match.group(1)), int(match.group(2))
        try:
            dt.date.fromisocalendar(year, number, 1)
        except ValueError as exc:
            raise InputError(
                f"week {label.strip()!r} does not exist ({year} has no week {number})"
            ) from exc
        if dt.date.fromisocalendar(year, number, 1) > dt.date.max - dt.timedelta(days=7):
            # A week ends at the next Monday, which the calendar does not have.
            raise InputError(
                f"week {label.strip()!r} is the calendar's last week, which has no end;"
                " pick an earlier week"
            )
        return super().__new__(cls, f"{year}-W{number:02d}")

    @classmethod
    def of(cls, moment: dt.datetime | dt.date) -> Week:
        """The week of a UTC timestamp or date."""
        year, number, _ = moment.isocalendar()
        return super().__new__(cls, f"{year}-W{number:02d}")

    @property
    def year(self) -> int:
        """The ISO year (which may differ from the calendar year of the week's first days)."""
        return int(self[:-4])

    @property
    def number(self) -> int:
        """The week of the ISO year, 1 to 53."""
        return int(self[-2:])

    @property
    def start(self) -> dt.datetime:
        """Monday 00:00 UTC, the first instant of the week (naive, as the store keeps time)."""
        return dt.datetime.combine(dt.date.fromisocalendar(self.year, self.number, 1), dt.time())

    @property
    def end(self) -> dt.datetime:
        """The next Monday 00:00 UTC: the week holds times before it."""
        return self.start + dt.timedelta(days=7)

    def bounds(self) -> tuple[dt.datetime, dt.datetime]:
        """``(start, end)``: the week is ``start <= t < end``."""
        start = self.start
        return start, start + dt.timedelta(days=7)

    def shift(self, weeks: int) -> Week:
        """The week ``weeks`` after this one (before it, when negative)."""
        try:
            return Week.of(self.start + dt.timedelta(weeks=weeks))
        except OverflowError as exc:
            raise InputError(f"{weeks} weeks from {self} is outside the calendar") from exc

    def __repr__(self) -> str:
        return f"Week({str(self)!r})"


def iso_week(moment: dt.datetime | dt.date) -> Week:
    """The week of a UTC timestamp or date (:meth:`Week.of`)."""
    return Week.of(moment)


#: SQL expression giving the ISO week label of a TIMESTAMP column; keep it in
#: step with :meth:`Week.of` (tests check they agree).
def week_sql(column: str) -> str:
    return f"strftime({column}, '%G-W%V')"
