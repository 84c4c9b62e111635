"""Validated ingest of extraction files (CSV, Parquet, JSON Lines) and in-memory rows.

Every input is staged (:mod:`fieldtrust.ingest.readers`) and checked with SQL
(:mod:`fieldtrust.ingest.rules`) before anything is written. One bad row rejects
the call: a :class:`~fieldtrust.errors.ValidationError` names rows, columns and
values, and the store is unchanged. Valid inputs then land in one
transaction.

Ingest is idempotent. A file whose SHA-256 is already in ``ingest_batches``
adds nothing; a row whose ``extraction_id`` is already stored is skipped (an
anti-join: ``extractions`` has no primary key, so uniqueness is kept here);
a row without an ``extraction_id`` gets one derived from its content
(:data:`DERIVED_ID`), so the same rows in another file are recognised too.

See docs/ingest.md for the columns and every rule.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
from fieldtrust.ingest.location_rules import location_rules, location_select
from fieldtrust.ingest.query_progress import Progress, RowProgress
from fieldtrust.ingest.readers import (
    Snapshot,
    Staged,
    arrow_sha256,
    detect_format,
    drop_snapshot,
    drop_staged,
    map_columns,
    snapshot,
    stage_arrow,
    stage_file,
    temp_name,
)
from fieldtrust.ingest.rules import (
    Rule,
    TimeWindow,
    Unique,
    boolean_rules,
    boolean_sql,
    check_columns,
    choice_rules,
    choice_sql,
    ensure_utc,
    key_rules,
    missing_sql,
    number_sql,
    raise_problems,
    raw_sql,
    required_rules,
    text_sql,
    timestamp_rules,
    timestamp_sql,
)
from fieldtrust.store.connection import transaction, utc_now
from fieldtrust.store.locations import LOCATION_COLUMNS, LOCATION_STORED_COLUMNS
from fieldtrust.store.queue_cache import append_batch as append_queue_batch
from fieldtrust.store.rollup import (
    append_batch,
    counted_sources,
    record_extractor_versions,
    store_name,
)
from fieldtrust.store.sql import quote_ident

from fieldtrust.errors import InputError, Refused, ValidationError

#: An extraction's columns, in stored order, before its document location.
EXTRACTION_COLUMNS = (
    "extraction_id",
    "doc_id",
    "doc_type",
    "form_version",
    "field",
    "value",
    "value_status",
    "confidence",
    "model",
    "extracted_at",
    "conflict",
    "conflict_value",
    "source_excerpt",
    "extractor_version",
)
REQUIRED_COLUMNS = ("doc_id", "doc_type", "field", "confidence", "extracted_at")
#: The rest of an extraction's columns, then its location (document_uri, page,
#: bbox), which ingest.location_rules checks.
OPTIONAL_COLUMNS = (
    *(column for column in EXTRACTION_COLUMNS if column not in REQUIRED_COLUMNS),
    *LOCATION_COLUMNS,
)
VALUE_STATUSES = ("present", "null", "unclear", "other")

#: An absent extraction_id is the SHA-256 (hex) of these fields joined by "|",
#: the model empty when absent and extracted_at in UTC as
#: ``YYYY-MM-DD HH:MM:SS.ffffff``.
DERIVED_ID = ("doc_id", "doc_type", "field", "model", "extracted_at")

_STORED = (*EXTRACTION_COLUMNS, *LOCATION_STORED_COLUMNS)
#: The columns a stored extraction has (besides batch_id).
STORED_COLUMNS = _STORED


@dataclass(frozen=True)
class IngestResult:
    """What one file (or table) did to the store.

    ``rows_already_stored`` counts rows skipped because their extraction_id
    was stored before (every row, when the same content was ingested before;
    ``batch_id`` is then that earlier batch).
    """

    batch_id: str
    source: str
    fmt: str
    rows_in_file: int
    rows_added: int
    rows_already_stored: int
    #: The file's columns left out (``ignore_unknown``): none of ours, after the mapping.
    columns_ignored: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (what ``--json`` prints)."""
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class _Input:
    source: str
    fmt: str
    sha256: str
    staged: Staged | None  # None: this content was ingested before
    copy: Snapshot | None = None  # the private copy the rows are read from
    ignored: tuple[str, ...] = ()


#: Every column an extraction file may have, in our names.
INGEST_COLUMNS = (*REQUIRED_COLUMNS, *OPTIONAL_COLUMNS)
#: What an extraction file's unknown column may be instead of an error.
UNKNOWN_COLUMN_HINT = "; map it (--columns) or leave it out (--ignore-unknown)"


