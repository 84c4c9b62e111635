"""Importing human labels from a file (CSV or JSON Lines), validated like ingest.

Each row labels one stored extraction: ``extraction_id`` and ``verdict``
(correct / incorrect / unclear), optionally ``reviewer``, ``corrected_value``,
``corrected_status``, ``error_type``, ``error_detail``, ``labeled_at`` and
``sample_id``. The file written by ``fieldtrust sample --out`` is accepted as
it is: its item columns (doc_type, field, value, confidence...) are context
for the reviewer and are ignored here, and rows whose verdict is still blank
are skipped and counted, so a half-labelled sample can be imported.

The acting user must hold a role allowed to ``import_labels`` (qa_lead or
admin, :data:`fieldtrust.store.access.PERMISSIONS`), and every row is held to the rules
of recording a verdict (:func:`fieldtrust.labels.verdicts.verdict_problems`): an error
type from the taxonomy, a detail for ``other``, nothing of the sort on
``correct``. History that records only the verdict is accepted: an
``incorrect`` row without an error type is stored with the type
``not_recorded``, one without a corrected value keeps it unknown, and the
result counts such rows (``rows_without_details``); and each reviewer
name to those of a user name (one line, no control characters). A file is
checked in two passes, its shape and ids in SQL and then those rules per
row; either pass rejects the whole file, naming row, column and value.

Imported labels get ``review_round = 'import'``. Without a ``sample_id`` the
extraction is in no audit design: its label is ``non_random`` (no weight)
unless the import declares the file a simple random sample
(``random_sample=True``, ``--random-sample``), recorded in
``label_import_designs`` (STATS.md sections 2 and 10).

Import is idempotent: a file already imported (same SHA-256, table
``label_imports``) adds nothing, and a label identical to a stored one (same
extraction_id, verdict, reviewer and labeled_at) is not added again. Its
``label_id`` is the SHA-256 of those four, so the same label always has the
same id.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
from fieldtrust.ingest.extractions import EXTRACTION_COLUMNS, first_batch
from fieldtrust.ingest.readers import (
    MAX_PROBLEMS,
    Snapshot,
    Staged,
    detect_format,
    drop_snapshot,
    drop_staged,
    snapshot,
    stage_file,
    temp_name,
)
from fieldtrust.ingest.rules import (
    Rule,
    TimeWindow,
    check_columns,
    choice_rules,
    choice_sql,
    ensure_utc,
    raise_problems,
    raw_sql,
    required_rules,
    text_sql,
    timestamp_rules,
    timestamp_sql,
)
from fieldtrust.labels.verdicts import verdict_fields, verdict_problems
from fieldtrust.store.access import require, user_name
from fieldtrust.store.chain import chain_returned, chain_rows
from fieldtrust.store.connection import utc_now
from fieldtrust.store.retry import write_with_retry
from fieldtrust.store.rollup import record_sampled
from fieldtrust.store.spreadsheet import unescape_sql
from fieldtrust.store.sql import quote_ident

from fieldtrust.errors import FieldError, InputError, ValidationError

REQUIRED_COLUMNS = ("extraction_id", "verdict")
OPTIONAL_COLUMNS = (
    "reviewer",
    "corrected_value",
    "corrected_status",
    "error_type",
    "error_detail",
    "labeled_at",
    "sample_id",
)
#: Columns a sample file carries for the reviewer's eyes; read past, not stored.
CONTEXT_COLUMNS = (
    *(c for c in EXTRACTION_COLUMNS if c != "extraction_id"),
    "cell",
    "inclusion_prob",
    # written by `labels export`: the label's history, read past so an export imports
    "label_id",
    "review_round",
    "supersedes",
    "superseded_by",
    "effective",
    "import_batch_id",
)
#: A label time later than now by more than this is refused: it would outrank
#: every later correction for good. Allows for clocks a little ahead.
CLOCK_SKEW = dt.timedelta(minutes=5)
VERDICTS = ("correct", "incorrect", "unclear")
STATUSES = ("present", "null", "unclear", "other")
#: A problem line is cut to this length: a 1 MB value must not make a 1 MB message.
_SHOWN_LINE = 300


@dataclass(frozen=True)
class LabelImportResult:
    """What one labels file did to the store.

    ``rows_already_stored`` counts rows with a verdict that added nothing (the
    same label was stored before, or repeats in the file);
    ``rows_without_verdict`` counts rows skipped because their verdict is blank.
    """

    batch_id: str
    source: str
    rows_in_file: int
    rows_added: int
    rows_already_stored: int
    rows_without_verdict: int
    #: Rows with an 'incorrect' verdict but no error type or no corrected value
    #: (stored as error type ``not_recorded`` / an unknown correction).
    rows_without_details: int = 0
    #: Label Studio annotations that were cancelled (skipped), counted and not stored.
    rows_cancelled: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (what ``--json`` prints)."""
        return dataclasses.asdict(self)


