"""Validation of staged rows in SQL, reported row by row.

Rows staged by :mod:`fieldtrust.ingest.readers` are checked against :class:`Rule` s (a
SQL condition true on a bad row) and :class:`Unique` keys (no repeats within
the input). A large valid input, the common case, costs one aggregate scan
(:func:`raise_problems` asks "any problem?" first). Only when something is
wrong does a second query collect the first problems, ordered by row, then
by rule, as messages naming the row, the column and the value, with the
total count. Nothing here writes to the store.

The expression helpers turn a staged column into the typed value the store
keeps. They know the column's DuckDB type: text read from CSV or JSON Lines
is parsed; typed Parquet or Arrow columns are used as they are.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import duckdb
from fieldtrust.ingest.readers import MAX_PROBLEMS, Staged, shown
from fieldtrust.store.sql import quote_ident

from fieldtrust.errors import ValidationError

BOOLEAN_WORDS = ("true", "false", "1", "0", "yes", "no")

_NAIVE_FORMATS = (
    "['%Y-%m-%d %H:%M:%S', '%Y-%m-%dT%H:%M:%S', '%Y-%m-%d %H:%M:%S.%f', '%Y-%m-%dT%H:%M:%S.%f']"
)

#: Inputs above this many rows are first scanned for "any problem at all?".
QUICK_CHECK_ROWS = 20_000

#: Longest key (an id, doc_type, field, form version, model), in characters.
MAX_KEY_CHARS = 256

#: Characters a key may not hold (RE2): control characters, zero-width
#: characters and direction overrides, which make lookalike keys
#: (``invoice\u200b`` is not ``invoice``) and hide text in what is printed.
_INVISIBLE_RE = (
    r"[\x00-\x1f\x7f-\x{9f}\x{200b}-\x{200f}\x{202a}-\x{202e}\x{2060}-\x{2064}"
    r"\x{2066}-\x{2069}\x{feff}]"
)


def _default_earliest() -> dt.datetime:
    return dt.datetime(2000, 1, 1)


class WindowSettings(Protocol):
    """The settings a :class:`TimeWindow` is read from (``fieldtrust.settings.Settings``)."""

    @property
    def earliest_time(self) -> str: ...

    @property
    def future_days(self) -> float: ...


@dataclass(frozen=True)
class TimeWindow:
    """The timestamps an input may hold: from ``earliest`` to now plus ``ahead``.

    A year-9999 or year-1 time is a typo or a placeholder, and breaks the week
    arithmetic of every report, so it is refused at the door (settings
    ``earliest_time`` and ``future_days``).
    """

    earliest: dt.datetime = field(default_factory=_default_earliest)
    ahead: dt.timedelta = dt.timedelta(days=1)

    @classmethod
    def from_settings(cls, settings: WindowSettings) -> TimeWindow:
        """The window of the settings ``earliest_time`` (an ISO date) and ``future_days``."""
        earliest = dt.datetime.fromisoformat(settings.earliest_time).replace(tzinfo=None)
        return cls(earliest, dt.timedelta(days=settings.future_days))

    def bounds(self) -> tuple[dt.datetime, dt.datetime]:
        """``(earliest, latest)`` as naive UTC, ``latest`` counted from now."""
        now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
        return self.earliest, now + self.ahead


@dataclass(frozen=True)
class Rule:
    """A check of one row: ``condition`` is SQL, true on a bad row.

    ``message`` follows "row N, column C: " and may quote ``{value}`` and
    ``{extra}``, the text of the SQL expressions ``value`` and ``extra``.
    ``few_values``: the condition reads only ``column``, which holds few
    distinct values (a stratum, a closed set), so the quick check tests each
    distinct value once instead of every row.
    """

    column: str
    message: str
    condition: str
    value: str = "NULL"
    extra: str = "NULL"
    few_values: bool = False


@dataclass(frozen=True)
class Unique:
    """``key`` (SQL) must not repeat; ``{value}`` is the key, ``{extra}`` its first row.

    ``quick``, if given, is cheaper SQL equal on exactly the rows where ``key``
    is equal (the parts a hash is made of, say); the quick check uses it.
    """

    column: str
    message: str
    key: str
    quick: str | None = None


def check_columns(
    source: str,
    found: Iterable[str],
    *,
    required: Sequence[str],
    optional: Sequence[str],
    ignored: Sequence[str] = (),
    unknown_hint: str = "",
) -> None:
    """Reject an input lacking a required column or holding one nobody knows.

    An unknown column is an error rather than being dropped, so a renamed
    column (``confidance``) is caught instead of silently lost. ``unknown_hint``
    ends that message with what the caller offers instead (a mapping, an option).
    """
    names = list(found)
    problems = []
    missing = [c for c in required if c not in names]
    if missing:
        problems.append(
            f"missing required column{'s' if len(missing) > 1 else ''} {', '.join(missing)}"
            f" (columns found: {_names(names)})"
        )
    known = {*required, *optional, *ignored}
    unknown = [c for c in names if c not in known]
    if unknown:
        problems.append(
            f"unknown column{'s' if len(unknown) > 1 else ''} {_names(unknown)}"
            f" (known columns: {', '.join([*required, *optional])}){unknown_hint}"
        )
    if problems:
        raise ValidationError(source, problems)


def _names(names: Sequence[str], limit: int = 10) -> str:
    """Column names from a file for a message: each cut short, at most ``limit`` of them."""
    listed = ", ".join(shown(n) for n in names[:limit])
    return listed + (f" and {len(names) - limit} more" if len(names) > limit else "")


def raise_problems(
    con: duckdb.DuckDBPyConnection,
    staged: Staged,
    rules: Sequence[Rule],
    unique: Sequence[Unique] = (),
    *,
    source: str,
    progress: Callable[[int, int], None] | None = None,
) -> None:
    """Raise one :class:`ValidationError` listing every problem, if there is any.

    ``progress(done, parts)`` is told how many of the quick check's queries are done.
    """
    # Small inputs skip the quick check: planning it costs as much as the full query.
    if staged.rows > QUICK_CHECK_ROWS and not _any_problem(con, staged, rules, unique, progress):
        return
    problems, total = find_problems(con, staged, rules, unique)
    if total:
        raise ValidationError(source, problems, total)


def _any_problem(
    con: duckdb.DuckDBPyConnection,
    staged: Staged,
    rules: Sequence[Rule],
    unique: Sequence[Unique],
    progress: Callable[[int, int], None] | None = None,
) -> bool:
    """Does any rule fire, or any key repeat? Cheap on a valid input.

    One small query per rule, the condition in ``WHERE``: DuckDB then pushes
    what it can into the scan and skips row groups whose statistics rule a
    problem out (one query holding them all was slower). The rules of a
    column of few values (:attr:`Rule.few_values`) are one query over its
    distinct values, which DuckDB reads from the file's dictionary: a regular
    expression then runs a few times, not once a row. The key test counts
    distinct hashes: a collision (vanishingly rare) only sends the input on
    to the exact query.
    """
    relation = staged.relation
    queries = [
        f"SELECT EXISTS (SELECT 1 FROM {relation} WHERE {r.condition})"
        for r in rules if not r.few_values
    ]
    by_column: dict[str, list[str]] = {}
    for r in rules:
        if r.few_values:
            by_column.setdefault(r.column, []).append(f"({r.condition})")
    # The test sits in an aggregate, above the DISTINCT: in a WHERE, DuckDB
    # would push it down below the DISTINCT, onto every row.
    queries += [
        f"SELECT bool_or({' OR '.join(conditions)})"
        f" FROM (SELECT DISTINCT {quote_ident(column)} FROM {relation})"
        for column, conditions in by_column.items()
    ]
    # Asked last: once every rule passed, no key is NULL, so none needs filtering.
    # DISTINCT in a subquery, not count(DISTINCT ...): DuckDB runs it as a
    # parallel GROUP BY, a quarter faster on ten million keys.
    queries += [
        f"SELECT (SELECT count(*) FROM (SELECT DISTINCT hash({u.quick or u.key}) FROM {relation}))"
        f" < (SELECT count(*) FROM {relation})"
        for u in unique
    ]
    for done, query in enumerate(queries):
        if progress is not None:
            progress(done, len(queries))
        row = con.execute(query).fetchone()
        if row and row[0]:
            return True
    return False


def find_problems(
    con: duckdb.DuckDBPyConnection,
    staged: Staged,
    rules: Sequence[Rule],
    unique: Sequence[Unique] = (),
) -> tuple[list[str], int]:
    """The first :data:`MAX_PROBLEMS` problem messages, ordered by row, and their total."""
    found, total = problem_rows(con, staged, rules, unique)
    return [f"row {row}, column {column}: {message}" for row, column, message in found], total


def problem_rows(
    con: duckdb.DuckDBPyConnection,
    staged: Staged,
    rules: Sequence[Rule],
    unique: Sequence[Unique] = (),
    *,
    limit: int = MAX_PROBLEMS,
) -> tuple[list[tuple[int, str, str]], int]:
    """The first ``limit`` problems as (row, column, message), ordered by row, and their total.

    For a caller that adds problems of its own before reporting them (labels
    import): the message lacks the ``row N, column C:`` prefix.
    """
    row_sql = staged.row_sql
    parts = [
        f"SELECT {row_sql} AS row_, {index} AS rule_, CAST({r.value} AS VARCHAR) AS value_,"
        f" CAST({r.extra} AS VARCHAR) AS extra_ FROM {staged.relation} WHERE {r.condition}"
        for index, r in enumerate(rules)
    ]
    parts += [
        f"SELECT row_, {len(rules) + index} AS rule_, key_ AS value_,"
        " CAST(first_ AS VARCHAR) AS extra_ FROM ("
        f" SELECT {row_sql} AS row_, {u.key} AS key_,"
        f" min({row_sql}) OVER (PARTITION BY {u.key}) AS first_ FROM {staged.relation}"
        ") WHERE key_ IS NOT NULL AND row_ > first_"
        for index, u in enumerate(unique)
    ]
    if not parts:
        return [], 0
    sql = (
        "SELECT row_, rule_, value_, extra_, count(*) OVER () AS total_ FROM ("
        + " UNION ALL ".join(parts)
        + ") ORDER BY row_, rule_ LIMIT ?"
    )
    rows = con.execute(sql, [limit]).fetchall()
    checks: list[Rule | Unique] = [*rules, *unique]
    found = [
        (int(row), checks[rule].column,
         checks[rule].message.format(value=shown(value), extra=shown(extra)))
        for row, rule, value, extra, _ in rows
    ]
    return found, (int(rows[0][4]) if rows else 0)


# --- typed views of a staged column -------------------------------------------------
# Written for speed on millions of rows: the common case (no padding, a
# known word) is decided by a cheap test before any trim() or lower().


def raw_sql(column: str, dtype: str | None) -> str:
    """The column as it was written (text), for messages and free-text fields."""
    quoted = quote_ident(column)
    return quoted if dtype == "VARCHAR" else f"CAST({quoted} AS VARCHAR)"


def text_sql(column: str | None, dtype: str | None) -> str:
    """The column as text without surrounding spaces, NULL when absent or blank."""
    if column is None:
        return "CAST(NULL AS VARCHAR)"
    if dtype != "VARCHAR":
        return raw_sql(column, dtype)
    q = quote_ident(column)
    return (
        f"CASE WHEN starts_with({q}, ' ') OR ends_with({q}, ' ')"
        f" THEN nullif(trim({q}), '') ELSE nullif({q}, '') END"
    )


def missing_sql(column: str, dtype: str | None) -> str:
    """True where the column is NULL or blank."""
    q = quote_ident(column)
    if dtype != "VARCHAR":
        return f"{q} IS NULL"
    # A blank value sorts before '!': the comparison lets DuckDB skip whole row
    # groups by their min/max statistics, so valid files are hardly read.
    return f"({q} IS NULL OR ({q} < '!' AND trim({q}) = ''))"


def number_sql(column: str, dtype: str | None) -> str:
    """The column as DOUBLE, NULL when it does not parse ("high", "0,5").

    A single-precision (FLOAT) column goes through its shortest decimal text:
    0.9 as a float32 is 0.8999999761581421 as a double, which a 0.9 threshold
    would put below itself.
    """
    q = quote_ident(column)
    if dtype == "DOUBLE":
        return q
    if dtype == "FLOAT":
        return f"CAST(CAST({q} AS VARCHAR) AS DOUBLE)"
    return f"TRY_CAST({q} AS DOUBLE)"


def timestamp_sql(column: str, dtype: str | None) -> str:
    """The column as a naive UTC TIMESTAMP, NULL when it does not parse.

    Text with an offset (``Z``, ``+02:00``) or a zone name is converted to UTC;
    text without one is taken as UTC. This relies on the session time zone
    being UTC, which :func:`fieldtrust.store.connect` sets and :func:`ensure_utc` checks.
    """
    q = quote_ident(column)
    if dtype == "TIMESTAMP":
        return q
    if dtype == "TIMESTAMP WITH TIME ZONE":
        return f"timezone('UTC', {q})"
    if dtype is not None and (dtype.startswith("TIMESTAMP") or dtype == "DATE"):
        return f"CAST({q} AS TIMESTAMP)"
    # Not TRY_CAST(... AS TIMESTAMP): that one drops an offset instead of applying
    # it. Parsing TIMESTAMPTZ is slow, though, so the common offset-free forms
    # are tried first with strptime, which rejects anything with an offset. An
    # ISO 8601 time starts with the year's digits: the test keeps out the words
    # both also take ('infinity', '-infinity', 'epoch'), which are no extraction time.
    text = text_sql(column, dtype)
    return (
        f"CASE WHEN left({text}, 1) BETWEEN '0' AND '9'"
        f" THEN coalesce(try_strptime({text}, {_NAIVE_FORMATS}),"
        f" timezone('UTC', TRY_CAST({text} AS TIMESTAMPTZ))) END"
    )


def boolean_sql(column: str | None, dtype: str | None) -> str:
    """The column as BOOLEAN (true/false/1/0/yes/no), NULL when absent or unreadable."""
    if column is None:
        return "CAST(NULL AS BOOLEAN)"
    if dtype == "BOOLEAN":
        return quote_ident(column)
    cases = []
    for text in ([quote_ident(column)] if dtype == "VARCHAR" else []) + [
        f"lower({text_sql(column, dtype)})"  # exact words first: the cheap common case
    ]:
        cases.append(f"WHEN {text} IN ('true', '1', 'yes') THEN true")
        cases.append(f"WHEN {text} IN ('false', '0', 'no') THEN false")
    return f"CASE {' '.join(cases)} END"


def choice_sql(column: str | None, dtype: str | None, allowed: Sequence[str]) -> str:
    """The column lower-cased and trimmed, for a value from the closed set ``allowed``."""
    if column is None:
        return "CAST(NULL AS VARCHAR)"
    q = quote_ident(column)
    normalised = f"lower({text_sql(column, dtype)})"
    if dtype != "VARCHAR":
        return normalised
    return f"CASE WHEN {q} IN ({_words(allowed)}) THEN {q} ELSE {normalised} END"


def _words(words: Sequence[str]) -> str:
    # Fixed words of this package, never input: safe to write into the SQL.
    return ", ".join(f"'{word}'" for word in words)


def ensure_utc(con: duckdb.DuckDBPyConnection) -> None:
    """Make the session time zone UTC, which timestamp parsing relies on.

    Store connections already are (:func:`fieldtrust.store.connect`); this guards a
    connection opened some other way.
    """
    row = con.execute("SELECT current_setting('TimeZone')").fetchone()
    if row is None or row[0] != "UTC":
        con.execute("SET TimeZone = 'UTC'")


# --- rules shared by ingest and labels import ---------------------------------------


def required_rules(columns: Sequence[str], dtypes: dict[str, str]) -> list[Rule]:
    """A missing (NULL or blank) value in a required column."""
    return [Rule(c, "missing (a value is required)", missing_sql(c, dtypes[c])) for c in columns]


def timestamp_rules(
    column: str, dtypes: dict[str, str], window: TimeWindow | None = None
) -> list[Rule]:
    """A value that is there but does not parse as an ISO 8601 timestamp, or lies
    outside ``window`` (default :class:`TimeWindow`).
    """
    dtype = dtypes.get(column)
    if dtype is None:
        return []
    earliest, latest = (window or TimeWindow()).bounds()
    parsed = timestamp_sql(column, dtype)
    # Bounds are datetimes of this package, never input: safe to write into the SQL.
    lo, hi = (f"TIMESTAMP '{t.isoformat(sep=' ')}'" for t in (earliest, latest))
    rules = [
        Rule(
            column,
            f"'{{value}}' is outside the accepted times, {earliest:%Y-%m-%d} to"
            f" {latest:%Y-%m-%d %H:%M} UTC (settings earliest_time, future_days)",
            f"{parsed} < {lo} OR {parsed} > {hi}",
            raw_sql(column, dtype),
        )
    ]
    if dtype.startswith("TIMESTAMP") or dtype == "DATE":
        return rules
    return [
        Rule(
            column,
            "'{value}' is not an ISO 8601 timestamp (like 2026-01-05T10:00:00Z)",
            f"NOT {missing_sql(column, dtype)} AND {parsed} IS NULL",
            raw_sql(column, dtype),
        ),
        *rules,
        *_zone_gap_rules(column, dtype),
    ]


def _zone_gap_rules(column: str, dtype: str) -> list[Rule]:
    """A local time with a zone name that the zone skips (a DST gap) does not exist.

    DuckDB would move it silently (``02:30 Europe/Paris`` on the spring change
    becomes 03:30). Only text ending in a zone name can say such a time; the
    time read back in that zone must show the same wall clock.
    """
    text = text_sql(column, dtype)
    zone = f"regexp_extract({text}, ' ([A-Za-z_]+(/[A-Za-z0-9_+-]+)+)$', 1)"
    wall = f"try_strptime(left({text}, 19), ['%Y-%m-%dT%H:%M:%S', '%Y-%m-%d %H:%M:%S'])"
    shown_back = f"timezone({zone}, timezone('UTC', {timestamp_sql(column, dtype)}))"
    return [
        Rule(
            column,
            "'{value}' does not exist: the clocks of that zone skip that hour (a daylight"
            " saving change); give the time with its UTC offset",
            f"regexp_matches({text}, ' [A-Za-z_]+/[A-Za-z]') AND {wall} IS NOT NULL"
            f" AND date_trunc('second', {shown_back}) <> {wall}",
            raw_sql(column, dtype),
        )
    ]


def key_rules(
    columns: Sequence[str], dtypes: dict[str, str], few_values: Sequence[str] = ()
) -> list[Rule]:
    """Keys hold plain text: no invisible characters (named by code point), and a length limit.

    ``few_values``: the columns among ``columns`` with few distinct values
    (strata, not ids), which the quick check tests value by value.
    """
    rules = []
    for column in columns:
        dtype = dtypes.get(column)
        if dtype is None:
            continue
        text = text_sql(column, dtype)
        few = column in few_values
        # trim() takes only spaces and other blanks, none of them invisible: the
        # text as written holds an invisible character exactly when the key does,
        # and testing it skips the trimming.
        written = text
        if dtype == "VARCHAR":
            written = quote_ident(column)
        rules += [
            Rule(
                column,
                "'{extra}' holds the invisible character {value} (a control, zero-width or"
                " direction character); keys must be plain text",
                f"regexp_matches({written}, '{_INVISIBLE_RE}')",
                f"printf('U+%04X', unicode(regexp_extract({text}, '{_INVISIBLE_RE}')))",
                raw_sql(column, dtype),
                few,
            ),
            Rule(
                column,
                f"'{{extra}}' is {{value}} characters long; keys may have at most {MAX_KEY_CHARS}",
                f"length({text}) > {MAX_KEY_CHARS}",
                f"length({text})",
                raw_sql(column, dtype),
                few,
            ),
        ]
    return rules


def choice_rules(column: str, allowed: Sequence[str], dtypes: dict[str, str]) -> list[Rule]:
    """A given value outside a closed set (compared lower-case, trimmed)."""
    dtype = dtypes.get(column)
    if dtype is None:
        return []
    words = _words(allowed)
    # The first test alone is cheap and prunable; the second forgives case and
    # spaces. NULL (not given) is no problem: both tests are then NULL.
    condition = f"{quote_ident(column)} NOT IN ({words}) AND " if dtype == "VARCHAR" else ""
    condition += f"lower({text_sql(column, dtype)}) NOT IN ({words})"
    message = "'{value}' is not one of " + ", ".join(allowed)
    # A closed set: a valid input holds at most len(allowed) distinct values.
    return [Rule(column, message, condition, raw_sql(column, dtype), few_values=True)]


def boolean_rules(column: str, dtypes: dict[str, str]) -> list[Rule]:
    """A given value that is not a boolean word."""
    dtype = dtypes.get(column)
    if dtype is None or dtype == "BOOLEAN":
        return []
    return [
        Rule(
            column,
            "'{value}' is not a boolean (" + "/".join(BOOLEAN_WORDS) + ")",
            f"NOT {missing_sql(column, dtype)} AND {boolean_sql(column, dtype)} IS NULL",
            raw_sql(column, dtype),
        )
    ]