def check_mapping(columns: Mapping[str, str]) -> dict[str, str]:
    """A column mapping (ours -> the file's name) checked; ours must be ingest columns.

    The same table maps a lake source's columns (``[columns]`` in the settings
    file, :class:`fieldtrust.ingest.sources.SourceConfig`).

    Raises
    ------
    InputError
        A name of ours that is no ingest column, or an empty name of theirs.
    """
    checked: dict[str, str] = {}
    for ours, theirs in columns.items():
        if ours not in INGEST_COLUMNS:
            raise InputError(
                f"column mapping: {ours!r} is not an extraction column"
                f" (known: {', '.join(INGEST_COLUMNS)})"
            )
        if not str(theirs).strip():
            raise InputError(f"column mapping: {ours!r} maps to an empty name")
        checked[ours] = str(theirs).strip()
    return checked


def ingest_files(
    con: duckdb.DuckDBPyConnection,
    paths: Sequence[str | os.PathLike[str]],
    *,
    progress: Progress | None = None,
    window: TimeWindow | None = None,
    columns: Mapping[str, str] | None = None,
    ignore_unknown: bool = False,
) -> list[IngestResult]:
    """Validate every file, then add all of them to the store in one transaction.

    Parameters
    ----------
    paths
        Files ending in .csv, .parquet, .jsonl / .ndjson, or .json (JSON Lines
        or one array of objects).
    progress
        Called as ``progress(stage, rows_done, rows_total)`` as each step
        (reading, validating, storing a file) starts and, while it runs,
        whenever more of its rows are done (:mod:`fieldtrust.ingest.query_progress`);
        ``rows_total`` is 0 while a CSV or JSON file is parsed, then the
        file's rows. Last comes ``("done", rows, rows)``.
    window
        Accepted extraction times; default from 2000-01-01 to a day from now.
    columns
        Your column names: ours -> the file's (``{"doc_type": "kind"}``), the
        ``[columns]`` table of the settings that a lake source reads too.
    ignore_unknown
        Leave out the file's columns that are none of ours (after the
        mapping) instead of refusing the file; each result names them.

    Returns
    -------
    list of IngestResult
        One per path, in order.

    Raises
    ------
    ValidationError
        A file cannot be read or has a bad row (the first such file is
        reported); nothing was written. The message lists the first 20
        problems by 1-based data row, and their count.
    """
    refuse_counting_twice(con, ", ".join(Path(p).name for p in paths))
    tracker = RowProgress(con, progress)
    inputs: list[_Input] = []
    mapping = check_mapping(columns or {})
    ensure_utc(con)
    try:
        tracker.start()
        for path in paths:
            source, fmt = Path(path).name, detect_format(path)
            tracker.step(f"reading {source}", 0)
            copy = snapshot(path, fmt)
            if first_batch(con, copy.sha256) is not None:
                drop_snapshot(copy)
                tracker.step(f"skipping {source}: ingested before", 0)
                inputs.append(_Input(source, fmt, copy.sha256, None))
                continue
            inputs.append(_Input(source, fmt, copy.sha256, None, copy))  # dropped below
            staged = stage_file(con, copy, fmt, temp_name("ft_ingest"))
            inputs[-1] = replace(inputs[-1], staged=staged)
            _refuse_unmapped(source, staged, mapping)
            mapped = map_columns(con, staged, mapping, known=INGEST_COLUMNS,
                                 ignore_unknown=ignore_unknown, source=source)
            staged = mapped.staged
            inputs[-1] = replace(inputs[-1], staged=staged, ignored=mapped.ignored)
            tracker.step(f"validating {source}", staged.rows)
            validate_extractions(con, staged, source=source, window=window, progress=tracker.part)
        results = []
        with transaction(con):
            for item in inputs:
                tracker.step(f"storing {item.source}", item.staged.rows if item.staged else 0)
                results.append(_store(con, item))
        tracker.finish(sum(item.staged.rows for item in inputs if item.staged))
        return results
    finally:
        tracker.stop()
        for item in inputs:
            drop_staged(con, item.staged)
            drop_snapshot(item.copy)