#: Columns only a Label Studio export brings (labels.label_studio.export_rows).
LABEL_STUDIO_COLUMNS = ("review_round", "lead_time_seconds")
#: Import formats: a labels file, or a Label Studio JSON export.
FORMATS = ("auto", "label-studio")


def import_labels(
    con: duckdb.DuckDBPyConnection,
    path: str | os.PathLike[str],
    *,
    actor: str,
    reviewer_default: str = "import",
    window: TimeWindow | None = None,
    random_sample: bool = False,
    format: str = "auto",
) -> LabelImportResult:
    """Validate a labels file and add its labels to the store in one transaction.

    Parameters
    ----------
    con
        A read-write store connection.
    path
        A .csv, .jsonl / .ndjson, .json or .parquet file (docs/ingest.md).
    actor
        Who imports; needs the role qa_lead or admin. Recorded in
        ``label_imports.imported_by``.
    reviewer_default
        Reviewer recorded for rows that name none.
    window
        Accepted ``labeled_at`` times, from its ``earliest`` (default
        2000-01-01); never later than now plus :data:`CLOCK_SKEW`.
    random_sample
        The file's items were drawn as a simple random sample of each
        (doc_type, field) and ISO week they cover: its labels become
        ``random_import`` and enter estimates with weight ``N / n``.
    format
        ``auto`` (by the file's extension) or ``label-studio``: a Label Studio
        JSON export of tasks written by ``fieldtrust sample --format
        label-studio`` (:mod:`fieldtrust.labels.label_studio`). Its first
        annotation of a task is the primary review, a second one a blind second
        review; cancelled annotations are counted in ``rows_cancelled``.

    Returns
    -------
    LabelImportResult

    Raises
    ------
    PermissionDenied
        ``actor`` may not import labels; nothing was read.
    ValidationError
        The file cannot be read or has a bad row (an unknown extraction_id,
        a verdict outside correct / incorrect / unclear, an error type not in
        the taxonomy, ...); nothing was written. The message lists the first
        20 problems and their count.
    """
    actor = user_name(actor, what="acting user")
    reviewer_default = user_name(reviewer_default, what="default reviewer")
    if format not in FORMATS:
        raise ValidationError(Path(path).name, [f"format {format!r} is not one of"
                                                f" {', '.join(FORMATS)}"])
    require(con, actor, "import_labels")
    source = Path(path).name
    # A Label Studio export is one JSON document, not JSON Lines: no line limit.
    fmt = "label-studio" if format == "label-studio" else detect_format(path)
    copy = snapshot(path, fmt)
    sha = copy.sha256
    # Every way out drops the private copy: a file imported before, an import, an error.
    try:
        ensure_utc(con)
        earlier = first_batch(con, sha, "label_imports")
        if earlier is not None:
            batch_id, rows = earlier
            return LabelImportResult(batch_id, source, rows, 0, 0, 0)
        options = _Options(actor, reviewer_default, window, random_sample)
        if format == "label-studio":
            return _import_label_studio(con, copy, source, sha, options)
        return _import_file(con, copy, fmt, source, sha, options)
    finally:
        drop_snapshot(copy)


