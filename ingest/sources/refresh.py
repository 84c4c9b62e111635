"""Bring a source's counts home: the rollup rows and first-seen form versions.

A refresh reads only what was not counted before: the Parquet files not in
``source_files``, the versions of a Delta table after the last one counted
(what each adds and removes, :mod:`fieldtrust.ingest.sources.delta_log`:
compaction changes no count), or for a Spark table the rows after the last
watermark. A Parquet file already counted that has since changed (size or
time) or gone is reported in the result, never counted again: extraction
logs are append-only, and recounting a rewritten file would count its rows
twice. It is reported on every refresh until a person acknowledges it
(:mod:`fieldtrust.ingest.sources.changes`). A store counts one log once: a
refresh into a store holding ingested rows or another source's counts is
refused (:func:`refuse_double_counting`).
Everything a refresh writes lands in one transaction.

Rows are checked with the ingest rules on what they are counted by
(:func:`fieldtrust.ingest.sources.checks.counting_rules`: doc_type, field,
form_version, confidence, extracted_at) in the same scan that counts them;
only when that scan flags a row are the exact rules asked. A refresh that
finds bad rows raises :class:`~fieldtrust.errors.ValidationError` (the
first 20, by file and row, and their count) and writes nothing, unless
``skip_invalid``, which leaves them out and records how many with the refresh.
The other rules (ids, values, statuses, locations) are the draw's: it checks
every row of its week (:mod:`fieldtrust.sampling.lake_draw`), and only
drawn rows come home. Extraction ids are taken as unique across the lake
(checking it would hold every id in memory); the draw checks the ids it picks.
"""

from __future__ import annotations

import dataclasses
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
from fieldtrust.ingest.sources.changes import counted_files, unacknowledged
from fieldtrust.ingest.sources.checks import counting_rules, refresh_checks
from fieldtrust.ingest.sources.config import SourceConfig
from fieldtrust.ingest.sources.engines import Listing, Source, SourceFile
from fieldtrust.store.connection import transaction, utc_now
from fieldtrust.store.rollup import counted_sources, ingested_rows, store_name

from fieldtrust.errors import InputError, Refused, ValidationError

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
    #: Rows taken out of the counts: a Delta version removed them with a data change.
    rows_removed: int = 0
    #: Files a compaction wrote: recorded (the draw reads them), their rows not counted again.
    files_rewritten: int = 0


def select_counted(con: duckdb.DuckDBPyConnection, source: Source) -> None:
    """Point the source at the rows a refresh counted (every row of a table source).

    The draw and the review queue read a lake this way, so they see the rows
    the store's rollup describes and no file added since.
    """
    files = source.files()
    if files is None:
        source.select(None)
        return
    counted = sorted(counted_files(con, source.config.name))
    if not counted:
        raise InputError(
            f"nothing counted from {source.config.name} yet; run `fieldtrust refresh` first"
        )
    source.select(counted)


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
    refuse_double_counting(con, name)
    report(f"listing {name}", 0, 1)
    listing = source.listing(counted_files(con, name), _counted_version(con, name))
    since = _watermark(con, name)
    new_files: list[SourceFile] = []
    if listing is not None:
        listing = _unacknowledged(con, source, listing)
        new_files = listing.new
        if not (new_files or listing.removed or listing.rewritten):
            return RefreshResult(None, name, 0, 0, 0, listing.changed, listing.missing)
        source.check([f.path for f in new_files])
        since = _EPOCH
    counts, bad = _EMPTY_COUNTS, 0
    last_seen = None
    if listing is None or new_files:
        source.select(None if listing is None else [f.path for f in new_files])
        counts = _count(source, new_files, since, listing is None, report if progress else None)
        if pc.sum(counts["suspect"]).as_py():
            # A check flagged a row: the exact rules say whether any is bad, and which.
            source.select(None if listing is None else [f.path for f in new_files])
            bad = int(source.query(queries.BAD_ROWS, {"since": since})["bad"][0].as_py() or 0)
            if bad and not skip_invalid:
                raise ValidationError(name, rule_problems(source, counting_rules(source.rules)),
                                      bad)
        last_seen = pc.max(counts["last_seen_at"]).as_py()
        if bad:
            counts = source.query(queries.rollup(since=listing is None, skip_bad=True),
                                  {"since": since} if listing is None else {})
        counts = _as_counts(counts)
    rows = int(pc.sum(counts["n"]).as_py() or 0)
    removed = 0
    if listing is not None and listing.removed:
        taken = _removed_counts(source, listing.removed)
        removed = -int(pc.sum(taken["n"]).as_py() or 0)
        counts = pa.concat_tables([counts, taken])
    watermark = None
    if listing is None:
        if rows == 0 and not bad:
            return RefreshResult(None, name, 0, 0, 0)
        watermark = last_seen
    report(f"storing counts of {rows:,} rows", 0, 1)
    refresh_id = f"refresh-{uuid.uuid4().hex[:16]}"
    done = _Refreshed(
        new_files, listing.rewritten if listing else [], counts, bad, rows,
        listing.changed if listing else [], watermark, listing.version if listing else None,
    )
    with transaction(con):
        _store(con, refresh_id, name, done)
    report("done", 1, 1)
    return RefreshResult(
        refresh_id, name, len(new_files), rows, bad, done.changed,
        listing.missing if listing else [], watermark, rows_removed=removed,
        files_rewritten=len(done.rewritten),
    )