def ingest_table(
    con: duckdb.DuckDBPyConnection,
    table: pa.Table,
    *,
    source: str,
    fmt: str = "arrow",
    source_sha256: str | None = None,
    window: TimeWindow | None = None,
) -> IngestResult:
    """Validate in-memory rows and add them, as :func:`ingest_files` does for a file.

    Parameters
    ----------
    con
        A read-write store connection, not inside a transaction: the rows get
        their own, all or nothing.
    table
        Rows with the columns of the file formats (docs/ingest.md); typed
        columns (float confidence, timestamp extracted_at) or text.
    source
        Name recorded in ``ingest_batches`` and used in error messages.
    fmt
        Recorded as the batch's format ('demo', 'extract', ...).
    source_sha256
        Identity of the content for re-ingest checks; by default the SHA-256
        of the table's Arrow IPC stream.

    Raises
    ------
    ValidationError
        A bad row; nothing was written.
    """
    refuse_counting_twice(con, source)
    sha = source_sha256 or arrow_sha256(table)
    ensure_utc(con)
    if first_batch(con, sha) is not None:
        with transaction(con):
            return _store(con, _Input(source, fmt, sha, None))
    staged = None
    try:
        staged = stage_arrow(con, table, temp_name("ft_ingest"), source)
        validate_extractions(con, staged, source=source, window=window)
        with transaction(con):
            return _store(con, _Input(source, fmt, sha, staged))
    finally:
        drop_staged(con, staged)


def refuse_counting_twice(con: duckdb.DuckDBPyConnection, source: str) -> None:
    """Refuse to ingest ``source`` into a store that counts a lake source.

    The lake's counts and the ingested rows would both count what the two
    hold in common (the fault a refresh into a store with ingested rows had too).

    Raises
    ------
    Refused
        The store counts a lake source (``fieldtrust refresh``).
    """
    lakes = counted_sources(con)
    if lakes:
        raise Refused(
            f"{store_name(con)} counts the lake source {lakes[0]}: ingesting {source} too"
            " would count every row both hold twice; add the rows to the lake and run"
            " `fieldtrust refresh`, or ingest them into a store of its own"
        )


def _refuse_unmapped(source: str, staged: Staged, mapping: dict[str, str]) -> None:
    """A required column the mapping reads from a column the file lacks, said as such."""
    lacking = [(ours, theirs) for ours, theirs in mapping.items()
               if ours in REQUIRED_COLUMNS and theirs not in staged.dtypes
               and ours not in staged.dtypes]
    if lacking:
        raise ValidationError(source, [
            f"missing required column {ours}: the column mapping reads it from {theirs!r},"
            f" which the file lacks (columns found: {', '.join(list(staged.dtypes)[:10])})"
            for ours, theirs in lacking
        ])


# --- validation ---------------------------------------------------------------------


#: Columns that name things (ids and strata): held to :func:`key_rules`.
KEY_COLUMNS = ("extraction_id", "doc_id", "doc_type", "field", "form_version", "model",
               "extractor_version")
#: The key columns naming strata and segments: few distinct values, however many rows.
STRATUM_COLUMNS = ("doc_type", "field", "form_version", "model", "extractor_version")