@dataclasses.dataclass(frozen=True)
class _Options:
    """What one import was asked: who acts, the default reviewer, the time window, the design."""

    actor: str
    reviewer_default: str
    window: TimeWindow | None
    random_sample: bool


def _import_label_studio(
    con: duckdb.DuckDBPyConnection, copy: Snapshot, source: str, sha: str, options: _Options,
) -> LabelImportResult:
    """Read the export into label rows, then import them like a file (same checks)."""
    import json
    import tempfile

    from fieldtrust.labels.label_studio import export_rows

    read = export_rows(copy.path, source=source)
    if not read.rows:
        raise ValidationError(source, [
            f"no annotations to import ({read.cancelled} cancelled); label the tasks first"
        ])
    with tempfile.TemporaryDirectory() as folder:
        rows_file = Path(folder) / "annotations.jsonl"
        rows_file.write_text(
            "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in read.rows), encoding="utf-8"
        )
        # Messages name the user's file, never this private one.
        rows = dataclasses.replace(snapshot(rows_file, "jsonl"), source=source)
        try:
            result = _import_file(con, rows, "jsonl", source, sha, options, label_studio=True)
        except ValidationError as exc:
            raise _by_task(exc, read.task_rows) from exc
        finally:
            drop_snapshot(rows)
    return dataclasses.replace(result, rows_cancelled=read.cancelled)


def _by_task(exc: ValidationError, task_rows: list[int]) -> ValidationError:
    """``exc`` with its rows (one per annotation) renumbered as the export's tasks."""
    def task(match: re.Match[str]) -> str:
        number = int(match.group(1))
        return f"row {task_rows[number - 1]}" if 0 < number <= len(task_rows) else match[0]

    return ValidationError(exc.source, [re.sub(r"^row (\d+)", task, p) for p in exc.problems],
                           exc.total)


def _import_file(
    con: duckdb.DuckDBPyConnection, copy: Snapshot, fmt: str, source: str, sha: str,
    options: _Options, *, label_studio: bool = False,
) -> LabelImportResult:
    """Stage, check and store one file of label rows; ``source`` and ``sha`` name the original."""
    raw: Staged | None = None
    typed: Staged | None = None
    try:
        raw = stage_file(con, copy, fmt, temp_name("ft_labels_raw"))
        check_columns(
            source,
            raw.dtypes,
            required=REQUIRED_COLUMNS,
            optional=(*OPTIONAL_COLUMNS, *(LABEL_STUDIO_COLUMNS if label_studio else ())),
            ignored=CONTEXT_COLUMNS,
        )
        if fmt == "csv":
            _unescape(con, raw)
        typed = _typed(con, raw, options.reviewer_default)
        raise_problems(con, typed, _rules(raw.dtypes, options.window), source=source)
        lacking = _check_verdicts(con, typed, source)
        stored = write_with_retry(
            con,
            lambda tx: _store(tx, typed, source, sha, options.actor, options.random_sample),
            what=f"importing {source}",
        )
        return dataclasses.replace(stored, rows_without_details=lacking)
    finally:
        drop_staged(con, typed)
        drop_staged(con, raw)


def _unescape(con: duckdb.DuckDBPyConnection, raw: Staged) -> None:
    """Undo the spreadsheet escape of fieldtrust's CSV exports in every cell.

    (:mod:`fieldtrust.store.spreadsheet`): one leading ``'`` is dropped, so
    ``'-12.50`` is ``-12.50`` and ``''=X1`` is ``'=X1``. The staged rows are a
    temp table of this import, not history.
    """
    columns = [c for c, dtype in raw.dtypes.items() if dtype == "VARCHAR"]
    if not columns:
        return
    sets = ", ".join(f"{quote_ident(c)} = {unescape_sql(quote_ident(c))}" for c in columns)
    con.execute(f"UPDATE {raw.relation} SET {sets}")


def _col(dtypes: dict[str, str], name: str) -> tuple[str | None, str | None]:
    return (name, dtypes[name]) if name in dtypes else (None, None)


