"""Reading input files into a DuckDB temp table, exactly as they are.

Ingest and labels import both stage a file first and validate it with SQL
over the staged rows, so every problem can name its row, column and value.
CSV and JSON Lines are copied into a temp table as text (``VARCHAR``): types
are checked by the validation rules, never guessed by a sniffer. Parquet
keeps its own types and is not copied at all: a temp view over the file is
read once to validate and once to insert, which costs less than copying it.
Arrow tables are copied (they are small: demo and extractor batches).

A file is read once, by fieldtrust: its bytes are copied to a private
temporary file while they are hashed (:func:`snapshot`), and DuckDB reads
that copy. So the hash is the hash of the rows stored, even when the file is
rewritten meanwhile or is a pipe, and a file name is never a DuckDB glob
pattern (``wk[1].csv`` is that file, not ``wk1.csv``).

Every cell holds one value: a JSON array or object, or a Parquet or Arrow
list, struct or map column, is refused here with its rows. Cast to text,
``["invoice"]`` would pass every rule and be stored as a doc_type.

:attr:`Staged.row_sql` gives each row's 1-based data row in the file (the
header of a CSV is not a row).
"""

from __future__ import annotations

import csv
import dataclasses
import errno
import hashlib
import json
import os
import re
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa
from fieldtrust.store.sql import quote_ident, quote_literal

from fieldtrust.errors import NoSpaceError, ValidationError

#: File formats by extension. ``.json`` is read as JSON Lines, or as one
#: array of objects when it holds that.
FORMATS = {
    ".csv": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "json",
}

#: Problems listed in a rejection message; the rest are counted.
MAX_PROBLEMS = 20

#: Longest value quoted in a message; longer ones are cut with "...".
SHOWN_CHARS = 60

#: DuckDB type ids of columns holding several values per row, as messages name them.
_NESTED_TYPES = {
    "list": "a list",
    "array": "an array",
    "struct": "a struct",
    "map": "a map",
    "union": "a union",
}

_CHUNK = 1 << 20

#: Longest line of a CSV file, in bytes (DuckDB's CSV reader's limit).
MAX_CSV_LINE_BYTES = 2 * 1024 * 1024
#: Longest line (one object) of a JSON Lines file, in bytes (DuckDB's JSON limit).
MAX_JSON_LINE_BYTES = 16 * 1024 * 1024
_LINE_LIMITS = {"csv": MAX_CSV_LINE_BYTES, "jsonl": MAX_JSON_LINE_BYTES}


@dataclass(frozen=True)
class Snapshot:
    """A private copy of an input file, and the SHA-256 of the bytes copied."""

    path: str
    sha256: str
    source: str


def snapshot(path: str | os.PathLike[str], fmt: str) -> Snapshot:
    """Copy ``path`` to a private temporary file, hashing the bytes as they are read.

    The name is opened as written (no pattern). CSV and JSON Lines lines are
    held to their reader's limit here, where the line can be named.

    Raises
    ------
    ValidationError
        The file cannot be read (missing, a folder, no permission), or has a
        line longer than the format allows; nothing was written.
    NoSpaceError
        The temporary copy does not fit on its disk.
    """
    source = Path(path).name
    limit = _LINE_LIMITS.get(fmt)
    digest = hashlib.sha256()
    handle, copy = tempfile.mkstemp(prefix="fieldtrust-input-", suffix=Path(path).suffix)
    try:
        with os.fdopen(handle, "wb") as out:
            try:
                src = open(path, "rb")  # noqa: SIM115 - closed below, errors told apart
            except OSError as exc:
                raise ValidationError(source, [f"cannot read the file: {_os_reason(exc)}"]) \
                    from exc
            with src:
                line, run = 1, 0  # the current line's number, and its bytes so far
                while True:
                    try:
                        chunk = src.read(_CHUNK)
                    except OSError as exc:
                        raise ValidationError(
                            source, [f"cannot read the file: {_os_reason(exc)}"]
                        ) from exc
                    if not chunk:
                        break
                    digest.update(chunk)
                    out.write(chunk)
                    if limit is not None:
                        line, run = _check_lines(source, chunk, line, run, limit)
    except OSError as exc:
        os.unlink(copy)
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise NoSpaceError(
                f"no space left on the device holding {tempfile.gettempdir()} for a copy of"
                f" {source}: nothing was written; free some space and run the command again"
            ) from exc
        raise
    except BaseException:
        os.unlink(copy)
        raise
    return Snapshot(copy, digest.hexdigest(), source)


