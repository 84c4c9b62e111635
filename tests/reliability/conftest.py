"""Fixtures of the reliability suite (helpers live in rel_store.py).

The populated store is built once per test process (a few seconds) and
copied for each test that writes to it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from rel_store import build_store

from fieldtrust import store
from tests.conftest import copy_store


@pytest.fixture(scope="session")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """The populated store, built once per test process; never written by tests."""
    path = tmp_path_factory.mktemp("reliability-template") / "template.duckdb"
    info = build_store(path)
    return path, info


@pytest.fixture
def populated(template: tuple[Path, dict[str, Any]], tmp_path: Path) -> Path:
    """A private copy of the populated store."""
    return copy_store(template[0], tmp_path / "populated.duckdb")


@pytest.fixture
def sample_id(template: tuple[Path, dict[str, Any]]) -> str:
    """The id of the populated store's audit sample."""
    return str(template[1]["sample_id"])


@pytest.fixture
def pcon(populated: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-write connection to a private populated store."""
    connection = store.connect(populated)
    yield connection
    connection.close()


@pytest.fixture(autouse=True)
def demo_dashboard(monkeypatch: pytest.MonkeyPatch) -> None:
    """Dashboards run in-process here are demo dashboards (``fieldtrust serve --demo``).

    Without ``--demo`` (or ``--as NAME``, or ``[auth]``) the dashboard lets nobody in;
    a test of that replaces ``sys.argv`` itself.
    """
    monkeypatch.setattr(sys, "argv", [sys.argv[0], "--demo"])
