"""Importing human labels from a file (CSV or JSON Lines), validated like ingest.

Each row labels one stored extraction: ``extraction_id`` and ``verdict``
(correct / incorrect / unclear), optionally ``reviewer``, ``corrected_value``,
``corrected_status``, ``error_type``, ``error_detail``, ``labeled_at`` and
``sample_id``. The file written by ``fieldtrust sample --out`` is accepted as
it is: its item columns (doc_type, field, value, confidence...) are context
for the reviewer and are ignored here, and rows whose verdict is still blank
are skipped and counted, so a half-labelled sample can be imported.

The acting user must hold a role allowed to ``import_labels`` (qa_lead or
admin, :data:`fieldtrust.store.access.PERMISSIONS`), and every row is held to
the one verdict rule (:mod:`fieldtrust.labels.verdict_rule`) the review page
uses: an error type from the taxonomy, a detail for ``other``, nothing of the
sort on ``correct``; an ``incorrect`` row without an error type is stored
with the type ``not_recorded``, one without a corrected value keeps it
unknown, and the result counts such rows (``rows_without_details``). Every
reviewer is a person of the store: a user name that holds (or held) a role
that labels, after the optional ``reviewer_map`` (Label Studio user ids or
e-mails to store users); a placeholder is refused by name. A label for an
item that already has labels is handled by :mod:`fieldtrust.labels.relabel`,
the same for every format: already stored, replacing the same reviewer's
older verdict, or refused. Every problem of the file is found in one run
(its shape and ids in SQL, then the rules per row) and reported together,
naming row, column and value; ``dry_run`` does all of it and writes nothing.

Imported labels get ``review_round = 'import'``. Without a ``sample_id`` the
extraction is in no audit design: its label is ``non_random`` (no weight)
unless the import declares the file a simple random sample
(``random_sample=True``, ``--random-sample``), recorded in
``label_import_designs`` (STATS.md sections 2 and 10).

Import is idempotent: a file already imported (same SHA-256, table
``label_imports``) adds nothing, and a label identical to a stored one (same
extraction_id, verdict, reviewer and labeled_at), or saying what its
reviewer's current label on the item says, is not added again. Its
``label_id`` is the SHA-256 of those four, so the same label always has the
same id.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
from fieldtrust.ingest.extractions import EXTRACTION_COLUMNS, first_batch
from fieldtrust.ingest.readers import (
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
    problem_rows,
    raw_sql,
    required_rules,
    text_sql,
    timestamp_rules,
    timestamp_sql,
)
from fieldtrust.labels import relabel
from fieldtrust.labels.verdict_rule import lacks_details, verdict_fields, verdict_problems
from fieldtrust.store.access import labelling_users, require, user_name
from fieldtrust.store.chain import chain_returned, chain_rows
from fieldtrust.store.connection import utc_now
from fieldtrust.store.locations import LOCATION_COLUMNS
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
    *LOCATION_COLUMNS,
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
#: Problems read from the SQL rules; past these only the count is kept.
_SQL_PROBLEMS = 10_000
#: Problem lines a rejection shows (the rest are counted).
_SHOWN_PROBLEMS = 20


@dataclass(frozen=True)
class LabelImportResult:
    """What one labels file did to the store.

    ``rows_added`` counts new labels, ``rows_replaced`` labels that replaced
    their reviewer's older verdict on the item (a superseding row; the old one
    stays in the history); ``rows_already_stored`` rows with a verdict that
    added nothing (the same label was stored before, or repeats in the file);
    ``rows_without_verdict`` rows skipped because their verdict is blank.
    ``dry_run``: nothing was written; the counts say what the import would do.
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
    #: Labels that superseded their reviewer's older label on the same item.
    rows_replaced: int = 0
    dry_run: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (what ``--json`` prints)."""
        return dataclasses.asdict(self)


#: Columns only a Label Studio export brings (labels.label_studio.export_rows).
LABEL_STUDIO_COLUMNS = ("review_round", "lead_time_seconds", "task_row", "task_id")
#: Import formats: a labels file, or a Label Studio JSON export.
FORMATS = ("auto", "label-studio")


def import_labels(
    con: duckdb.DuckDBPyConnection,
    path: str | os.PathLike[str],
    *,
    actor: str,
    reviewer_default: str | None = None,
    reviewer_map: Mapping[str, str] | None = None,
    window: TimeWindow | None = None,
    random_sample: bool = False,
    format: str = "auto",
    second_look: str | None = None,
    second_look_share: float | None = None,
    dry_run: bool = False,
) -> LabelImportResult:
    """Validate a labels file and add its labels to the store in one transaction.

    Parameters
    ----------
    path
        A .csv, .jsonl / .ndjson, .json or .parquet file (docs/ingest.md).
    actor
        Who imports; needs the role qa_lead or admin. Recorded in
        ``label_imports.imported_by``.
    reviewer_default
        Reviewer recorded for rows that name none (None: such a row is refused).
    reviewer_map
        Names in the file (a Label Studio user id or e-mail, a name of another
        tool) to store users: ``{"7": "ann", "bob@example.com": "bob"}``.
        After it, every reviewer must hold or have held a role that labels.
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
    second_look
        How a file that looks again at items already judged chose them
        (:data:`SECOND_LOOKS`): ``verdict_dependent`` (only the errors
        re-checked, a chosen subset: kept in the history, never in
        ``effective_labels`` or any estimate, so it cannot steer a
        certificate) or ``symmetric`` (a random share of every verdict,
        ``second_look_share``: counts as any label). Required, and refused
        when missing, as soon as a row gives a new verdict on an extraction
        that already has one; refused on a file that re-judges nothing.
    second_look_share
        ``symmetric`` only: the share of every verdict re-checked, in (0, 1].
    dry_run
        Check everything and count what would be added and replaced, but
        write nothing (a trial file never enters the append-only history).

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
        the taxonomy, a reviewer without a reviewer role, another reviewer's
        label on the item, ...); nothing was written. The message lists the
        first 20 problems of the whole file and their count.
    """
    actor = user_name(actor, what="acting user")
    if reviewer_default is not None:
        reviewer_default = user_name(reviewer_default, what="default reviewer")
    names = _reviewer_map(reviewer_map or {}, label_studio=format == "label-studio")
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
            return LabelImportResult(batch_id, source, rows, 0, 0, 0, dry_run=dry_run)
        _check_second_look(second_look, second_look_share, random_sample)
        options = _Options(actor, reviewer_default, window, random_sample, names, dry_run,
                           second_look, second_look_share)
        if format == "label-studio":
            return _import_label_studio(con, copy, source, sha, options)
        return _import_file(con, copy, fmt, source, sha, options)
    finally:
        drop_snapshot(copy)


@dataclasses.dataclass(frozen=True)
class _Options:
    """What one import was asked: who acts, the reviewers, the time window, the design."""

    actor: str
    reviewer_default: str | None
    window: TimeWindow | None
    random_sample: bool
    reviewer_map: dict[str, str]
    dry_run: bool
    second_look: str | None = None
    second_look_share: float | None = None


def _reviewer_map(given: Mapping[str, str], *, label_studio: bool) -> dict[str, str]:
    """The reviewer map checked; a Label Studio user id also names ``label-studio-user-ID``."""
    from fieldtrust.labels.label_studio import user_key

    names: dict[str, str] = {}
    for key, name in given.items():
        key = str(key).strip()
        if not key:
            raise InputError(f"reviewer map: an empty name maps to {name!r}")
        names[key] = user_name(name, what=f"reviewer map: {key!r} maps to the user name")
        if label_studio and key.isdigit():
            names.setdefault(user_key(int(key)), names[key])
    return names

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
            # Each row carries its task (task_row, task_id): problems name it themselves.
            result = _import_file(con, rows, "jsonl", source, sha, options, label_studio=True)
        finally:
            drop_snapshot(rows)
    return dataclasses.replace(result, rows_cancelled=read.cancelled)


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
        typed = _typed(con, raw, options)
        found, total = problem_rows(con, typed, _rules(raw.dtypes, options.window),
                                    limit=_SQL_PROBLEMS)
        checked = _check_rows(con, typed, {(row, column) for row, column, _ in found}, options)
        seeds, seed_rows = _seed_rows(con, typed)
        decided = relabel.plan([r for r in checked.incoming if r.extraction_id not in seeds],
                               _stored(con, typed), second_look=options.second_look is not None)
        problems = sorted([*found, *checked.problems, *decided.problems], key=lambda p: p[0])
        if problems:
            names = _row_names(con, typed) if label_studio else {}
            lines = [_line(names.get(row, f"row {row}"), column, message)
                     for row, column, message in problems[:_SHOWN_PROBLEMS]]
            raise ValidationError(source, lines,
                                  total + len(checked.problems) + len(decided.problems))
        _check_second_look_used(decided, source, options.second_look)
        _write_back(con, typed, checked.cleaned)
        counts = (decided.count("new"), decided.count("replaces"), decided.count("stored"))
        if options.dry_run:
            blank = typed.rows - len(decided.actions) - seed_rows
            return LabelImportResult(f"labels-{sha[:16]}", source, typed.rows,
                                     counts[0] + len(seeds), counts[2], blank, checked.lacking,
                                     rows_replaced=counts[1], dry_run=True)
        stored = write_with_retry(
            con,
            lambda tx: _store(tx, typed, decided, source, sha, options, seed_rows),
            what=f"importing {source}",
        )
        return dataclasses.replace(stored, rows_without_details=checked.lacking)
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


def _typed(con: duckdb.DuckDBPyConnection, raw: Staged, options: _Options) -> Staged:
    """A temp table of the raw columns next to the typed label (``l_*`` columns).

    Label files are small (a sample's worth), so the typed rows are
    materialised once and every rule reads them.
    """
    d = raw.dtypes
    parsed_at = timestamp_sql("labeled_at", d["labeled_at"]) if "labeled_at" in d else "NULL"
    labeled_at = f"coalesce({parsed_at}, CAST($now AS TIMESTAMP))"
    # The map's names are bound as lists: nothing from the file enters the SQL text.
    given = text_sql(*_col(d, "reviewer"))
    keys, names = "CAST($map_keys AS VARCHAR[])", "CAST($map_names AS VARCHAR[])"
    position = f"coalesce(list_position({keys}, {given}), 0)"
    mapped = f"CASE WHEN {position} > 0 THEN {names}[{position}] ELSE {given} END"
    reviewer = f"coalesce({mapped}, $reviewer)"
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
        "l_task": (f"concat('row ', {raw_sql('task_row', d['task_row'])}, ' (task ',"
                   f" {raw_sql('task_id', d['task_id'])}, ')')"
                   if "task_row" in d and "task_id" in d else "CAST(NULL AS VARCHAR)"),
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
        {"now": utc_now(), "reviewer": options.reviewer_default,
         "map_keys": list(options.reviewer_map), "map_names": list(options.reviewer_map.values())},
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
            " (SELECT 1 FROM extractions e WHERE e.extraction_id = l_extraction_id)"
            " AND NOT EXISTS (SELECT 1 FROM seed_items s WHERE s.seed_id = l_extraction_id)",
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
            "   WHERE i.sample_id = l_sample_id AND i.extraction_id = l_extraction_id)"
            " AND NOT EXISTS (SELECT 1 FROM seed_items s"
            "   WHERE s.sample_id = l_sample_id AND s.seed_id = l_extraction_id)",
            "l_sample_id",
            "l_extraction_id",
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


@dataclass
class _Checked:
    """The rows held to the verdict rule and the reviewer rules."""

    problems: list[tuple[int, str, str]]
    cleaned: list[list[Any]]  # [value, status, type, detail, row] to write back
    incoming: list[relabel.Incoming]
    lacking: int


_ROWS_SQL = (
    "SELECT l_row, l_verdict, l_corrected_value, l_corrected_status, l_error_type,"
    " l_error_detail, l_reviewer, l_label_id, l_extraction_id, l_labeled_at, l_review_round,"
    " l_sample_id FROM {relation} WHERE l_verdict IS NOT NULL ORDER BY l_row"
)


def _check_rows(
    con: duckdb.DuckDBPyConnection, typed: Staged, flagged: set[tuple[int, str]],
    options: _Options,
) -> _Checked:
    """Hold every row with a verdict to the verdict rule and the reviewer rules.

    ``flagged`` are the (row, column) pairs an SQL rule reported already, so no
    problem is told twice. What the rule cleans (a corrected value alone gets
    status ``present``, a detail loses its spaces) is returned to be written
    back, so an imported label reads exactly like a recorded one.
    """
    rows = con.execute(_ROWS_SQL.format(relation=typed.relation)).fetchall()
    labellers = labelling_users(con)
    problems: list[tuple[int, str, str]] = []
    unknown: dict[str, list[int]] = {}
    result = _Checked(problems, [], [], 0)
    for (number, verdict, value, status, kind, detail, reviewer, label_id, extraction_id,
         labeled_at, review_round, sample_id) in rows:
        found = [(number, e.column, _text(e)) for e in verdict_problems(
            verdict, value, status, kind, detail) if (number, e.column) not in flagged]
        who = _reviewer_problem(reviewer, options)
        if who is not None:
            found.append((number, "reviewer", who))
        elif reviewer not in labellers:
            unknown.setdefault(reviewer, []).append(number)
        if found or any(row == number for row, _ in flagged):
            problems += found
            continue
        fields = verdict_fields(verdict, value, status, kind, detail)
        result.lacking += lacks_details(fields)
        new = [fields["corrected_value"], fields["corrected_status"], fields["error_type"],
               fields["error_detail"]]
        if new != [value, status, kind, detail]:
            result.cleaned.append([*new, number])
        if reviewer in labellers:
            result.incoming.append(relabel.Incoming(
                number, label_id, extraction_id, reviewer, labeled_at, review_round,
                (verdict, *new), sample_id,
            ))
    problems += [_not_a_reviewer(name, numbers) for name, numbers in unknown.items()]
    return result


def _reviewer_problem(reviewer: str | None, options: _Options) -> str | None:
    """Why ``reviewer`` cannot be a label's reviewer as written, or None."""
    if reviewer is None:
        return ("blank, and no default reviewer was given: fill the column, or name who"
                " labelled with --reviewer NAME (reviewer_default)")
    try:
        if user_name(reviewer, what="reviewer") != reviewer:
            return f"{reviewer!r} has spaces around it"
    except InputError as exc:
        return str(exc).removeprefix("reviewer ")
    return None


def _not_a_reviewer(name: str, numbers: list[int]) -> tuple[int, str, str]:
    """One problem per name that holds no reviewer role, at its first row."""
    from fieldtrust.labels.label_studio import user_id

    others = f" (rows {_rows_text(numbers)})" if len(numbers) > 1 else ""
    ls_id = user_id(name)
    key = name if ls_id is None else str(ls_id)
    who = f"Label Studio user {ls_id}" if ls_id is not None else repr(name)
    return (numbers[0], "reviewer", (
        f"{who} is not a reviewer of this store{others}: map it to the store user who"
        f" labelled (--reviewer-map {key}=NAME), or grant that name the role"
        f" (fieldtrust users grant {key if ls_id is None else 'NAME'} reviewer --as ADMIN)"
    ))


def _rows_text(numbers: list[int], shown: int = 5) -> str:
    listed = ", ".join(str(n) for n in numbers[:shown])
    return listed + (f" and {len(numbers) - shown} more" if len(numbers) > shown else "")


def _text(exc: InputError) -> str:
    """The message of ``exc`` without its column's name repeated in front."""
    column = exc.column if isinstance(exc, FieldError) else "verdict"
    return str(exc).removeprefix(f"{column} ")


def _stored(con: duckdb.DuckDBPyConnection, typed: Staged) -> list[relabel.Stored]:
    """Every stored label of the file's extractions, with whether it is current."""
    rows = con.execute(
        "SELECT l.label_id, l.extraction_id, l.reviewer, l.labeled_at, l.review_round,"
        " l.verdict, l.corrected_value, l.corrected_status, l.error_type, l.error_detail,"
        " l.sample_id,"
        " NOT EXISTS (SELECT 1 FROM labels s WHERE s.supersedes = l.label_id) AS live,"
        " l.import_batch_id IS NOT NULL"
        f" FROM labels l SEMI JOIN {typed.relation} t ON t.l_extraction_id = l.extraction_id"
    ).fetchall()
    return [relabel.Stored(r[0], r[1], r[2], r[3], r[4], tuple(r[5:10]), bool(r[11]),
                           bool(r[12]), r[10]) for r in rows]


def _row_names(con: duckdb.DuckDBPyConnection, typed: Staged) -> dict[int, str]:
    """How a problem names each row of a Label Studio export: its task and position."""
    rows = con.execute(
        f"SELECT l_row, l_task FROM {typed.relation} WHERE l_task IS NOT NULL"
    ).fetchall()
    return {int(row): str(name) for row, name in rows}


def _write_back(con: duckdb.DuckDBPyConnection, typed: Staged, cleaned: list[list[Any]]) -> None:
    if cleaned:
        # A temp table of this import, not history: the rows are not stored yet.
        con.executemany(
            f"UPDATE {typed.relation} SET l_corrected_value = ?, l_corrected_status = ?,"
            " l_error_type = ?, l_error_detail = ? WHERE l_row = ?",
            cleaned,
        )


def _seed_rows(con: duckdb.DuckDBPyConnection, typed: Staged) -> tuple[set[str], int]:
    """The seeds the file's rows judge, and how many rows with a verdict judge one."""
    found = con.execute(
        f"SELECT t.l_extraction_id FROM {typed.relation} t"
        " WHERE t.l_verdict IS NOT NULL"
        "   AND EXISTS (SELECT 1 FROM seed_items s WHERE s.seed_id = t.l_extraction_id)"
    ).fetchall()
    return {str(r[0]) for r in found}, len(found)


def _store_seed_verdicts(con: duckdb.DuckDBPyConnection, typed: Staged) -> int:
    """Rows judging a seed become seed verdicts, never labels (the first verdict of each)."""
    inserted = con.execute(
        "INSERT INTO seed_verdicts (seed_verdict_id, seed_id, sample_id, reviewer, verdict,"
        " judged_at)"
        " SELECT l_label_id, s.seed_id, s.sample_id, l_reviewer, l_verdict, l_labeled_at"
        f" FROM {typed.relation} t JOIN seed_items s ON s.seed_id = t.l_extraction_id"
        " WHERE l_verdict IS NOT NULL"
        "   AND NOT EXISTS (SELECT 1 FROM seed_verdicts v WHERE v.seed_id = s.seed_id)"
        " QUALIFY row_number() OVER (PARTITION BY s.seed_id ORDER BY l_labeled_at, l_row) = 1"
        " RETURNING *"
    )
    return chain_returned(con, "seed_verdicts", inserted)


#: How a second look at judged items chose them (``label_import_second_looks.selection``).
SECOND_LOOKS = ("verdict_dependent", "symmetric")


def _check_second_look(second_look: str | None, share: float | None, random_sample: bool) -> None:
    if second_look is not None and second_look not in SECOND_LOOKS:
        raise InputError(
            f"second look {second_look!r} is not one of {', '.join(SECOND_LOOKS)}"
        )
    if second_look == "symmetric" and (share is None or not 0 < share <= 1):
        raise InputError(
            f"a symmetric second look needs the share of every verdict re-checked, in (0, 1];"
            f" got {share!r} (--second-look-share 0.1)"
        )
    if second_look != "symmetric" and share is not None:
        raise InputError("--second-look-share is for --second-look symmetric only")
    if second_look is not None and random_sample:
        raise InputError(
            "a file is a random sample of new items or a second look at judged ones, not"
            " both: drop --random-sample or --second-look"
        )


def _check_second_look_used(decided: relabel.Plan, source: str, second_look: str | None) -> None:
    """Refuse a declared second look that re-judges nothing (the declaration would be a
    mistake: say so now). An undeclared one is refused row by row (:func:`relabel.plan`)."""
    if second_look is not None and decided.second_looks == 0:
        raise InputError(
            f"{source} declares a second look but gives no new verdict on an item already"
            " judged; import it without --second-look; nothing was imported"
        )


def _declare_second_look(
    con: duckdb.DuckDBPyConnection, batch_id: str, options: _Options
) -> None:
    declared = con.execute(
        "INSERT INTO label_import_second_looks VALUES (?, ?, ?, ?, ?) RETURNING *",
        [batch_id, options.second_look, options.second_look_share, options.actor, utc_now()],
    )
    chain_returned(con, "label_import_second_looks", declared)


def _line(row: str, column: str, message: str) -> str:
    """``row N, column C: message``, cut to one line."""
    line = f"{row}, column {column}: {message}"
    return line if len(line) <= _SHOWN_LINE else line[: _SHOWN_LINE - 3] + "..."


def _store(
    con: duckdb.DuckDBPyConnection, typed: Staged, decided: relabel.Plan, source: str,
    sha: str, options: _Options, seed_rows: int = 0,
) -> LabelImportResult:
    """Insert the new and replacing labels and record the import; runs inside the transaction.

    ``seed_rows`` rows judge seeds: they become seed verdicts, never labels.
    """
    import pyarrow as pa

    actor, random_sample = options.actor, options.random_sample
    batch_id = f"labels-{sha[:16]}"
    seeds_judged = _store_seed_verdicts(con, typed)
    writes = [(row, a) for row, a in decided.actions.items() if a.kind != "stored"]
    plan_table = temp_name("ft_label_plan")
    con.register(plan_table, pa.table({
        "p_row": pa.array([row for row, _ in writes], pa.int64()),
        "p_round": pa.array([a.review_round for _, a in writes], pa.string()),
        "p_supersedes": pa.array([a.supersedes for _, a in writes], pa.string()),
        "p_sample_id": pa.array([a.sample_id for _, a in writes], pa.string()),
    }))
    try:
        # Oldest first, so a file's chain of one reviewer's verdicts is stored in order.
        con.execute(
            "INSERT INTO labels (label_id, extraction_id, sample_id, verdict, corrected_value,"
            " corrected_status, error_type, error_detail, reviewer, review_round, labeled_at,"
            " supersedes, import_batch_id)"
            " SELECT l_label_id, l_extraction_id, coalesce(l_sample_id, p.p_sample_id), l_verdict,"
            " l_corrected_value,"
            " l_corrected_status, l_error_type, l_error_detail, l_reviewer, p.p_round,"
            f" l_labeled_at, p.p_supersedes, ? FROM {typed.relation} t"
            f" JOIN {quote_ident(plan_table)} p ON p.p_row = t.l_row ORDER BY l_labeled_at, l_row",
            [batch_id],
        )
    finally:
        con.unregister(plan_table)
    added, replaced = decided.count("new") + seeds_judged, decided.count("replaces")
    blank = typed.rows - len(decided.actions) - seed_rows
    con.execute(
        "INSERT INTO label_imports (batch_id, source, source_sha256, rows_in_file, rows_added,"
        " imported_at, imported_by) VALUES (?, ?, ?, ?, ?, ?, ?)",
        [batch_id, source, sha, typed.rows, added + replaced, utc_now(), actor],
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
    if options.second_look is not None:
        _declare_second_look(con, batch_id, options)
    # Labels are read with their extraction's columns from this copy.
    record_sampled(con, "SELECT extraction_id FROM labels WHERE import_batch_id = ?", [batch_id])
    return LabelImportResult(batch_id, source, typed.rows, added, decided.count("stored"), blank,
                             rows_replaced=replaced)