def _typed(con: duckdb.DuckDBPyConnection, raw: Staged, reviewer_default: str) -> Staged:
    """A temp table of the raw columns next to the typed label (``l_*`` columns).

    Label files are small (a sample's worth), so the typed rows are
    materialised once and every rule reads them.
    """
    d = raw.dtypes
    parsed_at = timestamp_sql("labeled_at", d["labeled_at"]) if "labeled_at" in d else "NULL"
    labeled_at = f"coalesce({parsed_at}, CAST($now AS TIMESTAMP))"
    reviewer = f"coalesce({text_sql(*_col(d, 'reviewer'))}, $reviewer)"
    typed_columns = {
        "l_extraction_id": text_sql("extraction_id", d["extraction_id"]),
        "l_verdict": choice_sql("verdict", d["verdict"], VERDICTS),
        "l_reviewer": reviewer,
        "l_labeled_at": labeled_at,
        "l_sample_id": text_sql(*_col(d, "sample_id")),
        "l_corrected_value": _kept_text(d, "corrected_value"),
        "l_corrected_status": choice_sql(*_col(d, "corrected_status"), STATUSES),
        "l_error_type": text_sql(*_col(d, "error_type")),
        "l_error_detail": _kept_text(d, "error_detail"),
        "l_review_round": f"coalesce({text_sql(*_col(d, 'review_round'))}, 'import')",
        "l_lead_time": (f"TRY_CAST({quote_ident('lead_time_seconds')} AS DOUBLE)"
                        if "lead_time_seconds" in d else "CAST(NULL AS DOUBLE)"),
    }
    selects = ", ".join(f"{sql} AS {name}" for name, sql in typed_columns.items())
    name = temp_name("ft_labels")
    # A repeat of (extraction, reviewer, labeled_at) must say the same thing;
    # rows still without a verdict are left out of that comparison.
    key = "l_extraction_id, l_reviewer, l_labeled_at, l_verdict IS NULL"
    con.execute(
        f"CREATE TEMP TABLE {quote_ident(name)} AS"
        " SELECT *,"
        " sha256(concat_ws('|', l_extraction_id, l_verdict, l_reviewer,"
        "   strftime(l_labeled_at, '%Y-%m-%d %H:%M:%S.%f'))) AS l_label_id,"
        " count(DISTINCT (l_verdict, l_corrected_value, l_corrected_status, l_error_type,"
        "   l_error_detail, l_sample_id))"
        f"   OVER (PARTITION BY {key}) AS l_variants,"
        f" min(l_row) OVER (PARTITION BY {key}) AS l_first,"
        # Who gave each item's primary review in this file: its blind second review
        # must be by someone else.
        " list(CASE WHEN l_review_round = 'primary' THEN l_reviewer END)"
        "   OVER (PARTITION BY l_extraction_id) AS l_primary_reviewers"
        f" FROM (SELECT *, {raw.row_sql} AS l_row, {selects} FROM {raw.relation})",
        {"now": utc_now(), "reviewer": reviewer_default},
    )
    described = con.execute(f"DESCRIBE {quote_ident(name)}").fetchall()
    dtypes = {str(r[0]): str(r[1]) for r in described}
    return Staged(name, False, "l_row", dtypes, raw.rows)


def _kept_text(dtypes: dict[str, str], name: str) -> str:
    column, dtype = _col(dtypes, name)
    if column is None:
        return "CAST(NULL AS VARCHAR)"
    return f"CASE WHEN {text_sql(column, dtype)} IS NOT NULL THEN {raw_sql(column, dtype)} END"


