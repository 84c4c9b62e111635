"""The population histogram of stated confidence, and the list of current maps."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path

import duckdb
import numpy as np
import pytest
from click.testing import CliRunner
from fieldtrust.calibration.histogram import confidence_histogram
from fieldtrust.calibration.maps import MapSummary, current_maps
from fieldtrust.calibration.recalibrate import stored_map
from fieldtrust.store.scope import Scope
from hypothesis import given, settings
from hypothesis import strategies as st

from fieldtrust import store
from fieldtrust.cli.main import cli
from fieldtrust.errors import InputError
from tests.conftest import Builder

W10 = dt.datetime(2026, 3, 2, 9)  # 2026-W10
W11 = dt.datetime(2026, 3, 9, 9)  # 2026-W11


def _add(con: duckdb.DuckDBPyConnection, confidences: list[float], *, doc_type: str = "invoice",
         field: str = "total", form_version: str = "v1", at: dt.datetime = W10,
         prefix: str = "e") -> None:
    if not confidences:
        return
    Builder(con).extractions([
        {"extraction_id": f"{prefix}{i}", "doc_id": "d", "doc_type": doc_type,
         "form_version": form_version, "field": field, "value": "1", "confidence": c,
         "extracted_at": at}
        for i, c in enumerate(confidences)
    ])


def test_histogram_counts_by_hand(con: duckdb.DuckDBPyConnection) -> None:
    _add(con, [0.0, 0.05, 0.249, 0.25, 0.6, 0.99, 1.0])
    _add(con, [0.1], field="tax", prefix="t")  # another stratum: not counted
    table = confidence_histogram(con, "invoice", "total", bins=4)
    assert table.column_names == ["bin", "lower", "upper", "count"]
    assert table.to_pylist() == [
        {"bin": 0, "lower": 0.0, "upper": 0.25, "count": 3},
        {"bin": 1, "lower": 0.25, "upper": 0.5, "count": 1},
        {"bin": 2, "lower": 0.5, "upper": 0.75, "count": 1},
        {"bin": 3, "lower": 0.75, "upper": 1.0, "count": 2},  # 1.0 falls in the last bin
    ]


def test_histogram_follows_the_scope(con: duckdb.DuckDBPyConnection) -> None:
    _add(con, [0.15, 0.95], at=W10)
    _add(con, [0.95, 0.96, 0.97], at=W11, form_version="v2", prefix="n")
    def counts(scope: Scope) -> list[int]:
        return confidence_histogram(con, "invoice", "total", scope, bins=2)["count"].to_pylist()

    assert counts(Scope()) == [1, 4]
    assert counts(Scope(weeks=("2026-W11",))) == [0, 3]
    assert counts(Scope(form_versions=("v1",))) == [1, 1]
    assert counts(Scope(weeks=("2026-W12",))) == [0, 0]  # empty bins, never missing rows
    assert counts(Scope(doc_types=("receipt",))) == [0, 0]


def test_histogram_of_an_unknown_stratum_has_every_bin_empty(
    con: duckdb.DuckDBPyConnection,
) -> None:
    table = confidence_histogram(con, "nope", "nothing", bins=40)
    assert len(table) == 40 and sum(table["count"].to_pylist()) == 0
    assert table["upper"].to_pylist()[-1] == 1.0


@pytest.mark.parametrize("bins", [0, -3, 2.5, "10", True])
def test_histogram_refuses_bad_bin_counts(con: duckdb.DuckDBPyConnection, bins: object) -> None:
    with pytest.raises(InputError, match="bins must be a whole number of at least 1"):
        confidence_histogram(con, "invoice", "total", bins=bins)  # type: ignore[arg-type]


@settings(max_examples=50)
@given(
    confidences=st.lists(st.floats(0, 1, allow_nan=False), min_size=1, max_size=60),
    bins=st.integers(1, 50),
)
def test_histogram_matches_numpy(
    shared_con: duckdb.DuckDBPyConnection, confidences: list[float], bins: int
) -> None:
    c = np.asarray(confidences)
    # numpy's edges come from linspace, ours from floor(c * bins): the two can
    # differ by a rounding step for a value sitting exactly on an edge.
    off_edge = c[np.abs(c * bins - np.round(c * bins)) > 1e-9]
    con = shared_con
    try:
        _add(con, confidences)
        _add(con, off_edge.tolist(), field="off_edge", prefix="o")
        every = confidence_histogram(con, "invoice", "total", bins=bins)["count"].to_pylist()
        away = confidence_histogram(con, "invoice", "off_edge", bins=bins)["count"].to_pylist()
    finally:
        con.execute("DELETE FROM extractions")
    assert away == np.histogram(off_edge, bins=bins, range=(0, 1))[0].tolist()
    by_floor = np.minimum(np.floor(c * bins), bins - 1).astype(int)
    assert every == np.bincount(by_floor, minlength=bins).tolist()
    assert sum(every) == len(confidences)


@pytest.fixture(scope="module")
def shared_con(tmp_path_factory: pytest.TempPathFactory) -> Iterator[duckdb.DuckDBPyConnection]:
    """One store for every hypothesis example (each example empties it after itself)."""
    connection = store.connect(tmp_path_factory.mktemp("hist") / "store.duckdb")
    yield connection
    connection.close()


def _map(con: duckdb.DuckDBPyConnection, map_id: str, doc_type: str, field: str,
         method: str, at: dt.datetime, knots: list[tuple[float, float]],
         ece: tuple[float | None, float | None] = (0.08, 0.02)) -> None:
    con.execute(
        "INSERT INTO recalibration_maps VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [map_id, doc_type, field, method, 500, 0.11, ece[0], ece[1], at],
    )
    con.executemany("INSERT INTO recalibration_knots VALUES (?, ?, ?)",
                    [[map_id, x, y] for x, y in knots])


def test_current_maps_lists_the_newest_map_of_each_stratum(
    con: duckdb.DuckDBPyConnection,
) -> None:
    assert current_maps(con) == []
    _map(con, "m1", "invoice", "total", "platt", W10, [(0, 0.1), (1, 0.9)])
    _map(con, "m2", "invoice", "total", "isotonic", W11, [(0, 0), (0.5, 0.4), (1, 1)])
    _map(con, "m3", "receipt", "tax", "identity", W10, [(0, 0), (1, 1)], ece=(0.05, None))
    assert current_maps(con) == [
        MapSummary("invoice", "total", "m2", "isotonic", 500, 0.11, 0.08, 0.02, W11, 3),
        MapSummary("receipt", "tax", "m3", "identity", 500, 0.11, 0.05, None, W10, 2),
    ]
    # The same current map as stored_map, which also gives its knots.
    shown = stored_map(con, "invoice", "total")
    assert shown is not None and shown.map_id == "m2"
    assert shown.map.x.tolist() == [0, 0.5, 1]


def _cli(db: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["--db", str(db), *args])
    return result.exit_code, result.stdout, result.stderr


def test_histogram_and_maps_commands(db_path: Path) -> None:
    con = store.connect(db_path)
    try:
        _add(con, [0.1, 0.7, 0.8, 0.95])
        _map(con, "m1", "invoice", "total", "platt", W10, [(0, 0.1), (1, 0.9)])
    finally:
        con.close()
    code, out, _ = _cli(db_path, "histogram", "--doc-type", "invoice", "--field", "total",
                        "--bins", "2", "--weeks", "1", "--json")
    assert code == 0
    assert [(r["lower"], r["upper"], r["count"]) for r in json.loads(out)] == [
        (0.0, 0.5, 1), (0.5, 1.0, 3)]
    code, out, _ = _cli(db_path, "histogram", "--doc-type", "invoice", "--field", "total",
                        "--bins", "2")
    assert code == 0
    assert "4 extractions" in out and "[0.500, 1.000]  3" in out and "75.0%" in out
    code, out, _ = _cli(db_path, "maps", "--json")
    assert code == 0
    (shown,) = json.loads(out)
    assert (shown["doc_type"], shown["method"], shown["n_knots"], shown["ece_after"]) == (
        "invoice", "platt", 2, 0.02)
    code, _, err = _cli(db_path, "histogram", "--doc-type", "invoice", "--field", "total",
                        "--bins", "0")
    assert code == 2 and "0 is not in the range 1<=x<=1000" in err


def test_maps_command_before_any_fit(db_path: Path) -> None:
    code, out, _ = _cli(db_path, "maps")
    assert (code, out.strip()) == (0, "no recalibration maps yet: run `fieldtrust recalibrate`")