def drop_snapshot(snap: Snapshot | None) -> None:
    """Remove a snapshot's private copy (if any)."""
    if snap is not None:
        Path(snap.path).unlink(missing_ok=True)


def _check_lines(source: str, chunk: bytes, line: int, run: int, limit: int) -> tuple[int, int]:
    """Track line numbers and the open line's length over one chunk; refuse a long line.

    A chunk is shorter than ``limit``, so only a line running across chunks can
    be too long: lines inside one chunk need no look.
    """
    first = chunk.find(b"\n")
    end = len(chunk) if first < 0 else first
    if run + end > limit:
        raise ValidationError(source, [
            f"line {line} is longer than {limit // (1024 * 1024)} MB, the longest line this"
            " format may have (docs/ingest.md); split the value, or store it in a Parquet file"
        ])
    if first < 0:
        return line, run + len(chunk)
    return line + chunk.count(b"\n"), len(chunk) - chunk.rfind(b"\n") - 1


def _os_reason(exc: OSError) -> str:
    return exc.strerror.lower() if exc.strerror else type(exc).__name__


@dataclass(frozen=True)
class Staged:
    """Rows of one input, ready to validate: a temp table or view and its columns."""

    name: str  # unquoted temp relation name
    is_view: bool
    row_sql: str  # SQL for the 1-based data row of each row
    dtypes: dict[str, str]  # column -> DuckDB type, in file order
    rows: int

    @property
    def relation(self) -> str:
        return quote_ident(self.name)


def detect_format(path: str | os.PathLike[str]) -> str:
    """The format of ``path`` from its extension; a clear error for anything else."""
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        known = ", ".join(sorted(FORMATS))
        raise ValidationError(
            Path(path).name, [f"unknown file type {suffix or '(none)'!r}; use one of {known}"]
        )
    return FORMATS[suffix]


def arrow_sha256(table: pa.Table) -> str:
    """Hex SHA-256 of an Arrow table's IPC stream: the identity of in-memory rows."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return hashlib.sha256(memoryview(sink.getvalue())).hexdigest()


#: Characters a message never prints as they are: control characters, and the
#: zero-width and direction-changing ones, which would hide or reorder text.
INVISIBLE = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060-\u2064"
                       "\u2066-\u2069\ufeff]")


def visible(text: str) -> str:
    """``text`` with every :data:`INVISIBLE` character written as ``<U+XXXX>``."""
    return INVISIBLE.sub(lambda m: f"<U+{ord(m.group()):04X}>", text)


def shown(value: object) -> str:
    """``value`` as text for a message, cut to :data:`SHOWN_CHARS` characters.

    Invisible characters are named (``<U+200B>``), not printed.
    """
    text = "" if value is None else str(value)
    cut = text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 3] + "..."
    return visible(cut)


def temp_name(prefix: str) -> str:
    """A fresh temp-table name, so concurrent stagings never collide."""
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


def drop_staged(con: duckdb.DuckDBPyConnection, staged: Staged | None) -> None:
    """Drop a staged table or view (if any), and the file's own view under a mapped one."""
    if staged is not None:
        kind = "VIEW" if staged.is_view else "TABLE"
        con.execute(f"DROP {kind} IF EXISTS temp.{staged.relation}")
        if staged.is_view:
            con.execute(f"DROP VIEW IF EXISTS temp.{quote_ident(staged.name + _FILE_VIEW)}")