def _rules(dtypes: dict[str, str], window: TimeWindow | None) -> list[Rule]:
    earliest = (window or TimeWindow()).earliest
    return [
        *required_rules(["extraction_id"], dtypes),
        *choice_rules("verdict", VERDICTS, dtypes),
        *choice_rules("corrected_status", STATUSES, dtypes),
        *timestamp_rules("labeled_at", dtypes, TimeWindow(earliest, CLOCK_SKEW)),
        Rule(
            "extraction_id",
            "'{value}' is not in the store; ingest its extraction first, or check the store",
            "l_extraction_id IS NOT NULL AND NOT EXISTS"
            " (SELECT 1 FROM extractions e WHERE e.extraction_id = l_extraction_id)",
            "l_extraction_id",
        ),
        Rule(
            "sample_id",
            "'{value}' is not an audit sample in this store",
            "l_sample_id IS NOT NULL AND NOT EXISTS"
            " (SELECT 1 FROM audit_samples s WHERE s.sample_id = l_sample_id)",
            "l_sample_id",
        ),
        Rule(
            "sample_id",
            "extraction '{extra}' is not an item of sample '{value}'",
            "l_sample_id IS NOT NULL"
            " AND EXISTS (SELECT 1 FROM audit_samples s WHERE s.sample_id = l_sample_id)"
            " AND NOT EXISTS (SELECT 1 FROM audit_items i"
            "   WHERE i.sample_id = l_sample_id AND i.extraction_id = l_extraction_id)",
            "l_sample_id",
            "l_extraction_id",
        ),
        Rule(
            "extraction_id",
            "'{value}' already has a {extra} review in the store (recorded in the dashboard"
            " or imported before): adjudicate or supersede it there instead",
            "l_verdict IS NOT NULL AND l_review_round <> 'import' AND EXISTS"
            " (SELECT 1 FROM labels l WHERE l.extraction_id = l_extraction_id"
            "  AND l.review_round = l_review_round AND l.supersedes IS NULL"
            "  AND NOT (l.verdict = l_verdict AND l.reviewer = l_reviewer"
            "           AND l.labeled_at = l_labeled_at))",
            "l_extraction_id",
            "l_review_round",
        ),
        Rule(
            "reviewer",
            "'{value}' gave the primary review of extraction '{extra}' too; its second"
            " review is blind, by another reviewer: delete one of the two annotations",
            "l_verdict IS NOT NULL AND l_review_round = 'second'"
            " AND list_contains(l_primary_reviewers, l_reviewer)",
            "l_reviewer",
            "l_extraction_id",
        ),
        Rule(
            "extraction_id",
            "'{value}' is labelled differently on row {extra} by the same reviewer at the"
            " same labeled_at; keep one of the two",
            "l_verdict IS NOT NULL AND l_variants > 1 AND l_row > l_first",
            "l_extraction_id",
            "l_first",
        ),
    ]


def _check_verdicts(con: duckdb.DuckDBPyConnection, typed: Staged, source: str) -> int:
    """Hold every row with a verdict to :func:`record_verdict`'s rules; store what it cleans.

    Verdict-only history is accepted (``details_required=False``): an
    'incorrect' row without an error type gets ``not_recorded``, one without a
    corrected value keeps it unknown. Returns how many rows lacked such details.

    Raises one :class:`ValidationError` naming row, column and value of every
    problem. Otherwise writes the cleaned fields back to the staged rows (a
    corrected value alone gets status ``present``, a detail loses its spaces),
    so an imported label reads exactly like a recorded one.
    """
    rows = con.execute(
        "SELECT l_row, l_verdict, l_corrected_value, l_corrected_status, l_error_type,"
        f" l_error_detail, l_reviewer FROM {typed.relation} WHERE l_verdict IS NOT NULL"
        " ORDER BY l_row"
    ).fetchall()
    problems: list[str] = []
    cleaned = []
    lacking = 0
    for number, verdict, value, status, kind, detail, reviewer in rows:
        found: list[InputError] = [*verdict_problems(verdict, value, status, kind, detail,
                                                     details_required=False)]
        if verdict == "incorrect" and (kind is None or (value is None and status is None)):
            lacking += 1
        try:
            if user_name(reviewer, what="reviewer") != reviewer:
                found.append(FieldError("reviewer", f"{reviewer!r} has spaces around it"))
        except InputError as exc:
            found.append(FieldError("reviewer", str(exc)))
        problems += [_in_row(number, exc) for exc in found]
        if not found:
            fields = verdict_fields(verdict, value, status, kind, detail, details_required=False)
            new = (fields["corrected_value"], fields["corrected_status"], fields["error_type"],
                   fields["error_detail"])
            if new != (value, status, kind, detail):
                cleaned.append([*new, number])
    if problems:
        raise ValidationError(source, problems[:MAX_PROBLEMS], len(problems))
    if cleaned:
        # A temp table of this import, not history: the rows are not stored yet.
        con.executemany(
            f"UPDATE {typed.relation} SET l_corrected_value = ?, l_corrected_status = ?,"
            " l_error_type = ?, l_error_detail = ? WHERE l_row = ?",
            cleaned,
        )
    return lacking


