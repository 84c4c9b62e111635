"""The one place identifiers are put into SQL text.

Values always travel as bound parameters; only names (tables, columns) that
cannot be bound go through :func:`quote_ident`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import duckdb

from fieldtrust.errors import InputError


def quote_ident(name: str) -> str:
    """Quote ``name`` as a DuckDB identifier (doubling embedded quotes)."""
    if not name or "\x00" in name:
        raise InputError(f"not a usable SQL identifier: {name!r}")
    return '"' + name.replace('"', '""') + '"'


def quote_literal(text: str) -> str:
    """Quote ``text`` as a SQL string literal, for the rare statements that bind nothing.

    DuckDB cannot bind parameters in some statements (``COPY ... TO``, table
    functions' file names inside ``CREATE VIEW``); use this only there.
    """
    if "\x00" in text:
        raise InputError(f"not a usable SQL string: {text!r}")
    return "'" + text.replace("'", "''") + "'"


def fetch_one(
    con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[object] = ()
) -> tuple[Any, ...] | None:
    """The first row of ``sql``, reading the result to its end.

    DuckDB 2.0 keeps a result open after ``fetchone()`` and then refuses any
    ``con.sql(...)`` on that connection; reading every row closes it.
    """
    rows = con.execute(sql, list(params)).fetchall()
    return rows[0] if rows else None


def has_table(con: duckdb.DuckDBPyConnection, table: str) -> bool:
    """Whether the store holds ``table``: a store not yet migrated may lack a newer one."""
    row = fetch_one(
        con,
        "SELECT count(*) FROM duckdb_tables() WHERE database_name = current_database()"
        " AND schema_name = 'main' AND table_name = ?",
        [table],
    )
    return bool(row and row[0])
