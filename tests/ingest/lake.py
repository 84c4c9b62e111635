"""Small extraction lakes for the source tests: Hive-partitioned Parquet and Delta."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
from fieldtrust.store.access import bootstrap_admin, grant_role

from fieldtrust import store

#: The weeks of :func:`lake_rows`, Monday 2026-01-05 (2026-W02) on.
FIRST_MONDAY = dt.datetime(2026, 1, 5)


def lake_rows(
    n: int, *, weeks: int = 4, seed: int = 1, prefix: str = "x", first_week: int = 0,
    doc_types: tuple[str, ...] = ("invoice", "receipt"), versions: int = 2,
) -> pa.Table:
    """``n`` valid extractions over ``weeks`` weeks from :data:`FIRST_MONDAY` plus
    ``first_week``: two doc types, two fields, two form versions."""
    rng = np.random.default_rng(seed)
    start = FIRST_MONDAY + dt.timedelta(weeks=first_week)
    return pa.table({
        "extraction_id": [f"{prefix}{i:06d}" for i in range(n)],
        "doc_id": [f"{prefix}d{i // 3}" for i in range(n)],
        "doc_type": rng.choice(list(doc_types), n).tolist(),
        "form_version": (rng.choice(["v1", "v2"], n, p=[0.9, 0.1]) if versions > 1
                         else np.full(n, "v1")).tolist(),
        "field": rng.choice(["total", "tax"], n).tolist(),
        "value": [f"{i}.00" for i in range(n)],
        "confidence": np.round(rng.beta(8, 1, n), 4),
        "extracted_at": [start + dt.timedelta(minutes=int(m))
                         for m in rng.integers(0, weeks * 7 * 1440, n)],
    })


def write_parquet_lake(
    rows: pa.Table, folder: Path, *, rename: dict[str, str] | None = None
) -> Path:
    """``rows`` as Parquet files partitioned Hive style by ISO week (``week=2026-W02/``)."""
    con = duckdb.connect()
    con.register("rows_", rows.rename_columns(
        [(rename or {}).get(c, c) for c in rows.column_names]))
    con.execute(
        "COPY (SELECT *, strftime(extracted_at, '%G-W%V') AS week FROM rows_)"
        f" TO '{folder}' (FORMAT parquet, PARTITION_BY (week), APPEND)"
    )
    con.close()
    return folder


def write_delta_lake(rows: pa.Table, folder: Path) -> Path:
    """``rows`` as a Delta table partitioned by ISO week."""
    from deltalake import write_deltalake

    con = duckdb.connect()
    con.register("rows_", rows)
    table = con.sql(
        "SELECT *, strftime(extracted_at, '%G-W%V') AS week FROM rows_"
    ).to_arrow_table()
    con.close()
    write_deltalake(str(folder), table, partition_by=["week"], mode="append")
    return folder


def fresh_store(path: Path) -> duckdb.DuckDBPyConnection:
    """A new store with an admin, a qa_lead (quinn), a reviewer (alice), a manager (mona)."""
    con = store.connect(path)
    bootstrap_admin(con, "root")
    grant_role(con, "root", "quinn", "qa_lead")
    grant_role(con, "root", "alice", "reviewer")
    grant_role(con, "root", "mona", "manager")
    return con


def lake_env(folder: Path, **settings: str) -> dict[str, str]:
    """The environment of a command that reads the Parquet lake in ``folder`` (plus
    ``settings``, as ``FIELDTRUST_<NAME>`` variables)."""
    return {"FIELDTRUST_SOURCE": "parquet", "FIELDTRUST_SOURCE_PATH": str(folder),
            **{f"FIELDTRUST_{name.upper()}": value for name, value in settings.items()}}


def refreshed_store(db: Path, folder: Path, **settings: str) -> dict[str, str]:
    """A new store at ``db`` (:func:`fresh_store`) that `fieldtrust refresh` counted the
    lake in ``folder`` into; the environment its commands run with (:func:`lake_env`)."""
    from click.testing import CliRunner

    from fieldtrust.cli.main import cli

    fresh_store(db).close()
    env = lake_env(folder, **settings)
    refreshed = CliRunner().invoke(cli, ["--db", str(db), "refresh", "--quiet"], env=env)
    assert refreshed.exit_code == 0, refreshed.output
    return env
