"""Which extractions an analysis looks at: weeks, document types, form versions.

Every report (calibration, audit estimates, dashboard pages) takes a
:class:`Scope`, so "the last 4 weeks of invoices" means the same rows
everywhere. The SQL it produces binds every value as a parameter.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import duckdb
from fieldtrust.store.sql import fetch_one
from fieldtrust.store.weeks import Week, week_sql

from fieldtrust.errors import InputError


@dataclass(frozen=True, init=False)
class Scope:
    """A filter over extractions. Empty tuples mean "all".

    ``weeks`` may be given as text (``"2026-W48"``), as a widget or a flag
    gives them: they are checked here, once, and held as
    :class:`~fieldtrust.store.weeks.Week` values.
    """

    weeks: tuple[Week, ...]
    doc_types: tuple[str, ...]
    form_versions: tuple[str, ...]
    fields: tuple[str, ...]

    def __init__(
        self,
        weeks: tuple[Week | str, ...] = (),
        doc_types: tuple[str, ...] = (),
        form_versions: tuple[str, ...] = (),
        fields: tuple[str, ...] = (),
    ) -> None:
        if isinstance(weeks, str):  # one week's text is not a tuple of weeks
            raise InputError(f"weeks {weeks[:40]!r}: give a tuple of weeks, like ('2026-W48',)")
        object.__setattr__(self, "weeks", tuple(Week(week) for week in weeks))
        object.__setattr__(self, "doc_types", tuple(doc_types))
        object.__setattr__(self, "form_versions", tuple(form_versions))
        object.__setattr__(self, "fields", tuple(fields))

    def where(self, alias: str = "e") -> tuple[str, list[object]]:
        """A SQL condition on extractions aliased ``alias``, and its parameters.

        Weeks become ranges of ``extracted_at`` rather than a computed week
        label, so DuckDB can skip row groups and never formats ten million
        timestamps to filter them.
        """
        clauses = []
        params: list[object] = []
        if self.weeks:
            ranges = []
            for start, end in week_ranges(self.weeks):
                ranges.append(f"({alias}.extracted_at >= ? AND {alias}.extracted_at < ?)")
                params.extend([start, end])
            clauses.append("(" + " OR ".join(ranges) + ")")
        return self._and_columns(alias, clauses, params)

    def where_week_labels(self, alias: str) -> tuple[str, list[object]]:
        """:meth:`where` for a table whose ``week`` column holds ISO week text.

        Such tables (the extraction rollup, store.rollup) hold one row per
        week, so the labels compare directly; they are written as
        ``2026-W05``, whatever spelling the scope was given.
        """
        clauses = []
        params: list[object] = []
        if self.weeks:
            clauses.append(f"{alias}.week IN (SELECT unnest(?::VARCHAR[]))")
            params.append(sorted({str(week) for week in self.weeks}))
        return self._and_columns(alias, clauses, params)

    def _and_columns(
        self, alias: str, clauses: list[str], params: list[object]
    ) -> tuple[str, list[object]]:
        """``clauses`` and the doc_type / form_version / field filters, joined by AND."""
        columns = (
            (f"{alias}.doc_type", self.doc_types),
            (f"{alias}.form_version", self.form_versions),
            (f"{alias}.field", self.fields),
        )
        for expression, values in columns:
            if values:
                clauses.append(f"{expression} IN (SELECT unnest(?::VARCHAR[]))")
                params.append(list(values))
        return " AND ".join(clauses) or "TRUE", params


def week_ranges(weeks: tuple[Week, ...]) -> list[tuple[dt.datetime, dt.datetime]]:
    """The weeks as [start, end) timestamp ranges, adjacent weeks merged."""
    merged: list[tuple[dt.datetime, dt.datetime]] = []
    for start, end in sorted(week.bounds() for week in set(weeks)):
        if merged and merged[-1][1] == start:
            merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged


def latest_week(con: duckdb.DuckDBPyConnection) -> Week | None:
    """The newest ISO week holding any extraction (None for an empty store)."""
    # The rollup also knows the weeks of a lake source, whose rows are not stored.
    row = fetch_one(
        con,
        f"SELECT greatest((SELECT {week_sql('max(extracted_at)')} FROM extractions),"
        " (SELECT max(week) FROM extraction_counts))",
    )
    return Week(row[0]) if row and row[0] is not None else None


#: The longest window a scope is given in weeks: ten years. Longer asks are refused, not
#: expanded into a list of weeks no store holds.
MAX_WEEKS = 520


def last_weeks(
    con: duckdb.DuckDBPyConnection, count: int, *, until: Week | str | None = None
) -> tuple[Week, ...]:
    """The ``count`` ISO weeks ending at ``until`` (default: the store's latest week)."""
    if not 1 <= count <= MAX_WEEKS:
        raise InputError(f"weeks must be between 1 and {MAX_WEEKS}, got {count}")
    end = Week(until) if until else latest_week(con)
    if end is None:
        return ()
    return tuple(end.shift(-offset) for offset in range(count - 1, -1, -1))
