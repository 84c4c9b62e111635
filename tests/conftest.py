"""Fixtures shared by every test: real DuckDB files in tmp_path, the one store builder
(:class:`Builder`), the one table fingerprint (:func:`table_fingerprint`) and helpers
on closed store files (:func:`file_rows`, :func:`copy_store`, :func:`store_held`).

Audit samples, labels and grants are written with SQL by the builder (the
sampling and labels packages write them in production, and are tested on
their own); the rows follow the schema in store/migrations.py.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import duckdb
import fieldtrust.store.sql  # noqa: F401  (store.sql below)
import pyarrow as pa
import pytest
from hypothesis import settings

from fieldtrust import store

# Timing deadlines make property tests fail on a loaded CI machine for reasons
# that have nothing to do with the property; the properties themselves stay.
settings.register_profile("fieldtrust", deadline=None)
settings.load_profile("fieldtrust")

# The tests' Spark jobs are tiny and the JVM lives for one run: its optimising
# compiler would spend more CPU compiling than the jobs take (half the JVM's CPU,
# measured on two cores). The first tier alone, and the serial collector, for
# every local Spark the tests start, in this process or a CLI it runs. A team's
# own Spark keeps the JVM's defaults: this is the tests' setting only.
os.environ.setdefault("PYSPARK_SUBMIT_ARGS",
                      '--driver-java-options "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"'
                      " pyspark-shell")


@pytest.fixture(scope="session", autouse=True)
def signing_key(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The key decisions are signed with in this test run, kept outside every store.

    Installed for library calls (``store.signing.using``) and set in the
    environment as the ``signing_key_file`` setting (``FIELDTRUST_SIGNING_KEY_FILE``), so
    the CLI, the dashboard and the servers the tests start sign and verify
    with it too.
    """
    from fieldtrust.store.signing import KEY_ENV, create_key, using

    path = tmp_path_factory.mktemp("signing") / "signing.key"
    create_key(path)
    with pytest.MonkeyPatch.context() as patch, using(str(path)):
        patch.setenv(KEY_ENV, str(path))
        yield path


@pytest.fixture(scope="session")
def migrated_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new store, migrated once a worker; never opened again (tests get copies).

    Running every migration costs a new store about 180 ms, and most tests
    start from one: a copy of this closed file is the same store for a few.
    The tests of making a store (tests/store/) make their own.
    """
    path = tmp_path_factory.mktemp("migrated") / "store.duckdb"
    store.connect(path).close()
    return path


@pytest.fixture
def db_path(tmp_path: Path, migrated_store: Path) -> Path:
    """Path of a fresh, migrated store file: a copy of :func:`migrated_store`."""
    return copy_store(migrated_store, tmp_path / "store.duckdb")


@pytest.fixture
def con(db_path: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-write connection to a fresh store file, closed after the test."""
    connection = store.connect(db_path)
    yield connection
    connection.close()


Fingerprint = dict[str, tuple[int, str]]


def table_fingerprint(
    connection: duckdb.DuckDBPyConnection, tables: Sequence[str] | None = None
) -> Fingerprint:
    """Row count and an order-independent checksum of every table (or of ``tables``).

    Tests compare fingerprints before and after a rejected operation to show the
    store is exactly as it was.
    """
    if tables is None:
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


def file_fingerprint(path: str | os.PathLike[str], tables: Sequence[str] | None = None
                     ) -> Fingerprint:
    """:func:`table_fingerprint` of the (closed) store file at ``path``."""
    connection = store.connect(path, read_only=True)
    try:
        return table_fingerprint(connection, tables)
    finally:
        connection.close()


def file_rows(
    path: str | os.PathLike[str], sql: str, params: Sequence[object] | None = None
) -> list[tuple[Any, ...]]:
    """The rows ``sql`` returns from the (closed) store file at ``path``, opened read-only."""
    connection = store.connect(path, read_only=True)
    try:
        return connection.execute(sql, list(params or [])).fetchall()
    finally:
        connection.close()


