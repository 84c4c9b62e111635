"""One door per act whatever holds the rows, and one policy in force.

The draw and the review queue take an open lake source or none (the store's
own rows); the CLI and the dashboard find it from the same settings and go
through the same functions, which check their arguments once. Governance and
both queues read the policy in force from one view.
"""

from __future__ import annotations

import ast
import datetime as dt
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
from click.testing import CliRunner
from fieldtrust.governance.decisions import current_policy
from fieldtrust.ingest.extractions import ingest_table
from fieldtrust.ingest.sources import SourceConfig, open_configured, open_source, refresh_source
from fieldtrust.sampling.draw import draw_sample
from fieldtrust.sampling.queue import priority_queue

from fieldtrust.cli.main import cli
from fieldtrust.errors import InputError
from tests.ingest.lake import fresh_store, lake_rows, refreshed_store, write_parquet_lake

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = ("store", "ingest", "calibration", "extraction", "labels", "sampling", "governance")


@pytest.fixture(scope="module")
def rows() -> pa.Table:
    return lake_rows(1200, weeks=2, seed=5)


@pytest.fixture
def lake(rows: pa.Table, tmp_path: Path) -> Path:
    return write_parquet_lake(rows, tmp_path / "lake")


def _decide(con: duckdb.DuckDBPyConnection, decision_id: str, doc_type: str, field: str,
            action: str, threshold: float | None, day: int) -> None:
    con.execute(
        "INSERT INTO decisions VALUES (?, ?, ?, ?, ?, 'mona', 'manager', 'test', ?, NULL)",
        [decision_id, doc_type, field, action, threshold, dt.datetime(2026, 12, day)],
    )


@pytest.mark.parametrize("limit", [0, -1, 100_001])
def test_the_queue_refuses_a_bad_limit_alike_on_the_store_and_on_a_lake(
    lake: Path, tmp_path: Path, limit: int
) -> None:
    con = fresh_store(tmp_path / "s.duckdb")
    refresh_source(con, open_source(SourceConfig("parquet", str(lake))))
    with pytest.raises(InputError) as on_store:
        priority_queue(con, limit=limit)
    with open_source(SourceConfig("parquet", str(lake))) as source, \
            pytest.raises(InputError) as on_lake:
        priority_queue(con, limit=limit, source=source)
    assert str(on_lake.value) == str(on_store.value) == (
        f"limit must be between 1 and 100,000, got {limit:,}")


def test_queue_limit_0_on_a_lake_is_one_error_line_and_exit_2(lake: Path, tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    env = refreshed_store(db, lake)
    runner = CliRunner()
    result = runner.invoke(cli, ["--db", str(db), "queue", "--limit", "0"], env=env)
    assert result.exit_code == 2, result.output
    assert result.output == "error: limit must be between 1 and 100,000, got 0\n"
    shown = runner.invoke(cli, ["--db", str(db), "queue", "--limit", "3", "--json"], env=env)
    assert shown.exit_code == 0, shown.output
    assert shown.output.count('"extraction_id"') == 3


def test_a_draw_through_the_door_picks_the_same_rows_from_a_lake_as_from_the_store(
    rows: pa.Table, lake: Path, tmp_path: Path
) -> None:
    embedded = fresh_store(tmp_path / "e.duckdb")
    ingest_table(embedded, rows, source="rows")
    on_store = draw_sample(embedded, "2026-W02", seed=3, actor="quinn")
    con = fresh_store(tmp_path / "l.duckdb")
    config = SourceConfig("parquet", str(lake))
    with open_configured(config) as source:
        assert source is not None
        refresh_source(con, source)
        on_lake = draw_sample(con, " 2026-W02", seed=3, actor="quinn", source=source)
        again = draw_sample(con, "2026-W02", seed=3, actor="quinn", source=source)
    assert (on_lake.sample_id, on_lake.created, again.created) == ("2026-W02/v1", True, False)
    assert on_lake.cells.to_pylist() == on_store.cells.to_pylist()
    assert on_lake.week == on_store.week == "2026-W02"
    picked = "SELECT extraction_id FROM audit_items WHERE sample_id = ? ORDER BY ALL"
    assert (con.execute(picked, [on_lake.sample_id]).fetchall()
            == embedded.execute(picked, [on_store.sample_id]).fetchall())
    assert open_configured(SourceConfig()) is None  # the store's own rows: no lake to open


def test_the_dashboard_finds_the_lake_the_cli_finds(
    lake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fieldtrust.dashboard import data

    monkeypatch.setenv("FIELDTRUST_SOURCE", "parquet")
    monkeypatch.setenv("FIELDTRUST_SOURCE_PATH", str(lake))
    with data.configured_source() as source:
        assert source is not None
        assert source.config == SourceConfig("parquet", str(lake))
        assert source.window is not None
    monkeypatch.setenv("FIELDTRUST_SOURCE", "store")
    with data.configured_source() as source:
        assert source is None


def test_governance_and_both_queues_read_one_policy_in_force(
    rows: pa.Table, lake: Path, tmp_path: Path
) -> None:
    embedded = fresh_store(tmp_path / "e.duckdb")
    ingest_table(embedded, rows, source="rows")
    con = fresh_store(tmp_path / "l.duckdb")
    source = open_source(SourceConfig("parquet", str(lake)))
    refresh_source(con, source)

    def queued(store: duckdb.DuckDBPyConnection, **lake_: object) -> set[tuple[str, str]]:
        table = priority_queue(store, limit=2000, **lake_)  # type: ignore[arg-type]
        return {(r["doc_type"], r["field"]) for r in table.to_pylist() if r["confidence"] >= 0.5}

    assert ("invoice", "total") in queued(embedded) and ("invoice", "total") in queued(
        con, source=source)
    for store in (embedded, con):
        _decide(store, "d1", "invoice", "total", "approve", 0.5, 1)
        _decide(store, "d2", "receipt", "tax", "approve", 0.6, 2)
        _decide(store, "d3", "receipt", "tax", "revoke", None, 3)
    for store, lake_ in ((embedded, {}), (con, {"source": source})):
        policy = [(e.doc_type, e.field, e.status, e.threshold) for e in current_policy(store)]
        assert policy == [("invoice", "total", "active", 0.5), ("receipt", "tax", "none", None)]
        assert store.execute(
            "SELECT doc_type, field, action, automated_above FROM policy_in_force ORDER BY ALL"
        ).fetchall() == [("invoice", "total", "approve", 0.5), ("receipt", "tax", "revoke", None)]
        shown = queued(store, **lake_)
        assert ("invoice", "total") not in shown  # automated above 0.5
        assert ("receipt", "tax") in shown  # revoked: back in the queue
    source.close()


def _private_imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [f"{path.relative_to(ROOT)} imports {alias.name} from {node.module}"
            for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
            and (node.module or "").startswith("fieldtrust.")
            for alias in node.names if alias.name.startswith("_")]


#: Private on purpose: no public governance function takes evidence from its caller
#: (tests/governance/test_approval_binding.py), so only the acts may freeze it.
ALLOWED = {"governance/acts.py imports _freeze from fieldtrust.governance.evidence"}


def test_no_library_module_imports_a_private_name_of_another() -> None:
    found = [line for package in LIBRARY for path in sorted((ROOT / package).rglob("*.py"))
             for line in _private_imports(path)]
    assert sorted(set(found) - ALLOWED) == []