#: Suffix of the view of a Parquet file's own columns, under the view of mapped ones.
_FILE_VIEW = "_file"


@dataclass(frozen=True)
class Mapped:
    """A staged input under our column names, and the file's columns it left out."""

    staged: Staged
    ignored: tuple[str, ...]


def map_columns(
    con: duckdb.DuckDBPyConnection,
    staged: Staged,
    mapping: dict[str, str],
    *,
    known: tuple[str, ...],
    ignore_unknown: bool = False,
    source: str,
) -> Mapped:
    """Rename the file's columns to ours (``mapping``: ours -> theirs) at the reading step.

    With ``ignore_unknown`` the columns that are none of ``known`` after the
    renaming are left out (a ``latency_ms`` the log also carries); without it
    they stay, for the validation to name. Row numbers are the file's as before.

    Raises
    ------
    ValidationError
        A file column has our name while the mapping reads that name from
        another column (which of the two is meant cannot be guessed).
    """
    renames = {theirs: ours for ours, theirs in mapping.items()
               if theirs in staged.dtypes and theirs != ours}
    clashes = [ours for theirs, ours in renames.items() if ours in staged.dtypes]
    if clashes:
        raise ValidationError(source, [
            f"column {ours} is in the file and the column mapping reads {ours} from column"
            f" {mapping[ours]} too: rename one of the two, or drop the mapping" for ours in clashes
        ])
    named = {renames.get(column, column): dtype for column, dtype in staged.dtypes.items()}
    ignored = tuple(c for c in named if c not in known) if ignore_unknown else ()
    if not renames and not ignored:
        return Mapped(staged, ())
    kept = {column: dtype for column, dtype in named.items() if column not in ignored}
    if not staged.is_view:
        for theirs, ours in renames.items():
            con.execute(f"ALTER TABLE {staged.relation} RENAME COLUMN {quote_ident(theirs)}"
                        f" TO {quote_ident(ours)}")
        for column in ignored:
            con.execute(f"ALTER TABLE {staged.relation} DROP COLUMN {quote_ident(column)}")
        return Mapped(dataclasses.replace(staged, dtypes=kept), ignored)
    # A Parquet file is a view, not a copy: the mapped view reads the file's own.
    inner = quote_ident(staged.name + _FILE_VIEW)
    con.execute(f"ALTER VIEW {staged.relation} RENAME TO {inner}")
    back = {ours: theirs for theirs, ours in renames.items()}
    select = ", ".join(
        f"{quote_ident(back.get(column, column))} AS {quote_ident(column)}" for column in kept
    )
    con.execute(f"CREATE TEMP VIEW {staged.relation} AS SELECT {select}, file_row_number"
                f" FROM {inner}")
    return Mapped(dataclasses.replace(staged, dtypes=kept), ignored)


def _drop_table(con: duckdb.DuckDBPyConnection, name: str) -> None:
    con.execute(f"DROP TABLE IF EXISTS temp.{quote_ident(name)}")


