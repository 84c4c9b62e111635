"""The demo's hidden truth: a table only a demo store has.

For every demo extraction, ``demo_truth`` says whether the model read it
right, the true value and, when wrong, why (in the labels taxonomy). The
simulated reviewers label from it, demo documents are drawn from it, and the
demo's summary measures the store against it. The demo creates the table when
it builds a store, so a production store never has it; no production module
reads it (every report uses labels only). Stores made before migration 0025
got the table from the schema (migrations 0006 and 0011) and keep it: empty,
unless they are demo stores.
"""

from __future__ import annotations

import duckdb
import pyarrow as pa

from fieldtrust.store.sql import has_table

TRUTH_TABLE = "demo_truth"

#: The columns once migrations 0006 and 0011 had made it, as old stores hold it.
_CREATE = """
CREATE TABLE IF NOT EXISTS demo_truth (
    extraction_id VARCHAR PRIMARY KEY,
    correct       BOOLEAN NOT NULL,
    true_value    VARCHAR,
    error_type    VARCHAR,
    error_detail  VARCHAR
)
"""

_STAGED = "_fieldtrust_demo_truth"


def create_truth_table(con: duckdb.DuckDBPyConnection) -> None:
    """Give the store a ``demo_truth`` table (an old store's is kept as it is)."""
    con.execute(_CREATE)


def truth_rows(con: duckdb.DuckDBPyConnection) -> int:
    """How many extractions have a hidden truth (0 for a store that is no demo store)."""
    if not has_table(con, TRUTH_TABLE):
        return 0
    return int(con.execute("SELECT count(*) FROM demo_truth").fetchall()[0][0])


def insert_truth(con: duckdb.DuckDBPyConnection, truth: pa.Table) -> None:
    """Add ``truth`` (extraction_id, correct, true_value, error_type, error_detail) rows."""
    create_truth_table(con)
    con.register(_STAGED, truth)
    try:
        con.execute(
            "INSERT INTO demo_truth (extraction_id, correct, true_value, error_type, error_detail)"
            f" SELECT extraction_id, correct, true_value, error_type, error_detail FROM {_STAGED}"
        )
    finally:
        con.unregister(_STAGED)
