"""Design weights as every estimate sees them (STATS.md section 2)."""

from __future__ import annotations

import datetime as dt

import duckdb
import pytest
from fieldtrust.store.labelled import labelled_items
from fieldtrust.store.scope import Scope, last_weeks, latest_week

from tests.conftest import Builder

MONDAY_W02 = dt.datetime(2026, 1, 5, 9)  # 2026-W02
MONDAY_W03 = dt.datetime(2026, 1, 12, 9)  # 2026-W03


def add_extractions(
    con: duckdb.DuckDBPyConnection,
    ids: list[str],
    *,
    field: str = "total",
    at: dt.datetime = MONDAY_W02,
    confidence: float = 0.9,
) -> None:
    Builder(con).extractions([
        {"extraction_id": i, "field": field, "value": "1", "confidence": confidence,
         "extracted_at": at}
        for i in ids
    ])


def add_label(
    con: duckdb.DuckDBPyConnection,
    label_id: str,
    extraction_id: str,
    verdict: str,
    *,
    review_round: str = "primary",
    at: dt.datetime = MONDAY_W03,
    supersedes: str | None = None,
    sample_id: str | None = None,
) -> None:
    con.execute(
        "INSERT INTO labels (label_id, extraction_id, sample_id, verdict, reviewer, review_round,"
        " labeled_at, supersedes) VALUES (?, ?, ?, ?, 'ana', ?, ?, ?)",
        [label_id, extraction_id, sample_id, verdict, review_round, at, supersedes],
    )


def add_audit(
    con: duckdb.DuckDBPyConnection, version: int, cells: dict[str, tuple[int, list[str]]]
) -> str:
    """A sample of 2026-W02: per cell its population N_h and its items in PRN order."""
    sample_id = f"2026-W02/v{version}"
    con.execute(
        "INSERT INTO audit_samples VALUES (?, '2026-W02', ?, 1, '{}', 'x', ?, NULL)",
        [sample_id, version, MONDAY_W03],
    )
    for cell, (size, items) in cells.items():
        con.execute(
            "INSERT INTO audit_cells VALUES (?, ?, 'invoice', 'total', '[0.00,1.00]',"
            " 'established', ?, ?, ?)", [sample_id, cell, size, len(items), len(items) / size],
        )
        con.executemany(
            "INSERT INTO audit_items VALUES (?, ?, ?, ?, ?, false)",
            [[sample_id, e, cell, len(items) / size, (i + 1) / 100]
             for i, e in enumerate(items)],
        )
    return sample_id


def declare_random(con: duckdb.DuckDBPyConnection, batch: str) -> None:
    con.execute(
        "INSERT INTO label_import_designs VALUES (?, 'random_sample', 'ana', ?)",
        [batch, MONDAY_W03],
    )


def add_import(
    con: duckdb.DuckDBPyConnection, label_id: str, extraction_id: str, verdict: str,
    batch: str = "random-batch",
) -> None:
    con.execute(
        "INSERT INTO labels (label_id, extraction_id, verdict, reviewer, review_round,"
        " labeled_at, import_batch_id) VALUES (?, ?, ?, 'ana', 'import', ?, ?)",
        [label_id, extraction_id, verdict, MONDAY_W03, batch],
    )


def by_id(con: duckdb.DuckDBPyConnection, scope: Scope = Scope()) -> dict[str, dict[str, object]]:
    rows = labelled_items(con, scope).to_pylist()
    return {row["extraction_id"]: row for row in rows}


def test_a_fully_labelled_cell_weighs_its_design_probability(
    con: duckdb.DuckDBPyConnection,
) -> None:
    add_extractions(con, ["a", "b", "c"])
    add_audit(con, 1, {"one": (8, ["a"]), "two": (10, ["b", "c"])})
    add_label(con, "l1", "a", "correct")
    add_label(con, "l2", "b", "incorrect")
    add_label(con, "l3", "c", "correct")

    rows = by_id(con)

    assert rows["a"]["weight"] == pytest.approx(8.0)
    assert rows["b"]["weight"] == pytest.approx(5.0)
    assert (rows["a"]["correct"], rows["b"]["correct"]) == (1, 0)
    assert rows["a"]["provenance"] == "audit" and rows["a"]["design_based"] is True


def test_a_partly_labelled_cell_uses_its_labelled_prefix(con: duckdb.DuckDBPyConnection) -> None:
    # Items in PRN order a, b, c, d of a cell of 20; a, b and d labelled, c not yet.
    add_extractions(con, ["a", "b", "c", "d"])
    add_audit(con, 1, {"one": (20, ["a", "b", "c", "d"])})
    for item in ("a", "b", "d"):
        add_label(con, f"l-{item}", item, "correct")

    rows = by_id(con)

    # The prefix is a, b: pi = 2 / 20. d waits until c is labelled.
    assert rows["a"]["inclusion_prob"] == pytest.approx(0.1)
    assert rows["b"]["weight"] == pytest.approx(10.0)
    assert rows["d"]["design_based"] is False and rows["d"]["weight"] is None
    assert rows["d"]["provenance"] == "audit"

    add_label(con, "l-c", "c", "unclear")  # an unclear verdict closes the gap
    rows = by_id(con)
    assert "c" not in rows
    assert rows["d"]["design_based"] is True
    assert rows["d"]["inclusion_prob"] == pytest.approx(4 / 20)


