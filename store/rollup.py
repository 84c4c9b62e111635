"""Two derived caches that keep reports off the ten million extraction rows.

``extraction_counts``: extraction counts per stratum, form version, week
and confidence step (a rollup). ``sampled_extractions``: the columns labels
are read with, for every extraction drawn into a sample or labelled.


Calibration needs the population of every stratum as counts per ISO week,
form version and 0.005-wide confidence step (STATS.md section 6), never the
rows themselves. Aggregating ten million rows for every report took most of
its time, so ingest appends each batch's counts to ``extraction_counts`` in
the same transaction as the rows, and readers sum a few tens of thousands
of count rows instead.

The caches are never the truth: :func:`population_counts` checks that
it accounts for every row of ``extractions`` (rows added with SQL outside
fieldtrust, in tests or by hand, are not in it) and reads the rows directly
when it does not; :func:`refresh` rebuilds it, and ingest does so whenever
it finds it out of step. ``store.labelled`` joins the extractions a label
is missing from ``sampled_extractions`` (imported labels, items written
with SQL) against the full table, so that cache only ever saves time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import duckdb
from fieldtrust.store.scope import Scope
from fieldtrust.store.sql import fetch_one, has_table

from fieldtrust.errors import Refused

if TYPE_CHECKING:  # the CLI imports this module (migrations) and starts without pyarrow
    import pyarrow as pa

#: Steps of the confidence grid (STATS.md section 6): ``k = floor(confidence * 200)``.
GRID = 200

# Weeks are counted as whole weeks since Monday 1900-01-01 and labelled after
# aggregating: integer arithmetic on ten million timestamps costs a third of
# date_trunc and a tenth of strftime. The 1e-9 keeps values such as 0.285
# (stored as 0.28499999...) on their own grid step, as calibration.design does.
_COUNTS_SQL = f"""
WITH counts AS (
    SELECT doc_type, field, {{version}} AS form_version,
           (epoch_us(extracted_at) - epoch_us(TIMESTAMP '1900-01-01'))
               // 604800000000 AS week_index,
           floor(confidence * {GRID} + 1e-9)::SMALLINT AS k,
           count(*) AS n,
           sum(confidence) AS sum_confidence
    FROM extractions e
    WHERE {{where}}
    GROUP BY ALL
)
SELECT doc_type, field, form_version,
       strftime(TIMESTAMP '1900-01-01' + to_weeks(week_index::INTEGER), '%G-W%V') AS week,
       k, n, sum_confidence
FROM counts
"""

_COLUMNS = "doc_type, field, form_version, week, k, n, sum_confidence"


def _counts_sql(where: str, version: str = "form_version") -> str:
    """:data:`_COUNTS_SQL` over the rows ``where`` selects, its version column ``version``."""
    return _COUNTS_SQL.format(where=where, version=version)


def append_batch(con: duckdb.DuckDBPyConnection, batch_id: str, rows_added: int) -> None:
    """Add the counts of a batch just stored; call inside the ingest's transaction.

    Rebuilds the whole rollup instead when it was already out of step (rows
    added outside fieldtrust), so one ingest puts it right again.
    """
    if _rows_not_counted(con) != rows_added:
        refresh(con)
        return
    sql = _counts_sql("e.batch_id = ?")
    con.execute(f"INSERT INTO extraction_counts ({_COLUMNS}) {sql}", [batch_id])


def refresh(con: duckdb.DuckDBPyConnection) -> None:
    """Rebuild the rollup from every extraction (a derived cache: nothing is lost).

    Counts a lake source brought home (``source_counts``) are put back; the
    sampled rows copied from it (batches of format ``source``) are not
    counted again.
    """
    con.execute("DELETE FROM extraction_counts")
    if not has_table(con, "source_counts"):  # migration 0018
        con.execute(
            f"INSERT INTO extraction_counts ({_COLUMNS}) {_counts_sql('TRUE')}"
        )
        return
    where = "e.batch_id NOT IN (SELECT batch_id FROM ingest_batches WHERE format = 'source')"
    con.execute(f"INSERT INTO extraction_counts ({_COLUMNS}) {_counts_sql(where)}")
    con.execute(f"INSERT INTO extraction_counts ({_COLUMNS}) SELECT {_COLUMNS} FROM source_counts")


def is_current(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether the rollup counts exactly the rows of ``extractions``."""
    return _rows_not_counted(con) == 0


def _rows_not_counted(con: duckdb.DuckDBPyConnection) -> int:
    # Extractions are append-only, so equal totals mean the same rows.
    # count(*) of a whole table comes from DuckDB's row counts, not a scan.
    sql = (
        "SELECT (SELECT count(*) FROM extractions)"
        " - (SELECT coalesce(sum(n), 0) FROM extraction_counts)"
    )
    if has_table(con, "source_counts"):
        # A lake's rows are counted without being stored, and the few sampled
        # rows copied from it are stored without being counted twice.
        sql += (
            " + (SELECT coalesce(sum(n), 0) FROM source_counts)"
            " - (SELECT coalesce(sum(rows_added), 0) FROM ingest_batches"
            " WHERE format = 'source')"
        )
    row = fetch_one(con, sql)
    return int(row[0]) if row else 0


