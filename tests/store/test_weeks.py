from __future__ import annotations

import datetime as dt

import duckdb
import pytest
from fieldtrust.store.weeks import iso_week, parse_week, shift_week, week_bounds, week_sql
from hypothesis import given, settings
from hypothesis import strategies as st

_CON = duckdb.connect()


@settings(max_examples=200, deadline=None)
@given(st.datetimes(min_value=dt.datetime(2000, 1, 1), max_value=dt.datetime(2100, 1, 1)))
def test_sql_week_agrees_with_python(ts: dt.datetime) -> None:
    row = _CON.execute(f"SELECT {week_sql('?::TIMESTAMP')}", [ts]).fetchone()
    assert row == (iso_week(ts),)


@settings(max_examples=100, deadline=None)
@given(st.datetimes(min_value=dt.datetime(2000, 1, 1), max_value=dt.datetime(2100, 1, 1)))
def test_a_timestamp_falls_inside_its_week(ts: dt.datetime) -> None:
    start, end = week_bounds(iso_week(ts))
    assert start <= ts < end
    assert end - start == dt.timedelta(days=7)


def test_week_53_and_year_boundaries() -> None:
    assert iso_week(dt.date(2027, 1, 3)) == "2026-W53"
    assert shift_week("2026-W53", 1) == "2027-W01"
    assert shift_week("2026-W01", -1) == "2025-W52"


@pytest.mark.parametrize(
    ("label", "message"),
    [("2026-48", "not an ISO week"), ("2025-W53", "2025 has no week 53"), ("W48", "not an ISO")],
)
def test_bad_weeks_are_named(label: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_week(label)
