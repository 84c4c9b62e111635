from __future__ import annotations

import datetime as dt
import json

import duckdb
import pytest
from fieldtrust.store.scope import Scope
from fieldtrust.store.weeks import Week, iso_week, week_sql
from hypothesis import given, settings
from hypothesis import strategies as st

from fieldtrust.errors import InputError

_CON = duckdb.connect()


@settings(max_examples=200, deadline=None)
@given(st.datetimes(min_value=dt.datetime(2000, 1, 1), max_value=dt.datetime(2100, 1, 1)))
def test_sql_week_agrees_with_python(ts: dt.datetime) -> None:
    row = _CON.execute(f"SELECT {week_sql('?::TIMESTAMP')}", [ts]).fetchone()
    assert row == (iso_week(ts),)
    assert row == (Week.of(ts),)


@settings(max_examples=100, deadline=None)
@given(st.datetimes(min_value=dt.datetime(2000, 1, 1), max_value=dt.datetime(2100, 1, 1)))
def test_a_timestamp_falls_inside_its_week(ts: dt.datetime) -> None:
    week = Week.of(ts)
    start, end = week.bounds()
    assert (start, end) == (week.start, week.end)
    assert start <= ts < end
    assert end - start == dt.timedelta(days=7)
    assert start.weekday() == 0 and start.time() == dt.time()


def test_week_53_and_year_boundaries() -> None:
    assert iso_week(dt.date(2027, 1, 3)) == "2026-W53"
    assert Week("2026-W53").shift(1) == "2027-W01"
    assert Week("2026-W01").shift(-1) == "2025-W52"
    assert Week("2026-W01").shift(-1).year == 2025


@pytest.mark.parametrize(
    ("label", "message"),
    [("2026-48", "not an ISO week"), ("2025-W53", "2025 has no week 53"), ("W48", "not an ISO"),
     ("2026-w48", "not an ISO week"), ("", "not an ISO week")],
)
def test_bad_weeks_are_named(label: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        Week(label)


def test_a_week_is_its_label_in_sql_json_and_comparisons() -> None:
    week = Week(" 2026-W48 ")
    assert (week, week.year, week.number) == ("2026-W48", 2026, 48)
    assert repr(week) == "Week('2026-W48')"
    assert json.dumps({"week": week}) == '{"week": "2026-W48"}'
    assert _CON.execute("SELECT ? = '2026-W48'", [week]).fetchone() == (True,)
    # A set of weeks read back from the store meets a set of Weeks.
    assert {"2026-W48", "2026-W49"} & {Week("2026-W49")} == {"2026-W49"}
    assert sorted([Week("2026-W10"), Week("2025-W52"), Week("2026-W02")]) == [
        "2025-W52", "2026-W02", "2026-W10"]


def test_a_week_given_a_week_is_not_parsed_again() -> None:
    week = Week("2026-W48")
    assert Week(week) is week
    assert Week.of(week.start) == week
    assert week.shift(0) == week and week.shift(-52) == "2025-W48"


def test_a_scope_checks_its_weeks_once_and_holds_weeks() -> None:
    scope = Scope(weeks=("2026-W48", Week("2026-W47")))
    assert scope.weeks == ("2026-W48", "2026-W47")
    assert all(isinstance(week, Week) for week in scope.weeks)
    assert scope == Scope(weeks=(Week("2026-W48"), "2026-W47"))
    with pytest.raises(InputError, match="2026 has no week 60"):
        Scope(weeks=("2026-W60",))
    with pytest.raises(InputError, match="give a tuple of weeks"):
        Scope(weeks="2026-W48")  # type: ignore[arg-type]