def counted_sources(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The lake sources this store has counted (``parquet:lake/``), oldest first."""
    if not has_table(con, "source_refreshes"):
        return []
    rows = con.execute(
        "SELECT source FROM source_refreshes GROUP BY source ORDER BY min(refreshed_at)"
    ).fetchall()
    return [str(source) for (source,) in rows]


def ingested_rows(con: duckdb.DuckDBPyConnection) -> int:
    """Extractions the store holds as its own rows (not rows a lake's draw copied in)."""
    row = fetch_one(
        con, "SELECT coalesce(sum(rows_added), 0) FROM ingest_batches WHERE format <> 'source'"
    )
    return int(row[0]) if row else 0


def store_name(con: duckdb.DuckDBPyConnection) -> str:
    """The store's file, for messages (``the store`` when it has none)."""
    row = fetch_one(
        con, "SELECT path FROM duckdb_databases() WHERE database_name = current_database()"
    )
    return str(row[0]) if row and row[0] else "the store"


def counts_a_lake(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether the store counts extractions of a lake source (rows it does not hold)."""
    if not has_table(con, "source_counts"):
        return False
    row = fetch_one(con, "SELECT EXISTS (SELECT 1 FROM source_counts)")
    return bool(row and row[0])



def same_extractions(con: duckdb.DuckDBPyConnection, first: Scope, second: Scope) -> bool:
    """Whether ``first`` and ``second`` select the same extractions (read from the rollup).

    A report's window and the certificate's horizon differ in their weeks, but
    on a store younger than the horizon they hold the same rows, and the
    report then reads them once. False whenever the rollup is not current: the
    answer is then not worth a scan of the rows.
    """
    if not is_current(con):
        return False
    a, a_params = first.where_week_labels("r")
    b, b_params = second.where_week_labels("r")
    row = fetch_one(
        con, f"SELECT NOT EXISTS (SELECT 1 FROM extraction_counts r WHERE ({a}) <> ({b}))",
        [*a_params, *b_params])
    return bool(row and row[0])

_SUMMED_SQL = """
SELECT doc_type, field, form_version, week, k,
       sum(n)::BIGINT AS n, sum(sum_confidence) AS sum_confidence
FROM extraction_counts r
WHERE {where}
GROUP BY doc_type, field, form_version, week, k
"""


def population_counts(con: duckdb.DuckDBPyConnection, scope: Scope = Scope()) -> pa.Table:
    """Extraction counts in ``scope`` per (doc_type, field, form_version, week, k).

    Columns: doc_type, field, form_version, week (ISO text), k (grid step,
    0 to 200), n, sum_confidence; one row per group, unordered. Read from
    the rollup when it accounts for every extraction, else from the rows.
    """
    if is_current(con):
        where, params = scope.where_week_labels("r")
        return con.sql(_SUMMED_SQL.format(where=where), params=params).to_arrow_table()
    where, params = scope.where("e")
    return con.sql(_counts_sql(where), params=params).to_arrow_table()


#: The copy's columns as migration 0014 made it (before the locations and 0070's extractor).
_FIRST_SAMPLED_COLUMNS = (
    "extraction_id, doc_type, form_version, field, confidence, extracted_at"
)
_SAMPLED_COLUMNS = f"{_FIRST_SAMPLED_COLUMNS}, extractor_version"


def segment_counts(con: duckdb.DuckDBPyConnection, scope: Scope = Scope()) -> pa.Table:
    """:func:`population_counts` per segment: form_version holds form x extractor version.

    Its form_version is ``form_version || chr(30) || extractor_version``
    (:func:`fieldtrust.calibration.population.segment_name`). Counted from the
    stored rows: the rollup has no extractor version. A store counting a
    lake holds only the lake's sampled rows, so it is refused.
    """
    if counts_a_lake(con):
        raise Refused(
            "this store counts a lake source, whose counts have no extractor version yet:"
            " segments by extractor version need the rows in the store (`fieldtrust ingest`)"
        )
    where, params = scope.where("e")
    version = "form_version || chr(30) || extractor_version"
    return con.sql(_counts_sql(where, version),
                   params=params).to_arrow_table()
#: Where each copied item's value came from (store.locations), for the review screens.
LOCATION_COLUMNS = ("doc_id", "document_uri", "page", "bbox_x0", "bbox_y0", "bbox_x1", "bbox_y1")


def _copied_columns(con: duckdb.DuckDBPyConnection) -> str:
    """The columns of the copy, as far as the store's migrations have added them.

    Migration 0014 fills the copy before 0016 adds the locations and 0070 the
    extractor version, so each is copied only once the table has it.
    """
    if not _has_column(con, "sampled_extractions", "document_uri"):
        return _FIRST_SAMPLED_COLUMNS
    if not _has_column(con, "sampled_extractions", "extractor_version"):
        return ", ".join([_FIRST_SAMPLED_COLUMNS, *LOCATION_COLUMNS])
    return ", ".join([_SAMPLED_COLUMNS, *LOCATION_COLUMNS])


def _has_column(con: duckdb.DuckDBPyConnection, table: str, column: str) -> bool:
    row = fetch_one(
        con,
        "SELECT count(*) FROM duckdb_columns() WHERE database_name = current_database()"
        " AND schema_name = 'main' AND table_name = ? AND column_name = ?",
        [table, column],
    )
    return bool(row and row[0])


def record_sampled(
    con: duckdb.DuckDBPyConnection, extraction_ids_sql: str, params: list[object],
    scope: Scope = Scope(),
) -> None:
    """Copy the extractions ``extraction_ids_sql`` selects into ``sampled_extractions``.

    ``scope`` (the drawn week, say) lets DuckDB skip the row groups outside
    it. Ids already copied are skipped.
    """
    where, scope_params = scope.where("e")
    columns = _copied_columns(con)
    con.execute(
        f"INSERT INTO sampled_extractions ({columns})"
        f" SELECT {columns} FROM extractions e"
        f" WHERE {where} AND e.extraction_id IN ({extraction_ids_sql})"
        " AND e.extraction_id NOT IN (SELECT extraction_id FROM sampled_extractions)",
        [*scope_params, *params],
    )


def record_sampled_rows(con: duckdb.DuckDBPyConnection, relation: str) -> None:
    """Copy rows of ``relation`` (a table holding the copy's columns) not copied yet."""
    columns = _copied_columns(con)
    con.execute(
        f"INSERT INTO sampled_extractions ({columns})"
        f" SELECT {columns} FROM {relation}"
        " WHERE extraction_id NOT IN (SELECT extraction_id FROM sampled_extractions)"
    )


def refresh_sampled(con: duckdb.DuckDBPyConnection) -> None:
    """Rebuild ``sampled_extractions`` from every audit item and label."""
    con.execute("DELETE FROM sampled_extractions")
    record_sampled(
        con,
        "SELECT extraction_id FROM audit_items UNION SELECT extraction_id FROM labels",
        [],
    )


def refresh_rollups(con: duckdb.DuckDBPyConnection) -> None:
    """Rebuild both caches (a migration runs this once on an existing store)."""
    refresh(con)
    refresh_sampled(con)


def copy_is_complete(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether ``sampled_extractions`` holds every labelled and sampled extraction.

    Then the label readers need not look anything up in ``extractions``
    (:func:`labelled_columns_sql`). Labels and audit items are small tables:
    this costs milliseconds at ten million extractions.
    """
    row = fetch_one(
        con,
        "SELECT NOT EXISTS (SELECT 1 FROM (SELECT extraction_id FROM labels"
        " UNION ALL SELECT extraction_id FROM audit_items) ids"
        " ANTI JOIN sampled_extractions USING (extraction_id))",
    )
    return bool(row and row[0])


def labelled_columns_sql(con: duckdb.DuckDBPyConnection, ids_sql: str) -> str:
    """:func:`extraction_columns_sql` for ids of labelled or sampled extractions.

    Reads ``sampled_extractions`` alone when it holds every such extraction
    (:func:`copy_is_complete`), so a page run never touches the extraction
    rows; else looks the missing ones up as :func:`extraction_columns_sql` does.
    """
    if not copy_is_complete(con):
        return extraction_columns_sql(ids_sql)
    return f"""(
        SELECT s.{_SAMPLED_COLUMNS.replace(', ', ', s.')}
        FROM sampled_extractions s SEMI JOIN ({ids_sql}) ids USING (extraction_id)
    )"""


def extraction_columns_sql(ids_sql: str) -> str:
    """A subquery of the extractions ``ids_sql`` (a SELECT of extraction_id) lists.

    Columns: extraction_id, doc_type, form_version, field, confidence,
    extracted_at. Read from ``sampled_extractions`` where copied; only the
    ids missing there are looked up in ``extractions`` (DuckDB skips that
    scan when none are missing).
    """
    return f"""(
        SELECT s.{_SAMPLED_COLUMNS.replace(', ', ', s.')}
        FROM sampled_extractions s SEMI JOIN ({ids_sql}) ids USING (extraction_id)
        UNION ALL
        SELECT e.{_SAMPLED_COLUMNS.replace(', ', ', e.')}
        FROM extractions e SEMI JOIN (
            SELECT extraction_id FROM ({ids_sql}) ids ANTI JOIN sampled_extractions
                USING (extraction_id)
        ) missing USING (extraction_id)
    )"""


def record_extractor_versions(con: duckdb.DuckDBPyConnection, rows_sql: str) -> None:
    """Note when each (doc_type, form_version, extractor_version) of ``rows_sql`` was first seen.

    ``rows_sql`` is a relation with those columns and ``extracted_at``. A
    first_seen_at moves only earlier: a late file may hold older rows. Call
    inside the writer's transaction.
    """
    con.execute(
        "INSERT INTO extractor_versions"
        f" SELECT doc_type, form_version, extractor_version, min(extracted_at) FROM {rows_sql}"
        " GROUP BY ALL ON CONFLICT (doc_type, form_version, extractor_version) DO UPDATE"
        " SET first_seen_at = least(extractor_versions.first_seen_at, excluded.first_seen_at)"
    )
