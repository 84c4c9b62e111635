"""Bring a source's counts home: the rollup rows and first-seen form versions.

A refresh reads only what was not counted before: the files (or Delta
files) not in ``source_files``, or for a Spark table the rows after the last
watermark. A file already counted that has since changed (size or time) or
gone is reported in the result, never counted again: extraction logs are
append-only, and recounting a rewritten file would count its rows twice.
It is reported on every refresh until a person acknowledges it
(:mod:`fieldtrust.ingest.sources.changes`).
Everything a refresh writes lands in one transaction.

Rows are checked with the ingest rules on what they are counted by
(:func:`fieldtrust.ingest.sources.checks.counting_rules`: doc_type, field,
form_version, confidence, extracted_at) in the same scan that counts them;
only when that scan flags a row are the exact rules asked. A refresh that
finds bad rows raises :class:`~fieldtrust.errors.ValidationError` (the
first 20, by file and row, and their count) and writes nothing, unless
``skip_invalid``, which leaves them out and records how many with the refresh.
The other rules (ids, values, statuses, locations) are the draw's: it checks
every row of its week (:mod:`fieldtrust.sampling.source_draw`), and only
drawn rows come home. Extraction ids are taken as unique across the lake
(checking it would hold every id in memory); the draw checks the ids it picks.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
from fieldtrust.ingest.extractions import typed_columns
from fieldtrust.ingest.readers import MAX_PROBLEMS, shown
from fieldtrust.ingest.rules import Rule
from fieldtrust.ingest.sources import queries
from fieldtrust.ingest.sources.changes import counted_files, file_changes
from fieldtrust.ingest.sources.checks import counting_rules, refresh_checks
from fieldtrust.ingest.sources.config import SourceConfig
from fieldtrust.ingest.sources.engines import Source, SourceFile
from fieldtrust.store.connection import transaction, utc_now

from fieldtrust.errors import ValidationError

#: ``progress(stage, done, total)``, as ingest reports it.
Progress = Callable[[str, int, int], None]

#: The watermark of a source never refreshed: before any extraction.
_EPOCH = dt.datetime(1900, 1, 1)


@dataclass(frozen=True)
class RefreshResult:
    """What one refresh did. ``refresh_id`` is None when there was nothing new."""

    refresh_id: str | None
    source: str
    files_read: int
    rows_counted: int
    rows_skipped: int
    changed_files: list[str] = field(default_factory=list)
    missing_files: list[str] = field(default_factory=list)
    watermark: dt.datetime | None = None


def _watermark(con: duckdb.DuckDBPyConnection, source: str) -> dt.datetime:
    row = con.execute(
        "SELECT max(watermark) FROM source_refreshes WHERE source = ?", [source]
    ).fetchone()
    return row[0] if row and row[0] is not None else _EPOCH


def refresh_source(
    con: duckdb.DuckDBPyConnection,
    source: Source,
    *,
    skip_invalid: bool = False,
    progress: Progress | None = None,
) -> RefreshResult:
    """Count what ``source`` holds beyond the last refresh into the store's rollup.

    Parameters
    ----------
    con
        A read-write store connection.
    source
        The open source (:func:`fieldtrust.ingest.sources.open_source`); its
        ``window`` bounds the extraction times a row may hold, as at ingest.
    skip_invalid
        Leave rows an ingest rule rejects out of the counts (and the draw),
        instead of refusing the refresh.
    progress
        Called as each stage starts.

    Raises
    ------
    ValidationError
        The new rows hold bad values (unless ``skip_invalid``); nothing was written.
    SourceError
        The source cannot be read.
    """
    report = progress or (lambda stage, done, total: None)
    name = source.config.name
    report(f"listing {name}", 0, 1)
    listed = source.files()
    known = counted_files(con, name)
    changed: list[str] = []
    missing: list[str] = []
    new_files: list[SourceFile] = []
    since = _watermark(con, name)
    if listed is not None:
        # Reported until someone acknowledges them (ingest.sources.changes).
        changes = file_changes(con, name, {f.path: (f.size, f.modified) for f in listed})
        changed, missing = changes.changed, changes.missing
        new_files = [f for f in listed if f.path not in known]
        if not new_files:
            return RefreshResult(None, name, 0, 0, 0, changed, missing)
        source.select([f.path for f in new_files])
        since = _EPOCH
    else:
        source.select(None)
    counts = _count(source, new_files, since, listed is None, report if progress else None)
    bad = 0
    if pc.sum(counts["suspect"]).as_py():
        # A check flagged a row: the exact rules say whether any is bad, and which.
        source.select(None if listed is None else [f.path for f in new_files])
        bad = int(source.query(queries.BAD_ROWS, {"since": since})["bad"][0].as_py() or 0)
        if bad and not skip_invalid:
            raise ValidationError(name, rule_problems(source, counting_rules(source.rules)), bad)
    last_seen = pc.max(counts["last_seen_at"]).as_py()
    if bad:
        counts = source.query(queries.rollup(since=listed is None, skip_bad=True),
                              {"since": since} if listed is None else {})
    counts = counts.select(list(_COUNT_COLUMNS))
    rows = int(pc.sum(counts["n"]).as_py() or 0)
    watermark = None
    if listed is None:
        if rows == 0 and not bad:
            return RefreshResult(None, name, 0, 0, 0)
        watermark = last_seen
    report(f"storing counts of {rows:,} rows", 0, 1)
    refresh_id = f"refresh-{uuid.uuid4().hex[:16]}"
    with transaction(con):
        _store(con, refresh_id, name, new_files, counts, bad, rows, changed, watermark)
    report("done", 1, 1)
    return RefreshResult(refresh_id, name, len(new_files), rows, bad, changed, missing, watermark)


#: Reporting progress, new files are counted in about this many queries.
_PROGRESS_STEPS = 20


#: The rollup's columns, as the store takes them.
_COUNT_COLUMNS = ("doc_type", "field", "form_version", "week_start", "k", "n",
                  "sum_confidence", "first_seen_at")


def _count(
    source: Source, files: list[SourceFile], since: dt.datetime, by_watermark: bool,
    report: Progress | None,
) -> pa.Table:
    """The checked rollup over the selected rows; in slices of files when reporting progress.

    One scan of the files counts the rows and checks them
    (:func:`~fieldtrust.ingest.sources.queries.checked_rollup`).
    """
    params = {"since": since} if by_watermark else {}

    def checked() -> pa.Table:
        checks = refresh_checks(source.rules, source.dtypes)
        sql = queries.checked_rollup(
            typed_columns(source.dtypes), checks.grouped, checks.group_checks,
            checks.row_checks, since=by_watermark,
        )
        return source.query(sql, params)

    if report is None or len(files) < 2:
        return checked()
    step = max(1, -(-len(files) // _PROGRESS_STEPS))
    parts, rows = [], 0
    for start in range(0, len(files), step):
        report(f"counting: {rows:,} rows", start, len(files))
        source.select([f.path for f in files[start:start + step]])
        part = checked()
        rows += int(pc.sum(part["n"]).as_py() or 0)
        parts.append(part)
    report(f"counted {rows:,} rows", len(files), len(files))
    return pa.concat_tables(parts)


_WEEK_COUNTS = "_fieldtrust_source_week_counts"


def _store(
    con: duckdb.DuckDBPyConnection,
    refresh_id: str,
    name: str,
    files: list[SourceFile],
    counts: pa.Table,
    skipped: int,
    rows: int,
    changed: list[str],
    watermark: dt.datetime | None,
) -> None:
    con.execute(
        "INSERT INTO source_refreshes VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [refresh_id, name, utc_now(), len(files), rows, skipped, watermark, json.dumps(changed)],
    )
    if files:
        con.execute(
            "INSERT INTO source_files SELECT ?, unnest(?::VARCHAR[]), unnest(?::BIGINT[]),"
            " unnest(?::DOUBLE[]), ?",
            [name, [f.path for f in files], [f.size for f in files],
             [f.modified for f in files], refresh_id],
        )
    con.register(_WEEK_COUNTS, counts)
    try:
        con.execute(
            f"""
            INSERT INTO source_counts
            SELECT ?, doc_type, field, form_version,
                   strftime(CAST(week_start AS TIMESTAMP), '%G-W%V') AS week, k,
                   sum(n)::BIGINT, sum(sum_confidence)
            FROM {_WEEK_COUNTS} GROUP BY ALL
            """,
            [refresh_id],
        )
        con.execute(
            "INSERT INTO extraction_counts"
            " (doc_type, field, form_version, week, k, n, sum_confidence)"
            " SELECT doc_type, field, form_version, week, k, n, sum_confidence"
            " FROM source_counts WHERE refresh_id = ?",
            [refresh_id],
        )
        # A first_seen_at moves only earlier, as at ingest.
        con.execute(
            "INSERT INTO form_versions"
            f" SELECT doc_type, form_version, min(first_seen_at) FROM {_WEEK_COUNTS} GROUP BY ALL"
            " ON CONFLICT (doc_type, form_version) DO UPDATE"
            " SET first_seen_at = least(form_versions.first_seen_at, excluded.first_seen_at)"
        )
    finally:
        con.unregister(_WEEK_COUNTS)


def rule_problems(
    source: Source, rules: list[Rule], where: str = "true", params: dict[str, Any] | None = None,
) -> list[str]:
    """The first failures of ``rules`` among the selected rows, as ingest words them.

    ``where`` (a condition over ``source_raw``; bind ``params``) narrows the rows.
    """
    rows = source.query(
        queries.problems([(r.condition, r.value, r.extra) for r in rules], MAX_PROBLEMS, where),
        params,
    ).to_pylist()
    messages = []
    for row in rows:
        rule = rules[row["rule_"]]
        where = f"file {row['file_']}, row {row['row_']}" if row["file_"] else "a row"
        messages.append(
            f"{where}, column {rule.column}: "
            + rule.message.format(value=shown(_text(row["value_"])),
                                  extra=shown(_text(row["extra_"])))
        )
    return messages


#: Spark writes these doubles its own way; messages use DuckDB's words, as ingest does.
_SPARK_WORDS = {"NaN": "nan", "Infinity": "inf", "-Infinity": "-inf"}


def _text(value: object) -> object:
    return _SPARK_WORDS.get(value, value) if isinstance(value, str) else value


def source_summary(con: duckdb.DuckDBPyConnection, config: SourceConfig) -> dict[str, object]:
    """What the store has counted from ``config``: refreshes, files, rows, skipped rows."""
    row = con.execute(
        "SELECT count(*), coalesce(sum(rows_counted), 0), coalesce(sum(rows_skipped), 0),"
        " max(refreshed_at), max(watermark) FROM source_refreshes WHERE source = ?",
        [config.name],
    ).fetchone()
    files = con.execute(
        "SELECT count(*) FROM source_files WHERE source = ?", [config.name]
    ).fetchone()
    assert row is not None and files is not None
    return {
        "source": config.name,
        "refreshes": int(row[0]),
        "files_counted": int(files[0]),
        "rows_counted": int(row[1]),
        "rows_skipped": int(row[2]),
        "last_refresh": row[3],
        "watermark": row[4],
    }
