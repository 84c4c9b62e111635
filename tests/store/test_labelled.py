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


def add_audit(con: duckdb.DuckDBPyConnection, version: int, items: dict[str, float]) -> None:
    sample_id = f"2026-W02/v{version}"
    con.execute(
        "INSERT INTO audit_samples VALUES (?, '2026-W02', ?, 1, '{}', 'x', ?, NULL)",
        [sample_id, version, MONDAY_W03],
    )
    con.executemany(
        "INSERT INTO audit_items VALUES (?, ?, 'cell', ?, 0.5, false)",
        [[sample_id, extraction_id, prob] for extraction_id, prob in items.items()],
    )


def by_id(con: duckdb.DuckDBPyConnection, scope: Scope = Scope()) -> dict[str, dict[str, object]]:
    rows = labelled_items(con, scope).to_pylist()
    return {row["extraction_id"]: row for row in rows}


def test_audit_items_weigh_one_over_their_inclusion_probability(
    con: duckdb.DuckDBPyConnection,
) -> None:
    add_extractions(con, ["a", "b"])
    add_audit(con, 1, {"a": 0.25, "b": 0.5})
    add_label(con, "l1", "a", "correct")
    add_label(con, "l2", "b", "incorrect")

    rows = by_id(con)

    assert rows["a"]["weight"] == pytest.approx(4.0)
    assert rows["b"]["weight"] == pytest.approx(2.0)
    assert (rows["a"]["correct"], rows["b"]["correct"]) == (1, 0)
    assert rows["a"]["from_audit"] is True


def test_newest_sample_version_gives_the_probability(con: duckdb.DuckDBPyConnection) -> None:
    add_extractions(con, ["a"])
    add_audit(con, 1, {"a": 0.25})
    add_audit(con, 2, {"a": 0.1})
    add_label(con, "l1", "a", "correct")

    assert by_id(con)["a"]["weight"] == pytest.approx(10.0)


def test_labels_without_design_are_a_simple_random_sample_of_the_stratum(
    con: duckdb.DuckDBPyConnection,
) -> None:
    add_extractions(con, [f"t{i}" for i in range(10)])  # N_h = 10 totals
    add_extractions(con, [f"x{i}" for i in range(4)], field="tax")  # N_h = 4 taxes
    for i in range(2):  # n_h = 2 -> weight 5
        add_label(con, f"lt{i}", f"t{i}", "correct", review_round="import")
    add_label(con, "lx", "x0", "incorrect", review_round="import")  # n_h = 1 -> weight 4

    rows = by_id(con)

    assert rows["t0"]["weight"] == pytest.approx(5.0)
    assert rows["x0"]["weight"] == pytest.approx(4.0)
    assert rows["x0"]["from_audit"] is False


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


def test_scope_limits_weeks_and_the_srs_population(con: duckdb.DuckDBPyConnection) -> None:
    add_extractions(con, ["w2a", "w2b"])
    add_extractions(con, ["w3a", "w3b", "w3c", "w3d"], at=MONDAY_W03)
    add_label(con, "l1", "w3a", "correct", review_round="import")

    assert set(by_id(con, Scope(weeks=("2026-W02",)))) == set()
    assert by_id(con, Scope(weeks=("2026-W03",)))["w3a"]["weight"] == pytest.approx(4.0)
    assert by_id(con)["w3a"]["weight"] == pytest.approx(6.0)


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