def test_newest_sample_version_gives_the_probability(con: duckdb.DuckDBPyConnection) -> None:
    add_extractions(con, ["a", "b"])
    add_audit(con, 1, {"one": (4, ["a"])})
    add_audit(con, 2, {"one": (10, ["a"])})
    add_label(con, "l1", "a", "correct")

    assert by_id(con)["a"]["weight"] == pytest.approx(10.0)


def test_declared_random_imports_weigh_per_stratum_and_week(
    con: duckdb.DuckDBPyConnection,
) -> None:
    add_extractions(con, [f"t{i}" for i in range(10)])  # N = 10 totals in W02
    add_extractions(con, [f"u{i}" for i in range(3)], at=MONDAY_W03)  # N = 3 totals in W03
    add_extractions(con, [f"x{i}" for i in range(4)], field="tax")  # N = 4 taxes in W02
    declare_random(con, "random-batch")
    for i in range(2):  # n = 2 of 10 -> weight 5
        add_import(con, f"lt{i}", f"t{i}", "correct")
    add_import(con, "lu", "u0", "correct")  # 1 of 3 in W03 -> weight 3
    add_import(con, "lx", "x0", "incorrect")  # 1 of 4 -> weight 4

    rows = by_id(con)

    assert rows["t0"]["weight"] == pytest.approx(5.0)
    assert rows["u0"]["weight"] == pytest.approx(3.0)
    assert rows["x0"]["weight"] == pytest.approx(4.0)
    assert rows["x0"]["provenance"] == "random_import"
    assert rows["x0"]["from_audit"] is False and rows["x0"]["design_based"] is True


def test_queue_and_undeclared_labels_are_non_random(con: duckdb.DuckDBPyConnection) -> None:
    add_extractions(con, ["q", "i"])
    add_label(con, "lq", "q", "correct")  # a review-queue label: no sample
    add_import(con, "li", "i", "incorrect", batch="no-declaration")

    rows = by_id(con)

    for item in ("q", "i"):
        assert rows[item]["provenance"] == "non_random"
        assert rows[item]["design_based"] is False
        assert rows[item]["weight"] is None


def test_unclear_verdicts_are_neither_right_nor_wrong(con: duckdb.DuckDBPyConnection) -> None:
    add_extractions(con, ["a", "b"])
    add_label(con, "l1", "a", "unclear")
    add_label(con, "l2", "b", "correct")

    assert set(by_id(con)) == {"b"}


def test_adjudication_beats_review_and_superseded_rows_never_count(
    con: duckdb.DuckDBPyConnection,
) -> None:
    add_extractions(con, ["a", "b"])
    add_label(con, "p", "a", "correct")
    add_label(con, "s", "a", "incorrect", review_round="second")
    add_label(
        con,
        "adj",
        "a",
        "incorrect",
        review_round="adjudication",
        at=MONDAY_W03 - dt.timedelta(days=1),
    )
    add_label(con, "old", "b", "incorrect")
    add_label(con, "fix", "b", "correct", supersedes="old", at=MONDAY_W03 - dt.timedelta(days=2))

    rows = by_id(con)

    assert (rows["a"]["correct"], rows["a"]["label_id"]) == (0, "adj")
    assert (rows["b"]["correct"], rows["b"]["label_id"]) == (1, "fix")


def test_scope_limits_weeks_and_the_random_sample_population(
    con: duckdb.DuckDBPyConnection,
) -> None:
    add_extractions(con, ["w2a", "w2b"])
    add_extractions(con, ["w3a", "w3b", "w3c", "w3d"], at=MONDAY_W03)
    declare_random(con, "random-batch")
    add_import(con, "l1", "w3a", "correct")

    assert set(by_id(con, Scope(weeks=("2026-W02",)))) == set()
    assert by_id(con, Scope(weeks=("2026-W03",)))["w3a"]["weight"] == pytest.approx(4.0)
    assert by_id(con)["w3a"]["weight"] == pytest.approx(4.0)  # its own week, not the store


def test_results_do_not_depend_on_insertion_order(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from fieldtrust import store
    tables = []
    for name, order in (("fwd", range(20)), ("rev", reversed(range(20)))):
        connection = store.connect(tmp_path / f"{name}.duckdb")
        for i in order:
            add_extractions(connection, [f"e{i:02d}"])
            add_label(
                connection,
                f"l{i:02d}",
                f"e{i:02d}",
                "correct" if i % 3 else "incorrect",
                review_round="import",
            )
        tables.append(labelled_items(connection).drop(["label_id"]))
        connection.close()
    assert tables[0].equals(tables[1])


def test_weeks_window_ends_at_the_latest_week(con: duckdb.DuckDBPyConnection) -> None:
    assert latest_week(con) is None
    assert last_weeks(con, 2) == ()
    add_extractions(con, ["a"], at=MONDAY_W03)
    assert latest_week(con) == "2026-W03"
    assert last_weeks(con, 3) == ("2026-W01", "2026-W02", "2026-W03")
    with pytest.raises(ValueError, match="between 1 and 520"):
        last_weeks(con, 0)


def test_scope_refuses_a_malformed_week() -> None:
    with pytest.raises(ValueError, match="not an ISO week like 2026-W48"):
        Scope(weeks=("2026-48",))