def validate_extractions(
    con: duckdb.DuckDBPyConnection,
    staged: Staged,
    *,
    source: str,
    window: TimeWindow | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> None:
    """Raise :class:`ValidationError` unless every staged row can be stored.

    Rules (docs/ingest.md): required columns present and nothing unknown;
    required values not blank; confidence a finite number in [0, 1];
    extracted_at an ISO 8601 timestamp inside ``window`` (default
    :class:`~fieldtrust.ingest.rules.TimeWindow`); keys plain text of at
    most 256 characters; value_status one of
    :data:`VALUE_STATUSES` and consistent with value; conflict a boolean;
    extraction_id (given or derived) unique within the input. ``progress(done,
    parts)`` hears how many of the check's queries are done.
    """
    dtypes = staged.dtypes
    check_columns(source, dtypes, required=REQUIRED_COLUMNS, optional=OPTIONAL_COLUMNS,
                  unknown_hint=UNKNOWN_COLUMN_HINT)
    raise_problems(
        con, staged, extraction_rules(dtypes, window), [_unique_id(dtypes)], source=source,
        progress=progress,
    )


def extraction_rules(dtypes: dict[str, str], window: TimeWindow | None = None) -> list[Rule]:
    """The row rules of :func:`validate_extractions` (a lake source checks the same)."""
    return [
        *required_rules(REQUIRED_COLUMNS, dtypes),
        *_confidence_rules(dtypes["confidence"]),
        *timestamp_rules("extracted_at", dtypes, window),
        *key_rules(KEY_COLUMNS, dtypes, few_values=STRATUM_COLUMNS),
        *choice_rules("value_status", VALUE_STATUSES, dtypes),
        *_status_value_rules(dtypes),
        *boolean_rules("conflict", dtypes),
        *location_rules(dtypes),
    ]


def _confidence_rules(dtype: str) -> list[Rule]:
    given = f"NOT {missing_sql('confidence', dtype)}"
    number = number_sql("confidence", dtype)
    raw = raw_sql("confidence", dtype)
    rules = [
        # "+ 0": DuckDB prunes Parquet row groups by their min/max statistics, which
        # leave NaN out, so a bare isfinite(confidence) never sees a NaN there.
        Rule("confidence", "{value} is not a number in [0, 1]", f"NOT isfinite({number} + 0)",
             raw),
        Rule(
            "confidence",
            "{value} is outside [0, 1]",
            f"isfinite({number}) AND ({number} < 0 OR {number} > 1)",
            raw,
        ),
    ]
    if dtype == "VARCHAR":
        rules.insert(
            0, Rule("confidence", "'{value}' is not a number", f"{given} AND {number} IS NULL", raw)
        )
    return rules


def _status_value_rules(dtypes: dict[str, str]) -> list[Rule]:
    """'null' means the field is absent, so it carries no value; 'present' needs one."""
    if "value_status" not in dtypes:
        return []
    status = choice_sql("value_status", dtypes["value_status"], VALUE_STATUSES)
    value = _value_sql(dtypes)
    return [
        Rule(
            "value_status",
            "'null' but the value is '{value}'; null means the field is absent:"
            " clear the value, or say 'unclear' or 'other'",
            f"{status} = 'null' AND {value} IS NOT NULL",
            value,
        ),
        Rule(
            "value",
            "missing, but value_status is 'present'; give the value or say 'null'",
            f"{status} = 'present' AND {value} IS NULL",
        ),
    ]


def _unique_id(dtypes: dict[str, str]) -> Unique:
    if "extraction_id" in dtypes:
        message = "'{value}' repeats row {extra} (ids must be unique within a file)"
    else:
        message = (
            "row {extra} has the same doc_id, doc_type, field, model and extracted_at,"
            " so the same derived id; add an extraction_id column or drop the repeat"
        )
    # Without the column the id is a hash of five parts: the parts themselves
    # tell repeats apart as well, without hashing a million rows twice.
    parts = [*_id_parts(dtypes)[:-1], timestamp_sql("extracted_at", dtypes["extracted_at"])]
    quick = None if "extraction_id" in dtypes else f"({', '.join(parts)})"
    return Unique("extraction_id", message, _id_sql(dtypes), quick)


# --- typed rows ---------------------------------------------------------------------


def _col(dtypes: dict[str, str], name: str) -> tuple[str | None, str | None]:
    return (name, dtypes[name]) if name in dtypes else (None, None)


def _value_sql(dtypes: dict[str, str]) -> str:
    """The value as written, NULL when absent or blank (a blank value is no value)."""
    column, dtype = _col(dtypes, "value")
    return _kept_text(column, dtype)


def _kept_text(column: str | None, dtype: str | None) -> str:
    """Free text kept as written (not trimmed), NULL when absent or blank."""
    if column is None:
        return "CAST(NULL AS VARCHAR)"
    return f"CASE WHEN NOT {missing_sql(column, dtype)} THEN {raw_sql(column, dtype)} END"


def _id_parts(dtypes: dict[str, str]) -> list[str]:
    """The text of the :data:`DERIVED_ID` fields, as the derived id hashes them."""
    return [
        text_sql("doc_id", dtypes["doc_id"]),
        text_sql("doc_type", dtypes["doc_type"]),
        text_sql("field", dtypes["field"]),
        f"coalesce({text_sql(*_col(dtypes, 'model'))}, '')",
        f"strftime({timestamp_sql('extracted_at', dtypes['extracted_at'])},"
        " '%Y-%m-%d %H:%M:%S.%f')",
    ]


def _id_sql(dtypes: dict[str, str]) -> str:
    """The given extraction_id, or the one derived from the row (:data:`DERIVED_ID`)."""
    # || (not concat_ws) so a row missing a part has no id rather than a wrong one.
    joined = " || '|' || ".join(_id_parts(dtypes))
    derived = f"sha256({joined})"
    if "extraction_id" not in dtypes:
        return derived
    return f"coalesce({text_sql('extraction_id', dtypes['extraction_id'])}, {derived})"


def typed_select(dtypes: dict[str, str]) -> str:
    """SELECT list of the stored columns of valid rows with these column types."""
    return _typed_select(dtypes)


def typed_columns(dtypes: dict[str, str]) -> dict[str, str]:
    """Each stored column's SQL expression over rows with these column types."""
    return dict(zip(_STORED, _typed_expressions(dtypes), strict=True))


def _typed_select(dtypes: dict[str, str]) -> str:
    """SELECT list giving the stored columns (:data:`_STORED`) of valid staged rows."""
    return ", ".join(
        f"{sql} AS {quote_ident(name)}" for name, sql in typed_columns(dtypes).items()
    )


def _typed_expressions(dtypes: dict[str, str]) -> list[str]:
    """The expressions of :func:`_typed_select`, in :data:`_STORED` order."""
    value = _value_sql(dtypes)
    status = choice_sql(*_col(dtypes, "value_status"), VALUE_STATUSES)
    expressions = [
        _id_sql(dtypes),
        text_sql("doc_id", dtypes["doc_id"]),
        text_sql("doc_type", dtypes["doc_type"]),
        f"coalesce({text_sql(*_col(dtypes, 'form_version'))}, 'unknown')",
        text_sql("field", dtypes["field"]),
        value,
        f"coalesce({status}, CASE WHEN {value} IS NULL THEN 'null' ELSE 'present' END)",
        number_sql("confidence", dtypes["confidence"]),
        text_sql(*_col(dtypes, "model")),
        timestamp_sql("extracted_at", dtypes["extracted_at"]),
        f"coalesce({boolean_sql(*_col(dtypes, 'conflict'))}, false)",
        _kept_text(*_col(dtypes, "conflict_value")),
        _kept_text(*_col(dtypes, "source_excerpt")),
        f"coalesce({text_sql(*_col(dtypes, 'extractor_version'))}, 'unknown')",
        *location_select(dtypes),
    ]
    return expressions


# --- writing ------------------------------------------------------------------------


#: Each table of file batches, with the column that orders its batches in time.
_BATCH_TIMES = {"ingest_batches": "ingested_at", "label_imports": "imported_at"}


def first_batch(
    con: duckdb.DuckDBPyConnection, sha: str, batches: str = "ingest_batches"
) -> tuple[str, int] | None:
    """(batch_id, rows_in_file) of the first batch that read a file of SHA-256 ``sha``.

    ``batches`` is ``ingest_batches`` (extraction files) or ``label_imports``
    (labels files); None when no batch read such a file.
    """
    order = _BATCH_TIMES[batches]
    row = con.execute(
        f"SELECT batch_id, rows_in_file FROM {quote_ident(batches)} WHERE source_sha256 = ?"
        f" ORDER BY {quote_ident(order)} LIMIT 1",
        [sha],
    ).fetchone()
    return None if row is None else (str(row[0]), int(row[1]))


def _store(con: duckdb.DuckDBPyConnection, item: _Input) -> IngestResult:
    """Insert one validated input's new rows; runs inside the transaction."""
    # Asked again here: the same content may come twice in one call.
    earlier = first_batch(con, item.sha256)
    if earlier is not None or item.staged is None:
        batch_id, rows = earlier or ("", 0)
        return IngestResult(batch_id, item.source, item.fmt, rows, 0, rows)
    staged = item.staged
    batch_id = f"{item.fmt}-{item.sha256[:16]}"
    typed = f"(SELECT {_typed_select(staged.dtypes)} FROM {staged.relation})"
    columns = ", ".join(_STORED)
    row = con.execute(
        f"INSERT INTO extractions ({columns}, batch_id)"
        f" SELECT t.*, ? FROM {typed} t WHERE NOT EXISTS"
        " (SELECT 1 FROM extractions e WHERE e.extraction_id = t.extraction_id)",
        [batch_id],
    ).fetchone()
    added = int(row[0]) if row else 0
    append_batch(con, batch_id, added)
    append_queue_batch(con, batch_id, added)
    # A first_seen_at moves only earlier: a late file may hold older rows.
    con.execute(
        "INSERT INTO form_versions"
        f" SELECT doc_type, form_version, min(extracted_at) FROM {typed} GROUP BY ALL"
        " ON CONFLICT (doc_type, form_version) DO UPDATE"
        " SET first_seen_at = least(form_versions.first_seen_at, excluded.first_seen_at)"
    )
    record_extractor_versions(con, typed)
    con.execute(
        "INSERT INTO ingest_batches VALUES (?, ?, ?, ?, ?, ?, ?)",
        [batch_id, item.source, item.sha256, item.fmt, staged.rows, added, utc_now()],
    )
    return IngestResult(batch_id, item.source, item.fmt, staged.rows, added, staged.rows - added,
                        item.ignored)
