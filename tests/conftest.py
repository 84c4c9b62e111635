"""Fixtures shared by every test: real DuckDB files in tmp_path."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import duckdb
import fieldtrust.store.sql  # noqa: F401  (store.sql below)
import pytest
from hypothesis import settings

from fieldtrust import store

# Timing deadlines make property tests fail on a loaded CI machine for reasons
# that have nothing to do with the property; the properties themselves stay.
settings.register_profile("fieldtrust", deadline=None)
settings.load_profile("fieldtrust")


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """Path of a fresh, migrated store file."""
    path = tmp_path / "store.duckdb"
    store.connect(path).close()
    return path


@pytest.fixture
def con(db_path: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-write connection to a fresh store file, closed after the test."""
    connection = store.connect(db_path)
    yield connection
    connection.close()


def table_fingerprint(connection: duckdb.DuckDBPyConnection) -> dict[str, tuple[int, str]]:
    """Row count and an order-independent checksum of every table.

    Tests compare fingerprints before and after a rejected operation to show the
    store is exactly as it was.
    """
    tables = [
        name
        for (name,) in connection.execute(
            "SELECT table_name FROM information_schema.tables"
            " WHERE table_type = 'BASE TABLE' ORDER BY table_name"
        ).fetchall()
    ]
    fingerprint = {}
    for name in tables:
        quoted = store.sql.quote_ident(name)
        # hash(t) hashes the whole row as one struct (DuckDB 2.0 refuses hash(t.*)).
        row = connection.execute(
            f"SELECT count(*), coalesce(bit_xor(hash(t))::VARCHAR, '') FROM {quoted} t"
        ).fetchall()[0]
        fingerprint[name] = (row[0], row[1])
    return fingerprint


@pytest.fixture(scope="session")
def spark_master() -> str:
    """A local Spark session (127.0.0.1, UI off, UTC), started once for the whole run.

    Every test naming this fixture shares it: the JVM takes seconds to start.
    """
    from fieldtrust.store.sources.engines import spark_session

    master = "local[1]"
    spark_session(master)
    return master