def stage_file(
    con: duckdb.DuckDBPyConnection, snap: Snapshot, fmt: str, name: str
) -> Staged:
    """Make the rows of the file copied to ``snap`` queryable as temp relation ``name``.

    Raises
    ------
    ValidationError
        The file cannot be parsed (the message quotes the reader's complaint,
        with its line number), has duplicate or empty column names, or holds
        no rows.
    """
    source, path = snap.source, snap.path
    try:
        if fmt == "parquet":
            # A view cannot bind parameters: the path goes in as a quoted literal.
            con.execute(
                f"CREATE TEMP VIEW {quote_ident(name)} AS SELECT * FROM"
                f" read_parquet({quote_literal(str(path))}, file_row_number = true)"
            )
            return _staged(con, name, source, is_view=True, row_sql="file_row_number + 1")
        if fmt == "csv":
            _stage_csv(con, path, name, source)
        else:
            _stage_json(con, path, name, "newline_delimited" if fmt == "jsonl" else "auto", source)
    except duckdb.Error as exc:
        _drop_table(con, name)
        con.execute(f"DROP VIEW IF EXISTS temp.{quote_ident(name)}")
        if fmt == "jsonl":
            bad = _first_bad_json_line(path)
            if bad is not None:
                raise ValidationError(source, [bad]) from exc
        message = _reader_message(exc).replace(path, source)
        raise ValidationError(source, [f"cannot read as {fmt}: {message}"]) from exc
    return _staged(con, name, source, is_view=False, row_sql="rowid + 1")


def stage_arrow(con: duckdb.DuckDBPyConnection, table: pa.Table, name: str, source: str) -> Staged:
    """Copy an Arrow table into temp table ``name``."""
    names = list(table.column_names)
    if len(set(names)) != len(names):
        repeated = sorted({n for n in names if names.count(n) > 1})
        raise ValidationError(source, [f"column {n} appears more than once" for n in repeated])
    view = temp_name("ft_arrow")
    con.register(view, table)
    try:
        con.execute(f"CREATE TEMP TABLE {quote_ident(name)} AS SELECT * FROM {quote_ident(view)}")
    finally:
        con.unregister(view)
    return _staged(con, name, source, is_view=False, row_sql="rowid + 1")


def _first_bad_json_line(path: str) -> str | None:
    """The first line of a JSON Lines file that is not JSON, named by its real number.

    DuckDB's own line number for a malformed object can be off by one.
    """
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                json.loads(raw)
            except ValueError as exc:
                reason = str(exc).split(":")[0]
                text = shown(raw.decode("utf-8", "replace").rstrip())
                return f"line {number} is not valid JSON ({reason}): '{text}'"
    return None


def _stage_csv(
    con: duckdb.DuckDBPyConnection, path: str | os.PathLike[str], name: str, source: str
) -> None:
    # The header is read here, not sniffed: DuckDB's sniffer can take a ragged
    # last line for the header and return no rows at all. Every column is text.
    header = _csv_header(path, source)
    columns = dict.fromkeys(header, "VARCHAR")
    con.execute(
        f"CREATE TEMP TABLE {quote_ident(name)} AS SELECT * FROM read_csv(?,"
        " columns = ?, header = true, auto_detect = false, skip = 0,"
        " delim = ',', quote = '\"', escape = '\"', strict_mode = true,"
        " null_padding = false, encoding = 'utf-8')",
        [str(path), columns],
    )