def _in_row(number: int, exc: InputError) -> str:
    """``row N, column C: message``, without the column's name repeated, cut to one line."""
    column = exc.column if isinstance(exc, FieldError) else "verdict"
    text = str(exc).removeprefix(f"{column} ")
    line = f"row {number}, column {column}: {text}"
    return line if len(line) <= _SHOWN_LINE else line[: _SHOWN_LINE - 3] + "..."


def _store(
    con: duckdb.DuckDBPyConnection, typed: Staged, source: str, sha: str, actor: str,
    random_sample: bool = False,
) -> LabelImportResult:
    """Insert the new labels and record the import; runs inside the transaction."""
    batch_id = f"labels-{sha[:16]}"
    row = con.execute(
        "INSERT INTO labels (label_id, extraction_id, sample_id, verdict, corrected_value,"
        " corrected_status, error_type, error_detail, reviewer, review_round, labeled_at,"
        " supersedes, import_batch_id)"
        " SELECT DISTINCT l_label_id, l_extraction_id, l_sample_id, l_verdict, l_corrected_value,"
        " l_corrected_status, l_error_type, l_error_detail, l_reviewer, l_review_round,"
        " l_labeled_at,"
        f" NULL, ? FROM {typed.relation} t"
        " WHERE l_verdict IS NOT NULL AND NOT EXISTS (SELECT 1 FROM labels l"
        "   WHERE l.extraction_id = t.l_extraction_id AND l.verdict = t.l_verdict"
        "   AND l.reviewer = t.l_reviewer AND l.labeled_at = t.l_labeled_at)",
        [batch_id],
    ).fetchone()
    added = int(row[0]) if row else 0
    counted = con.execute(
        f"SELECT count(*) FILTER (WHERE l_verdict IS NULL) FROM {typed.relation}"
    ).fetchone()
    blank = int(counted[0]) if counted else 0
    con.execute(
        "INSERT INTO label_imports (batch_id, source, source_sha256, rows_in_file, rows_added,"
        " imported_at, imported_by) VALUES (?, ?, ?, ?, ?, ?, ?)",
        [batch_id, source, sha, typed.rows, added, utc_now(), actor],
    )
    # How long the annotator took (Label Studio's lead_time): kept beside the label.
    con.execute(
        f"INSERT INTO label_lead_times SELECT DISTINCT t.l_label_id, t.l_lead_time"
        f" FROM {typed.relation} t JOIN labels l ON l.label_id = t.l_label_id"
        " WHERE l.import_batch_id = ? AND t.l_lead_time IS NOT NULL",
        [batch_id],
    )
    chain_rows(con, "labels", {"import_batch_id": batch_id})
    chain_rows(con, "label_imports", {"batch_id": batch_id})
    if random_sample:
        declared = con.execute(
            "INSERT INTO label_import_designs VALUES (?, 'random_sample', ?, ?) RETURNING *",
            [batch_id, actor, utc_now()],
        )
        chain_returned(con, "label_import_designs", declared)
    # Labels are read with their extraction's columns from this copy.
    record_sampled(con, "SELECT extraction_id FROM labels WHERE import_batch_id = ?", [batch_id])
    return LabelImportResult(batch_id, source, typed.rows, added, typed.rows - blank - added, blank)