def _unacknowledged(con: duckdb.DuckDBPyConnection, source: Source, listing: Listing) -> Listing:
    """``listing`` without the changed or missing files a person acknowledged as they are now
    (:mod:`fieldtrust.ingest.sources.changes`): reported again once they change again."""
    if not (listing.changed or listing.missing):
        return listing
    now = {f.path: (f.size, f.modified) for f in source.files() or []}
    name = source.config.name
    return dataclasses.replace(listing, changed=unacknowledged(con, name, listing.changed, now),
                               missing=unacknowledged(con, name, listing.missing, now))


def refuse_double_counting(con: duckdb.DuckDBPyConnection, name: str) -> None:
    """Refuse to count lake ``name`` into a store that holds ingested rows or another lake.

    Either way rows both hold would be counted twice, silently (issue 25: 5,000
    counted for 4,000): a store counts one extraction log, once.

    Raises
    ------
    Refused
        The store holds ingested extractions, or counts another source.
    """
    ingested = ingested_rows(con)
    kind = name.split(":", 1)[0]
    if ingested:
        raise Refused(
            f"{store_name(con)} holds {ingested:,} ingested extractions: counting the {kind}"
            f" source {name} too would count every row both hold twice. Count the lake in a"
            " store of its own (fieldtrust --db lake.duckdb init --admin NAME, then refresh"
            " there), or keep source = store and ingest the lake's files into this one"
        )
    others = [s for s in counted_sources(con) if s != name]
    if others:
        raise Refused(
            f"{store_name(con)} already counts {others[0]}; counting {name} too would count"
            f" every row both hold twice. Count {name} in a store of its own, or set the"
            f" source back to {others[0]}"
        )


def _counted_version(con: duckdb.DuckDBPyConnection, source: str) -> int | None:
    """The newest Delta version counted from ``source`` (None: none recorded)."""
    row = con.execute(
        "SELECT max(source_version) FROM source_refreshes WHERE source = ?", [source]
    ).fetchone()
    return int(row[0]) if row and row[0] is not None else None


def _removed_counts(source: Source, files: list[SourceFile]) -> pa.Table:
    """The counts of ``files`` (taken out of the table with a data change), negated.

    Rows a rule rejects were never counted (a refresh refused them, or left
    them out), so they are not taken out either.
    """
    source.select([f.path for f in files])
    counts = _as_counts(source.query(queries.rollup(since=False, skip_bad=True)))
    return counts.set_column(
        counts.column_names.index("n"), "n", pc.negate(counts["n"])
    ).set_column(
        counts.column_names.index("sum_confidence"), "sum_confidence",
        pc.negate(counts["sum_confidence"]),
    )


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

#: A refresh that reads no new rows (a compaction, a delete) counts from this.
_EMPTY_COUNTS = pa.table({
    "doc_type": pa.array([], pa.string()), "field": pa.array([], pa.string()),
    "form_version": pa.array([], pa.string()), "week_start": pa.array([], pa.date32()),
    "k": pa.array([], pa.int16()), "n": pa.array([], pa.int64()),
    "sum_confidence": pa.array([], pa.float64()),
    "first_seen_at": pa.array([], pa.timestamp("us")),
})


def _as_counts(table: pa.Table) -> pa.Table:
    """``table``'s count columns, typed as :data:`_EMPTY_COUNTS` (engines sum to decimals)."""
    return table.select(list(_COUNT_COLUMNS)).cast(_EMPTY_COUNTS.schema)


@dataclass(frozen=True)
class _Refreshed:
    """What one refresh stores: the files it read or recorded, and the counts."""

    files: list[SourceFile]
    rewritten: list[SourceFile]
    counts: pa.Table
    skipped: int
    rows: int
    changed: list[str]
    watermark: dt.datetime | None
    version: int | None


def _store(con: duckdb.DuckDBPyConnection, refresh_id: str, name: str, done: _Refreshed) -> None:
    con.execute(
        "INSERT INTO source_refreshes (refresh_id, source, refreshed_at, files_read,"
        " rows_counted, rows_skipped, watermark, changed_files, source_version)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [refresh_id, name, utc_now(), len(done.files), done.rows, done.skipped, done.watermark,
         json.dumps(done.changed), done.version],
    )
    # Compaction's files are recorded too: they hold counted rows, which the draw reads there.
    files = [*done.files, *done.rewritten]
    if files:
        con.execute(
            "INSERT INTO source_files SELECT ?, unnest(?::VARCHAR[]), unnest(?::BIGINT[]),"
            " unnest(?::DOUBLE[]), ? ON CONFLICT DO NOTHING",
            [name, [f.path for f in files], [f.size for f in files],
             [f.modified for f in files], refresh_id],
        )
    if not done.counts.num_rows:
        return
    con.register(_WEEK_COUNTS, done.counts)
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