def _csv_header(path: str | os.PathLike[str], source: str) -> list[str]:
    """Column names from the first line, stripped; duplicates and blanks are errors."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:
            header = next(csv.reader(handle), [])
    except UnicodeDecodeError as exc:
        raise ValidationError(source, ["the file is not UTF-8 text; save it as UTF-8"]) from exc
    except csv.Error as exc:
        raise ValidationError(source, [f"the header line cannot be read: {exc}"]) from exc
    names = [h.strip() for h in header]
    if not names:
        raise ValidationError(source, ["no rows: the file is empty"])
    _refuse_other_separators(source, names)
    problems = [
        f"header column {i}: has no name" for i, n in enumerate(names, start=1) if not n
    ] + [
        f"column {n} appears more than once"
        for n in sorted({n for n in names if n})
        if names.count(n) > 1
    ]
    if problems:
        raise ValidationError(source, problems)
    return names


#: Separators spreadsheets write instead of commas (Excel in many locales: ';').
_OTHER_SEPARATORS = {";": "semicolons", "\t": "tabs", "|": "vertical bars"}


def _refuse_other_separators(source: str, names: list[str]) -> None:
    """A header that is one column holding ``;`` (or tabs, or ``|``) is another separator.

    Said plainly, instead of a column-count error on line 2 or ``doc_id;doc_type``
    reported as an unknown column.
    """
    if len(names) != 1:
        return
    for separator, word in _OTHER_SEPARATORS.items():
        if separator in names[0]:
            raise ValidationError(source, [
                f"the header {names[0][:60]!r} is separated by {word}, not commas; save the"
                " file as comma-separated CSV (in Excel: 'CSV UTF-8 (Comma delimited)')"
            ])


def _stage_json(
    con: duckdb.DuckDBPyConnection, path: str | os.PathLike[str], name: str, layout: str,
    source: str,
) -> None:
    # Each object is kept whole first, then every key becomes a text column:
    # a value's JSON text ('0.5', 'true', 'high') is what validation reports.
    raw = temp_name("ft_json")
    con.execute(
        f"CREATE TEMP TABLE {quote_ident(raw)} AS"
        " SELECT json FROM read_json_objects(?, format = ?)",
        [str(path), layout],
    )
    try:
        bad = con.execute(
            f"SELECT rowid + 1, json_type(json), count(*) OVER () FROM {quote_ident(raw)}"
            " WHERE json_type(json) <> 'OBJECT' ORDER BY rowid LIMIT ?",
            [MAX_PROBLEMS],
        ).fetchall()
        if bad:
            raise ValidationError(
                source,
                [f"row {row}: a JSON {kind.lower()}, not an object" for row, kind, _ in bad],
                bad[0][2],
            )
        # Distinct key lists are few; merging them here keeps first-seen order.
        key_lists = con.execute(
            f"SELECT json_keys(json) FROM {quote_ident(raw)} GROUP BY ALL ORDER BY min(rowid)"
        ).fetchall()
        keys = list(dict.fromkeys(k for (ks,) in key_lists for k in ks))
        if not keys:
            raise ValidationError(
                source, ["no rows: the file holds no data rows (or only empty objects)"]
            )
        # Paths are bound as parameters: no key from the file enters the SQL text.
        paths = [_json_key_path(k) for k in keys]
        selects = ", ".join(f"json ->> ? AS {quote_ident(k)}" for k in keys)
        con.execute(
            f"CREATE TEMP TABLE {quote_ident(name)} AS SELECT {selects} FROM {quote_ident(raw)}",
            paths,
        )
        problems, total = _nested_json(con, raw, name, keys, paths)
        if total:
            _drop_table(con, name)
            raise ValidationError(source, problems, total)
    finally:
        _drop_table(con, raw)


def _nested_json(
    con: duckdb.DuckDBPyConnection, raw: str, name: str, keys: list[str], paths: list[str]
) -> tuple[list[str], int]:
    """Rows where a key holds a JSON array or object: the first problems and their count.

    ``->>`` turns an array or object into its JSON text, which starts with ``[``
    or ``{``. Staged text starting so is rare, and range tests on the staged
    columns let DuckDB skip whole row groups by their min/max statistics, so a
    valid file costs milliseconds. Only those rows go on to ``json_type`` on
    the raw object, which tells a real array from a string like ``"[draft]"``
    (both temp tables hold the rows in file order: a row has one rowid in both).
    """
    starts = " OR ".join(
        f"({q} >= '[' AND {q} < '\\') OR ({q} >= '{{' AND {q} < '|')"
        for q in map(quote_ident, keys)
    )
    rows = con.execute(
        "SELECT row_, key_, kind_, json_extract_string(json, path_), count(*) OVER () FROM ("
        " SELECT rowid + 1 AS row_, json, unnest($keys::VARCHAR[]) AS key_,"
        " unnest($paths::VARCHAR[]) AS path_, unnest(range(len($keys::VARCHAR[]))) AS index_,"
        " unnest(json_type(json, $paths::VARCHAR[])) AS kind_"
        f" FROM {quote_ident(raw)}"
        f" WHERE rowid IN (SELECT rowid FROM {quote_ident(name)} WHERE {starts})"
        ") WHERE kind_ IN ('ARRAY', 'OBJECT') ORDER BY row_, index_ LIMIT $limit",
        {"keys": keys, "paths": paths, "limit": MAX_PROBLEMS},
    ).fetchall()
    problems = [
        f"row {row}, column {key}: '{shown(value)}' is a JSON {kind.lower()}, not a single"
        " value; write one string or number"
        for row, key, kind, value, _ in rows
    ]
    return problems, (int(rows[0][4]) if rows else 0)


def _json_key_path(key: str) -> str:
    """A JSONPath to member ``key`` (quoted, so dots and spaces are literal)."""
    return '$."' + key.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _staged(
    con: duckdb.DuckDBPyConnection, name: str, source: str, *, is_view: bool, row_sql: str
) -> Staged:
    """Describe a staged relation; an input without rows is an error."""
    staged = Staged(name, is_view, row_sql, {}, 0)
    row = con.execute(f"SELECT count(*) FROM {staged.relation}").fetchone()
    rows = int(row[0]) if row else 0
    if rows == 0:
        drop_staged(con, staged)
        raise ValidationError(source, ["no rows: the file holds no data rows, nothing to load"])
    described = con.execute(f"DESCRIBE {staged.relation}").fetchall()
    dtypes = {str(r[0]): str(r[1]) for r in described}
    if is_view:
        dtypes.pop("file_row_number", None)
    staged = Staged(name, is_view, row_sql, dtypes, rows)
    problems, total = _nested_columns(con, staged)
    if total:
        drop_staged(con, staged)
        raise ValidationError(source, problems, total)
    return staged


def _nested_columns(con: duckdb.DuckDBPyConnection, staged: Staged) -> tuple[list[str], int]:
    """Rows of list, struct or map columns (Parquet, Arrow): the first problems and their count.

    Decided by the columns' types, so a file without such columns (every
    valid one) costs no scan. A nested column that is NULL throughout holds
    no value to refuse and is left to the validation rules.
    """
    relation = con.sql(f"SELECT * FROM {staged.relation} LIMIT 0")
    nested = [
        (column, _NESTED_TYPES[dtype.id])
        for column, dtype in zip(relation.columns, relation.dtypes, strict=True)
        if column in staged.dtypes and dtype.id in _NESTED_TYPES
    ]
    if not nested:
        return [], 0
    parts = [
        f"SELECT {staged.row_sql} AS row_, {index} AS index_,"
        f" CAST({quote_ident(column)} AS VARCHAR) AS value_"
        f" FROM {staged.relation} WHERE {quote_ident(column)} IS NOT NULL"
        for index, (column, _) in enumerate(nested)
    ]
    rows = con.execute(
        "SELECT row_, index_, value_, count(*) OVER () FROM ("
        + " UNION ALL ".join(parts)
        + ") ORDER BY row_, index_ LIMIT ?",
        [MAX_PROBLEMS],
    ).fetchall()
    problems = []
    for row, index, value, _ in rows:
        column, kind = nested[index]
        problems.append(
            f"row {row}, column {column}: '{shown(value)}' is {kind}"
            f" ({staged.dtypes[column]}), not a single value; write the column as"
            " one text or number per row"
        )
    return problems, (int(rows[0][3]) if rows else 0)


_NOISE = re.compile(r"^(Possible (fixes|Solution)|\s*file = )")


def _reader_message(exc: duckdb.Error) -> str:
    """DuckDB's reader error cut to its first meaningful lines (what and where)."""
    lines = []
    for line in str(exc).splitlines():
        if _NOISE.match(line):
            break
        if line.strip():
            lines.append(line.strip())
    text = "; ".join(lines) or type(exc).__name__
    return re.sub(r"^[A-Za-z ]+Error: ", "", text)