def named_cases(argnames: Sequence[str], cases: Sequence[Sequence[Any]]) -> pytest.MarkDecorator:
    """``pytest.mark.parametrize`` over ``(name, *values)`` rows: each case's first item is its id.

    So that a table of cases reads with its names beside them, and a failure names the case.
    """
    return pytest.mark.parametrize(
        tuple(argnames), [tuple(c[1:]) for c in cases], ids=[str(c[0]) for c in cases]
    )


def copy_store(source: Path, target: Path) -> Path:
    """Copy a (closed) store file and its WAL, if any."""
    shutil.copyfile(source, target)
    wal = source.with_name(source.name + ".wal")
    if wal.exists():
        shutil.copyfile(wal, target.with_name(target.name + ".wal"))
    return target


#: How long a dashboard in the test process waits for a store that store_held holds.
HELD_LOCK_WAIT = 0.5


@contextlib.contextmanager
def store_held(path: Path) -> Iterator[None]:
    """Another fieldtrust process (an ingest, say) holding the store read-write for the block.

    It opens as the CLI does, in turn: a dashboard in this process that kept the
    store open after a write lets go when it sees it waiting. Held for the whole
    block, the store never frees up within a dashboard's wait, so a dashboard in this
    process waits :data:`HELD_LOCK_WAIT` instead of its full ``LOCK_WAIT``: the same
    message, a few seconds sooner (waits that end in time have tests of their own).
    """
    from unittest import mock

    from fieldtrust.dashboard import data as dashboard_data

    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time; from fieldtrust import store;"
         " con = store.connect(sys.argv[1], lock_timeout=60);"
         " print('ready', flush=True); time.sleep(120)", str(path)],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        with mock.patch.object(dashboard_data, "LOCK_WAIT", HELD_LOCK_WAIT):
            yield
    finally:
        holder.kill()
        holder.wait()


