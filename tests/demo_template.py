"""The default demo store (``fieldtrust demo``: seed 7, 300,000 rows), built once a test run.

Building it costs a core tens of seconds, and the dashboard's tests, the demo
page's claims and the demo report's story all start from it. The first test
that asks builds it in the run's shared folder; pytest-xdist's other workers
wait on a file lock and reuse the file. Nobody opens the template for writing:
each caller takes a copy (:func:`default_demo_copy`).
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from fieldtrust.demo import build_demo_store
from tests.conftest import copy_store

DEMO_ROWS = 300_000
DEMO_SEED = 7


def shared_dir(factory: pytest.TempPathFactory) -> Path:
    """The folder every worker of this run sees (its own basetemp without xdist)."""
    base = factory.getbasetemp()
    # Under xdist each worker's basetemp sits in the run's own folder: share that one.
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def built_once(factory: pytest.TempPathFactory, name: str,
               build: Callable[[Path], None]) -> Path:
    """``shared_dir / name``, built by ``build`` in the first worker that asks for it."""
    folder = shared_dir(factory)
    path = folder / name
    done = folder / f"{name}.done"
    with (folder / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if not done.exists():
                build(path)
                done.touch()
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return path


def default_demo(factory: pytest.TempPathFactory) -> Path:
    """The default demo store of this run; never written (copy it)."""
    return built_once(factory, "default-demo.duckdb",
                      lambda path: build_demo_store(path, seed=DEMO_SEED, rows=DEMO_ROWS))


def default_demo_copy(factory: pytest.TempPathFactory, target: Path) -> Path:
    """A private copy of :func:`default_demo` at ``target``."""
    return copy_store(default_demo(factory), target)
