"""Which code and which schema wrote something: the versions frozen with evidence.

The code version is written once, in ``fieldtrust/__init__.py`` (pyproject.toml
reads it from there); the schema version is the store's newest applied
migration. Every record that names them (evidence snapshots, the policy file)
asks here.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
from fieldtrust.store.retry import first_row

# The package root holds the version and nothing else, so reading it pulls in
# no higher layer (tests/test_layers.py checks the root imports nothing).
from fieldtrust import __version__


@dataclass(frozen=True)
class Provenance:
    """The fieldtrust version and the store's schema version at one moment."""

    code_version: str
    schema_version: str | None  # None: a store with no migration applied yet


def code_version() -> str:
    """The installed fieldtrust version, e.g. ``0.1.0``."""
    return __version__


def schema_version(con: duckdb.DuckDBPyConnection) -> str | None:
    """The name of the store's newest applied migration, or None before the first."""
    row = first_row(con.execute(
        "SELECT name FROM schema_migrations ORDER BY applied_at DESC, name DESC LIMIT 1"
    ).fetchall())
    return str(row[0]) if row else None


def provenance(con: duckdb.DuckDBPyConnection) -> Provenance:
    """The code and schema versions now, as frozen with a decision's evidence."""
    return Provenance(code_version=code_version(), schema_version=schema_version(con))