@contextlib.contextmanager
def small_disk(folder: Path, megabytes: int) -> Iterator[Path]:
    """A private tmpfs of ``megabytes`` MB mounted at ``folder`` (root only: CI runs as
    root; elsewhere the test is skipped and says why), unmounted afterwards."""
    folder.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={megabytes}m", "tmpfs",
                           str(folder)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {done.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def fill_disk(folder: Path) -> Path:
    """Write a file until the disk holding ``folder`` has no byte left; the file."""
    filler = folder / f"filler-{uuid.uuid4().hex[:6]}"
    chunk = b"\0" * (1 << 20)
    with filler.open("wb", buffering=0) as handle:
        for size in (1 << 20, 1 << 12, 1):
            piece = chunk[:size]
            with contextlib.suppress(OSError):
                while True:
                    handle.write(piece)
    return filler


# --- the store builder ----------------------------------------------------------

SAMPLE = "2026-W10/v1"
WEEK = "2026-W10"
MONDAY = dt.datetime(2026, 3, 2, 9, 0)

#: Users of the standard fixture, by role ('none' = granted, then revoked).
USERS = {
    "root": "admin",
    "alice": "reviewer",
    "bob": "reviewer",
    "dave": "reviewer",
    "carol": "qa_lead",
    "mona": "manager",
    "ned": "none",
}

#: The fixture sample: three cells of four items; the first item of each cell
#: (lowest PRN) is marked for double review.
CELLS = ("invoice|total|high|established", "invoice|total|low|established",
         "invoice|tax|high|established")

#: Column defaults of :meth:`Builder.extractions` (doc_id defaults to ``doc-<extraction_id>``).
EXTRACTION_DEFAULTS: dict[str, object] = {
    "doc_type": "invoice", "form_version": "v1", "field": "total", "value": "10.00",
    "value_status": "present", "confidence": 0.9, "extracted_at": MONDAY, "batch_id": "b1",
}


class Builder:
    """Writes extractions, audit samples and users straight into a store."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con
        self._batch = False

    def extraction(
        self,
        extraction_id: str,
        *,
        doc_type: str = "invoice",
        field: str = "total",
        form_version: str = "v1",
        value: str | None = "10.00",
        confidence: float = 0.9,
        at: dt.datetime = MONDAY,
    ) -> str:
        self.con.execute(
            "INSERT INTO extractions (extraction_id, doc_id, doc_type, form_version, field,"
            " value, value_status, confidence, extracted_at, source_excerpt, batch_id)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'b1')",
            [extraction_id, f"doc-{extraction_id}", doc_type, form_version, field, value,
             "present" if value is not None else "null", confidence, at, f"... {value} ..."],
        )
        return extraction_id

    def extractions(self, rows: list[dict[str, object]] | pa.Table | Any) -> None:
        """Many extractions at once: dicts, an Arrow table or a pandas frame, each row with
        an extraction_id and any column to override (the others get :data:`EXTRACTION_DEFAULTS`)."""
        if isinstance(rows, list):
            table = pa.Table.from_pylist(rows)
        elif isinstance(rows, pa.Table):
            table = rows
        else:
            table = pa.Table.from_pandas(rows, preserve_index=False)
        given = set(table.column_names)
        fill = [f"? AS {column}" for column in EXTRACTION_DEFAULTS if column not in given]
        params = [value for column, value in EXTRACTION_DEFAULTS.items() if column not in given]
        if "doc_id" not in given:
            fill.append("'doc-' || extraction_id AS doc_id")
        self.con.register("new_extractions", table)
        try:
            self.con.execute(
                f"INSERT INTO extractions BY NAME SELECT {', '.join([*fill, '*'])}"
                " FROM new_extractions",
                params,
            )
        finally:
            self.con.unregister("new_extractions")

    def labels(self, rows: list[dict[str, object]]) -> None:
        """Label rows written directly (fixture data; the API is tested on its own)."""
        base = dt.datetime(2026, 3, 9)
        table = pa.Table.from_pylist([
            {"label_id": str(uuid.uuid4()), "review_round": "primary", "corrected_value": None,
             "corrected_status": None, "error_type": None,
             "labeled_at": base + dt.timedelta(seconds=i), **r}
            for i, r in enumerate(rows)
        ])
        self.con.register("new_labels", table)
        self.con.execute("INSERT INTO labels BY NAME SELECT * FROM new_labels")
        self.con.unregister("new_labels")
        self._chain("labels", "label_id IN (SELECT unnest(?::VARCHAR[]))",
                    [table.column("label_id").to_pylist()])

    def sample(
        self,
        sample_id: str,
        week: str,
        items: Iterable[tuple[str, str, float, float, bool]],
        *,
        version: int = 1,
    ) -> None:
        """items: (extraction_id, cell, inclusion_prob, prn, double_review)."""
        items = list(items)
        design = {"week": week, "seed": 7, "cells": sorted({cell for _, cell, *_ in items})}
        design_json = json.dumps(design, sort_keys=True, separators=(",", ":"))
        self.con.execute(
            "INSERT INTO audit_samples VALUES (?, ?, ?, 7, ?, ?, ?, 'carol')",
            [sample_id, week, version, design_json,
             hashlib.sha256(design_json.encode()).hexdigest(), MONDAY],
        )
        by_cell: dict[str, list[tuple[str, str, float, float, bool]]] = {}
        for item in items:
            by_cell.setdefault(item[1], []).append(item)
        for cell, members in by_cell.items():
            doc_type, field, band, status = cell.split("|")
            pi = members[0][2]
            self.con.execute(
                "INSERT INTO audit_cells VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [sample_id, cell, doc_type, field, band, status,
                 round(len(members) / pi), len(members), pi],
            )
        for extraction_id, cell, pi, prn, double in items:
            self.con.execute(
                "INSERT INTO audit_items VALUES (?, ?, ?, ?, ?, ?)",
                [sample_id, extraction_id, cell, pi, prn, double],
            )

    def users(self, users: dict[str, str] = USERS) -> None:
        """Grant rows written directly, as an admin 'root' would have made them."""
        base = dt.datetime(2026, 1, 5)
        for i, (name, role) in enumerate(users.items()):
            if role == "none":  # granted once, then revoked
                self.con.execute("INSERT INTO user_roles VALUES (?, 'reviewer', 'root', ?)",
                                 [name, base])
            self.con.execute("INSERT INTO user_roles VALUES (?, ?, 'root', ?)",
                             [name, role, base + dt.timedelta(minutes=i + 1)])
        self._chain("user_roles", "user_name IN (SELECT unnest(?::VARCHAR[]))"
                    " AND granted_at BETWEEN ? AND ?",
                    [list(users), base, base + dt.timedelta(minutes=len(users))])

    def _chain(self, table: str, where: str, params: list[object]) -> None:
        """Chain the rows just written, as a writer of the library would (a store whose
        history verifies: ``policy export`` refuses any other)."""
        from fieldtrust.store.chain import CHAINED, append_entries

        order = ", ".join(CHAINED[table].order)
        cursor = self.con.execute(f"SELECT * FROM {table} WHERE {where} ORDER BY {order}", params)
        names = [d[0] for d in cursor.description or ()]
        append_entries(self.con, [(table, dict(zip(names, row, strict=True)))
                                  for row in cursor.fetchall()])


@pytest.fixture
def builder(con: duckdb.DuckDBPyConnection) -> Builder:
    return Builder(con)


@pytest.fixture
def review_store(con: duckdb.DuckDBPyConnection, builder: Builder) -> duckdb.DuckDBPyConnection:
    """Users of every role and sample 2026-W10/v1: 3 cells x 4 items, one double review each."""
    builder.users()
    items, rows = [], []
    for c, cell in enumerate(CELLS):
        field = cell.split("|")[1]
        for k in range(4):
            extraction_id = f"e{c}{k}"
            rows.append({"extraction_id": extraction_id, "field": field,
                         "confidence": 0.97 if "high" in cell else 0.6,
                         "source_excerpt": "... 10.00 ..."})
            items.append((extraction_id, cell, 0.5, (k + 1) / 10 + c / 100, k == 0))
    builder.extractions(rows)
    builder.sample(SAMPLE, WEEK, items)
    return con


# --- engines shared by the run ---------------------------------------------------

#: Where the tests that need Label Studio are moved in the run: before this folder's.
LABEL_STUDIO_BEFORE = "tests/sampling/"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the Label Studio tests late, once CI's install beside the tests is done.

    ``.ci/run`` installs Label Studio while the tests run (a minute and a half
    or more); a worker that reached them early sat idle waiting for it. xdist
    hands out work in collection order, so they move to the second half.
    """
    late = [item for item in items if _group_of(item) == "label_studio"]
    if not late:
        return
    rest = [item for item in items if _group_of(item) != "label_studio"]
    at = next((index for index, item in enumerate(rest)
               if item.nodeid.startswith(LABEL_STUDIO_BEFORE)), len(rest))
    items[:] = [*rest[:at], *late, *rest[at:]]


def _group_of(item: pytest.Item) -> str | None:
    mark = item.get_closest_marker("xdist_group")
    return str(mark.args[0]) if mark and mark.args else None


@pytest.fixture(scope="session")
def chromium() -> str:
    """Debian's Chromium for the browser tests; waits for CI's install beside the tests,
    skips without it, and fails without it in CI (tests/beside.py)."""
    from tests.beside import chromium

    return chromium()


@pytest.fixture(scope="session")
def label_studio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """One real Label Studio server for the run: its base URL and its local files root.

    Its tests carry ``xdist_group("label_studio")``, so they run on one worker
    and share it (tests/label_studio_server.py).
    """
    from tests.label_studio_server import running_label_studio

    with running_label_studio(tmp_path_factory.mktemp("label-studio")) as server:
        yield server


@pytest.fixture(scope="session")
def spark_master() -> str:
    """A local Spark session (127.0.0.1, UI off, UTC), started once for the whole run.

    Every test naming this fixture shares it: the JVM takes seconds to start. The
    tests that start Spark carry ``xdist_group("spark")``, so one worker starts it once.
    """
    from fieldtrust.ingest.sources.engines import spark_session

    master = "local[1]"
    spark_session(master)
    return master
