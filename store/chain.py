"""Tamper evidence for history: one hash chain over the append-only tables.

DuckDB has no triggers and no privileges, so anyone who can write the store
file can UPDATE a label or a decision with SQL. The chain makes that
detectable. Every library writer of a chained table (:data:`CHAINED`) calls
:func:`chain_rows` inside its own transaction, right after its INSERT; that
reads the rows back, serialises each as canonical JSON (:func:`row_json`) and
appends one entry per row to ``history_chain``::

    row_hash = sha256(previous row_hash + "\\n" + table + "\\n" + row_json)

starting from :data:`GENESIS`. The newest ``row_hash`` (the head) therefore
depends on every chained row ever written, in order: change, delete or insert
a row and :func:`fieldtrust.store.verify.verify_history` names it. A copy of the head
kept outside the store (it is written into every policy export) also catches
someone who rewrites the whole chain to match their edit.

Two writers never fork the chain: each appends ``seq = head + 1`` and ``seq``
is the table's primary key, so of two transactions that read the same head
the second fails to commit (DuckDB's duplicate-key conflict) and is retried
by the caller on the new head (``store.retry.write_with_retry``). Entries of
the tables that decide what production automates (decisions, policy settings)
are signed as they are appended (:mod:`fieldtrust.store.signing`): the chain
alone cannot tell a row written through :func:`chain_rows` by someone who
can write the file from one fieldtrust wrote. The rows are
read back rather than serialised from the writer's Python values so that a
row always serialises exactly as :mod:`fieldtrust.store.verify` will read it (an int
threshold comes back a float, for instance): a writer of one row adds
``RETURNING *`` to its INSERT and hands the result to :func:`chain_returned`,
which costs one more statement per write (the head is read inside it).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import duckdb
from fieldtrust.store.signing import SIGNED_TABLES, current_signer, sign_entries
from fieldtrust.store.sql import quote_ident

#: The "previous hash" of the first chain entry.
GENESIS = "0" * 64


@dataclass(frozen=True)
class ChainedTable:
    """How one history table is chained: the columns naming a row, and its insertion order."""

    name: str
    key: tuple[str, ...]
    order: tuple[str, ...]


#: The chained tables, in the order the migration chains rows written at the same instant.
CHAINED: Mapping[str, ChainedTable] = {
    t.name: t
    for t in (
        ChainedTable("user_roles", ("user_name", "granted_at"), ("granted_at", "user_name")),
        ChainedTable(
            "role_revocations", ("user_name", "revoked_at"), ("revoked_at", "user_name")
        ),
        ChainedTable("evidence_snapshots", ("evidence_id",), ("created_at", "evidence_id")),
        ChainedTable("decisions", ("decision_id",), ("decided_at", "decision_id")),
        ChainedTable("label_imports", ("batch_id",), ("imported_at", "batch_id")),
        ChainedTable("labels", ("label_id",), ("labeled_at", "label_id")),
        ChainedTable(
            "skips",
            ("sample_id", "extraction_id", "reviewer", "skipped_at"),
            ("skipped_at", "sample_id", "extraction_id", "reviewer"),
        ),
        ChainedTable("label_import_designs", ("batch_id",), ("declared_at", "batch_id")),
        ChainedTable("policy_settings", ("setting_id",), ("set_at", "setting_id")),
        ChainedTable("seed_verdicts", ("seed_verdict_id",), ("judged_at", "seed_verdict_id")),
        ChainedTable("label_import_second_looks", ("batch_id",), ("declared_at", "batch_id")),
        ChainedTable("rekeyed_values", ("rekey_id",), ("keyed_at", "rekey_id")),
        ChainedTable("monitoring_resumptions", ("resumption_id",),
                     ("resumed_at", "resumption_id")),
    )
}


@dataclass(frozen=True)
class ChainHead:
    """The newest chain entry: ``seq`` entries so far (0 when empty) and its ``row_hash``."""

    seq: int
    row_hash: str


def row_json(row: Mapping[str, Any]) -> str:
    """A row as canonical JSON: keys sorted, compact, UTF-8, timestamps ISO with microseconds."""
    return json.dumps(
        {name: _plain(value) for name, value in row.items()},
        sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False,
    )


def row_key(table: str, row: Mapping[str, Any]) -> str:
    """The key of a row of ``table`` as JSON text (a list of its key columns' values)."""
    return json.dumps([_plain(row[c]) for c in CHAINED[table].key], ensure_ascii=False)


def link_hash(previous: str, table: str, text: str) -> str:
    """The chain hash of one entry: sha256 of the previous hash, the table and the row JSON."""
    return hashlib.sha256(f"{previous}\n{table}\n{text}".encode()).hexdigest()


def chain_head(con: duckdb.DuckDBPyConnection) -> ChainHead:
    """The current head of the chain (``ChainHead(0, GENESIS)`` when nothing is chained)."""
    # By its number, the head's hash is one row group's read; ORDER BY seq DESC LIMIT 1 or
    # arg_max read every hash in the chain (7 ms a write at 124,000 entries, and the
    # chain grows with every write).
    rows = con.execute(
        "SELECT seq, row_hash FROM history_chain"
        " WHERE seq = (SELECT max(seq) FROM history_chain)"
    ).fetchall()
    return ChainHead(int(rows[0][0]), str(rows[0][1])) if rows else ChainHead(0, GENESIS)


def chain_returned(
    con: duckdb.DuckDBPyConnection, table: str, inserted: duckdb.DuckDBPyConnection
) -> int:
    """Chain the rows an ``INSERT INTO table ... RETURNING *`` just wrote; return how many.

    ``inserted`` is what ``con.execute`` returned for that INSERT, unread; call
    this inside the same transaction.
    """
    names = [d[0] for d in inserted.description or ()]
    rows = [dict(zip(names, values, strict=True)) for values in inserted.fetchall()]
    append_entries(con, [(table, row) for row in rows], signed=table in SIGNED_TABLES)
    return len(rows)


def chain_rows(
    con: duckdb.DuckDBPyConnection, table: str, match: Mapping[str, object]
) -> int:
    """Append the rows of ``table`` matching ``match`` to the chain; return how many.

    For writers of many rows at once (an import, the demo). Call it inside the
    transaction that inserted the rows. ``match`` maps column -> value, or
    column -> list of values (any of them); the rows are chained in the
    table's insertion order (:data:`CHAINED`).
    """
    spec = CHAINED[table]
    conditions: list[str] = []
    params: list[Any] = []
    for column, value in match.items():
        if isinstance(value, list | tuple):
            conditions.append(f"{quote_ident(column)} IN (SELECT unnest(?::VARCHAR[]))")
            params.append([str(v) for v in value])
        else:
            conditions.append(f"{quote_ident(column)} = ?")
            params.append(value)
    order = ", ".join(quote_ident(c) for c in spec.order)
    rows = _rows(con, f"SELECT * FROM {quote_ident(table)} WHERE {' AND '.join(conditions)}"
                      f" ORDER BY {order}", params)
    append_entries(con, [(table, row) for row in rows], signed=table in SIGNED_TABLES)
    return len(rows)


def append_entries(
    con: duckdb.DuckDBPyConnection, rows: Sequence[tuple[str, Mapping[str, Any]]],
    *, signed: bool = False,
) -> ChainHead | None:
    """Chain ``(table, row)`` pairs after the current head, in the order given.

    With ``signed``, each entry of a table in
    :data:`~fieldtrust.store.signing.SIGNED_TABLES` is signed with the current
    signing key (:func:`~fieldtrust.store.signing.current_signer`; without one,
    :class:`~fieldtrust.errors.SigningError` before anything is written). Only
    migrations chain rows unsigned: what they chain was written before signing.

    Returns the new head, or None when ``rows`` is empty (nothing is read then).
    """
    if not rows:
        return None
    signer = current_signer() if signed else None
    now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    head = chain_head(con)
    seqs, tables, keys, texts, hashes = [], [], [], [], []
    previous = head.row_hash
    for offset, (table, row) in enumerate(rows, start=1):
        text = row_json(row)
        previous = link_hash(previous, table, text)
        seqs.append(head.seq + offset)
        tables.append(table)
        keys.append(row_key(table, row))
        texts.append(text)
        hashes.append(previous)
    # One statement for any number of rows: executemany costs a round trip per row.
    con.execute(
        "INSERT INTO history_chain (seq, table_name, row_key, row_json, row_hash, chained_at)"
        " SELECT unnest(?::BIGINT[]), unnest(?::VARCHAR[]), unnest(?::VARCHAR[]),"
        " unnest(?::VARCHAR[]), unnest(?::VARCHAR[]), ?",
        [seqs, tables, keys, texts, hashes, now],
    )
    if signer is not None:
        sign_entries(con, [(seq, row_hash) for seq, name, row_hash
                           in zip(seqs, tables, hashes, strict=True) if name in SIGNED_TABLES],
                     signer)
    return ChainHead(seqs[-1], previous)


def chain_existing_rows(con: duckdb.DuckDBPyConnection) -> int:
    """Chain every row of the chained tables, oldest first; the migration runs this once.

    Insertion order is read from each table's timestamp; rows of the same
    instant follow the table order of :data:`CHAINED` (a grant before the
    evidence, the evidence before its decision, ...). Returns the rows chained.
    """
    ordered: list[tuple[tuple[Any, ...], str, dict[str, Any]]] = []
    present = {str(name) for (name,) in con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main'"
    ).fetchall()}
    for rank, spec in enumerate(CHAINED.values()):
        if spec.name not in present:  # a table a later migration makes (and chains itself)
            continue
        for row in table_rows(con, spec.name):
            ordered.append(((row[spec.order[0]], rank, *map(str, (row[c] for c in spec.order))),
                            spec.name, row))
    ordered.sort(key=lambda item: item[0])
    append_entries(con, [(table, row) for _, table, row in ordered])
    return len(ordered)


def chain_table(con: duckdb.DuckDBPyConnection, table: str) -> int:
    """Chain every row of ``table`` in its insertion order (a migration that fills a new table)."""
    order = ", ".join(quote_ident(c) for c in CHAINED[table].order)
    rows = _rows(con, f"SELECT * FROM {quote_ident(table)} ORDER BY {order}", [])
    append_entries(con, [(table, row) for row in rows])
    return len(rows)


def table_rows(con: duckdb.DuckDBPyConnection, table: str) -> list[dict[str, Any]]:
    """Every row of a chained table as a column -> value mapping."""
    return _rows(con, f"SELECT * FROM {quote_ident(CHAINED[table].name)}", [])


def _rows(con: duckdb.DuckDBPyConnection, sql: str, params: list[Any]) -> list[dict[str, Any]]:
    cursor = con.execute(sql, params)
    names = [d[0] for d in cursor.description or ()]
    return [dict(zip(names, values, strict=True)) for values in cursor.fetchall()]


def _plain(value: Any) -> Any:
    """A stored value as JSON: timestamps and dates as ISO text, the rest as they are."""
    if isinstance(value, dt.datetime):
        return value.isoformat(timespec="microseconds")
    if isinstance(value, dt.date):
        return value.isoformat()
    return value
