"""Reading input files into a DuckDB temp table, exactly as they are.

Ingest and labels import both stage a file first and validate it with SQL
over the staged rows, so every problem can name its row, column and value.
CSV and JSON Lines are copied into a temp table as text (``VARCHAR``): types
are checked by the validation rules, never guessed by a sniffer. Parquet
keeps its own types and is not copied at all: a temp view over the file is
read once to validate and once to insert, which costs less than copying it.
Arrow tables are copied (they are small: demo and extractor batches).

:attr:`Staged.row_sql` gives each row's 1-based data row in the file (the
header of a CSV is not a row).
"""

from __future__ import annotations

import csv
import hashlib
import os
import re
import uuid
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa

from store.errors import ValidationError
from store.sql import quote_ident, quote_literal

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

_CHUNK = 1 << 20


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


def file_sha256(path: str | os.PathLike[str]) -> str:
    """Hex SHA-256 of the file's bytes: the identity of a file for re-ingest checks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def arrow_sha256(table: pa.Table) -> str:
    """Hex SHA-256 of an Arrow table's IPC stream: the identity of in-memory rows."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return hashlib.sha256(memoryview(sink.getvalue())).hexdigest()


def temp_name(prefix: str) -> str:
    """A fresh temp-table name, so concurrent stagings never collide."""
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


def drop_staged(con: duckdb.DuckDBPyConnection, staged: Staged | None) -> None:
    """Drop a staged table or view (if any)."""
    if staged is not None:
        kind = "VIEW" if staged.is_view else "TABLE"
        con.execute(f"DROP {kind} IF EXISTS temp.{staged.relation}")


def _drop_table(con: duckdb.DuckDBPyConnection, name: str) -> None:
    con.execute(f"DROP TABLE IF EXISTS temp.{quote_ident(name)}")


def stage_file(
    con: duckdb.DuckDBPyConnection, path: str | os.PathLike[str], fmt: str, name: str
) -> Staged:
    """Make the rows of ``path`` queryable as temp relation ``name``.

    Raises
    ------
    ValidationError
        The file cannot be parsed (the message quotes the reader's complaint,
        with its line number), has duplicate or empty column names, or holds
        no rows.
    """
    source = Path(path).name
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
            _stage_json(con, path, name, "newline_delimited" if fmt == "jsonl" else "auto")
    except duckdb.Error as exc:
        _drop_table(con, name)
        con.execute(f"DROP VIEW IF EXISTS temp.{quote_ident(name)}")
        raise ValidationError(source, [f"cannot read as {fmt}: {_reader_message(exc)}"]) from exc
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
    con: duckdb.DuckDBPyConnection, path: str | os.PathLike[str], name: str, layout: str
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
                Path(path).name,
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
                Path(path).name, ["no rows: the file holds no data rows (or only empty objects)"]
            )
        # Paths are bound as parameters: no key from the file enters the SQL text.
        selects = ", ".join(f"json ->> ? AS {quote_ident(k)}" for k in keys)
        con.execute(
            f"CREATE TEMP TABLE {quote_ident(name)} AS SELECT {selects} FROM {quote_ident(raw)}",
            [_json_key_path(k) for k in keys],
        )
    finally:
        _drop_table(con, raw)


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
    return Staged(name, is_view, row_sql, dtypes, rows)


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
