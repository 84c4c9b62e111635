"""Bad arguments to library functions raise fieldtrust errors, not bare builtins.

The CLI and the dashboard turn a ``FieldtrustError`` into one line (exit code 2
on the command line); anything else shows a traceback. Each error here also
stays a ``ValueError``, so callers that catch that keep working.
"""

from __future__ import annotations

from collections.abc import Callable

import duckdb
import pytest
from fieldtrust.extraction.schemas import INVOICE
from fieldtrust.sampling.alerts import weekly_alerts
from fieldtrust.sampling.planner import attribute_sample_size, sample_size
from fieldtrust.sampling.queue import priority_queue
from fieldtrust.sampling.stratified import clopper_pearson
from fieldtrust.store.bar import Bar, Criteria
from fieldtrust.store.scope import last_weeks
from fieldtrust.store.sql import quote_ident, quote_literal
from fieldtrust.store.weeks import parse_week

from fieldtrust.demo.generator import generate_demo
from fieldtrust.errors import FieldtrustError
from fieldtrust.settings import Settings

CASES: list[tuple[str, Callable[[duckdb.DuckDBPyConnection], object], str]] = [
    ("last_weeks", lambda con: last_weeks(con, 0), "weeks must be between 1 and 520, got 0"),
    ("last_weeks", lambda con: last_weeks(con, 10**12), "between 1 and 520"),
    ("parse_week", lambda con: parse_week("2026-W60"), "2026 has no week 60"),
    ("quote_ident", lambda con: quote_ident(""), "not a usable SQL identifier"),
    ("quote_literal", lambda con: quote_literal("a\x00b"), "not a usable SQL string"),
    ("priority_queue", lambda con: priority_queue(con, limit=0), "limit must be between 1"),
    ("sample_size", lambda con: sample_size(0.5, 0), r"margin = 0 must be in \(0, 1\)"),
    ("attribute_sample_size", lambda con: attribute_sample_size(0.05, risk=2),
     r"risk = 2 must be in \(0, 1\)"),
    ("clopper_pearson", lambda con: clopper_pearson(1, 2, sided="both"), "sided must be"),
    ("weekly_alerts", lambda con: weekly_alerts(con, "2026-W10", lookback=0),
     "lookback must be at least 1"),
    ("schema field", lambda con: INVOICE.field("colour"), "has no field 'colour'"),
    ("generate_demo", lambda con: generate_demo(7, 10**12), "rows must be between 1 and"),
    ("generate_demo", lambda con: generate_demo(-1, 10), "seed must be 0 or more"),
    ("Settings", lambda con: Settings(port=0), "setting port: 0 is not a TCP port"),
    ("Bar", lambda con: Bar(weeks=0), "bar setting weeks = 0 must be between 1 and 520"),
    ("Settings.with_flags", lambda con: Settings().with_flags(target=1.5),
     "--target: 1.5 must be strictly between 0 and 1"),
]


@pytest.mark.parametrize(("what", "call", "message"), CASES, ids=[c[0] for c in CASES])
def test_bad_arguments_raise_a_fieldtrust_value_error(
    con: duckdb.DuckDBPyConnection, what: str, call: Callable[[duckdb.DuckDBPyConnection], object],
    message: str,
) -> None:
    with pytest.raises(FieldtrustError, match=message) as caught:
        call(con)
    assert isinstance(caught.value, ValueError), what


def test_flags_not_given_leave_the_settings_as_they_are() -> None:
    base = Settings(port=9000, criteria=Criteria.of("FIELDTRUST_WEEKS", weeks=6))
    assert base.with_flags(weeks=None, target=None, port=None) is base
    flagged = base.with_flags(weeks=3, target=0.9)
    assert flagged.port == 9000
    assert [(a.name, a.value, a.source) for a in flagged.criteria.asks] == [
        ("weeks", 3, "--weeks"), ("target", 0.9, "--target")]
