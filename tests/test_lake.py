"""Done when: a store pointed at a lake refreshes, draws, labels, calibrates and approves
without ingesting a row, with the same sample ids and figures from DuckDB (Parquet and
Delta) and Spark as from the same rows ingested into the store.

Spark runs for real (a local session shared by the run, :func:`spark_master`); the
tests naming it are the only Spark tests, kept to one small lake.
"""

from __future__ import annotations

import hashlib
import math
import time
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from fieldtrust.calibration.candidates import automation_candidates
from fieldtrust.governance.acts import approve
from fieldtrust.governance.bar_admin import set_policy_settings
from fieldtrust.ingest.extractions import ingest_table
from fieldtrust.ingest.sources import SourceConfig, open_source, refresh_source
from fieldtrust.labels.verdicts import record_verdict
from fieldtrust.sampling.draw import draw_sample
from fieldtrust.sampling.queue import priority_queue
from fieldtrust.sampling.samples import sample_items
from fieldtrust.store import rollup

from tests.ingest.lake import fresh_store, lake_rows, write_delta_lake, write_parquet_lake

WEEKS = ("2026-W02", "2026-W03", "2026-W04", "2026-W05")
SEED = 20261130
N_MIN = 30
#: A small lake: a few dozen labels above the threshold each week are its evidence.
WEEK_LABELS = 20
TARGET = 0.9
QUEUE = 25


def truth(extraction_id: str, confidence: float) -> bool:
    """Whether a reviewer finds the extraction right: wrong half the time below 0.75."""
    digest = hashlib.md5(extraction_id.encode(), usedforsecurity=False).digest()
    return confidence >= 0.75 or digest[0] % 2 == 0


def _nan_as_none(value: Any) -> Any:
    """``value`` with every NaN as None, as the frozen evidence stores it: NaN is never
    equal to itself, so two equal figures holding one would compare unequal."""
    if isinstance(value, dict):
        return {k: _nan_as_none(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_nan_as_none(v) for v in value]
    return None if isinstance(value, float) and math.isnan(value) else value


def audit(con: duckdb.DuckDBPyConnection, draw: Any, queue: Any) -> dict[str, Any]:
    """Draw every week, label every item, assess the strata, approve the first candidate,
    then ask for the review queue."""
    sampled = {}
    for week in WEEKS:
        result = draw(con, week)
        items = sample_items(con, result.sample_id).to_pylist()
        sampled[week] = sorted(item["extraction_id"] for item in items)
        for item in items:
            right = truth(item["extraction_id"], item["confidence"])
            record_verdict(
                con, actor="alice", extraction_id=item["extraction_id"],
                verdict="correct" if right else "incorrect",
                corrected_value=None if right else "0.00",
                error_type=None if right else "misread_characters",
            )
    # The small lake's bar, set by the admin: candidates and approvals are held to it.
    set_policy_settings(con, "root", n_min=N_MIN, target=TARGET, min_week_labels=WEEK_LABELS)
    assessed = automation_candidates(con)
    figures = {(a.doc_type, a.field): (a.candidate, a.reason, a.threshold,
                                       _nan_as_none(a.evidence)) for a in assessed}
    chosen = next(a for a in assessed if a.candidate)
    decision = approve(con, "mona", chosen.doc_type, chosen.field, "lake audit")
    return {"sampled": sampled, "figures": figures, "approved": (
        decision.doc_type, decision.field, decision.action, decision.threshold),
        "queue": queue(con)}


# One worker runs this module: its module fixtures are built once, not once a worker.
# The group is the run's Spark group: the other tests that start Spark join it, so
# one JVM serves them all (conftest.spark_master).
pytestmark = pytest.mark.xdist_group("spark")


@pytest.fixture(scope="module")
def rows() -> pa.Table:
    return lake_rows(6000, weeks=4, seed=3, doc_types=("invoice",), versions=1)


@pytest.fixture(scope="module")
def lake(rows: pa.Table, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("lake")
    return {"parquet": write_parquet_lake(rows, folder / "parquet"),
            "delta": write_delta_lake(rows, folder / "delta")}


@pytest.fixture(scope="module")
def ingested(rows: pa.Table, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The reference: the same rows ingested into the embedded store, then audited."""
    con = fresh_store(tmp_path_factory.mktemp("ingested") / "a.duckdb")
    ingest_table(con, rows, source="rows")
    done = audit(con, lambda c, week: draw_sample(c, week, seed=SEED, actor="quinn"),
                 lambda c: priority_queue(c, limit=QUEUE).to_pylist())
    con.close()
    return done


def audit_from_lake(config: SourceConfig, path: Path) -> tuple[dict[str, Any], Any]:
    con = fresh_store(path)
    source = open_source(config)
    refreshed = refresh_source(con, source)
    assert refreshed.rows_counted == 6000
    done = audit(con, lambda c, week: draw_sample(c, week, seed=SEED, actor="quinn",
                                                   source=source),
                 lambda c: priority_queue(c, limit=QUEUE, source=source).to_pylist())
    stored = con.execute(
        "SELECT count(*), count(*) FILTER (WHERE batch_id LIKE 'source-%') FROM extractions"
    ).fetchall()[0]
    assert stored[0] == stored[1] == sum(len(ids) for ids in done["sampled"].values())
    assert rollup.is_current(con)
    source.close()
    con.close()
    return done, refreshed


@pytest.mark.parametrize("kind", ["parquet", "delta"])
def test_a_lake_read_by_duckdb_audits_as_the_ingested_rows_do(
    kind: str, lake: dict[str, Path], ingested: dict[str, Any], tmp_path: Path
) -> None:
    done, _ = audit_from_lake(SourceConfig(kind, str(lake[kind])), tmp_path / "b.duckdb")
    assert done["sampled"] == ingested["sampled"]
    assert sum(len(ids) for ids in done["sampled"].values()) > 4 * N_MIN
    assert done["figures"] == ingested["figures"]
    assert done["approved"] == ingested["approved"]
    assert done["approved"][2] == "approve"
    assert done["queue"] == ingested["queue"]
    assert len(done["queue"]) == QUEUE


def test_a_lake_read_by_spark_audits_as_the_ingested_rows_do(
    spark_master: str, lake: dict[str, Path], ingested: dict[str, Any], tmp_path: Path
) -> None:
    started = time.monotonic()
    config = SourceConfig("spark", str(lake["parquet"]), spark=spark_master)
    done, refreshed = audit_from_lake(config, tmp_path / "s.duckdb")
    assert refreshed.files_read == 4
    assert done["sampled"] == ingested["sampled"]
    assert done["figures"] == ingested["figures"]
    assert done["approved"] == ingested["approved"]
    assert done["queue"] == ingested["queue"]
    assert time.monotonic() - started < 120


def test_spark_finds_the_bad_rows_duckdb_finds(spark_master: str, rows: pa.Table,
                                               tmp_path: Path) -> None:
    from fieldtrust.errors import ValidationError

    bad = rows.slice(0, 40).to_pylist()
    bad[5]["confidence"] = float("nan")
    bad[9]["confidence"] = -0.5
    bad[12]["extraction_id"] += "\u200b"  # not what a row is counted by: the draw's to check
    week = bad[12]["extracted_at"].strftime("%G-W%V")
    folder = write_parquet_lake(pa.Table.from_pylist(bad, schema=rows.schema), tmp_path / "l")
    messages, drawn = {}, {}
    for kind in ("parquet", "spark"):
        con = fresh_store(tmp_path / f"{kind}.duckdb")
        source = open_source(SourceConfig(kind, str(folder), spark=spark_master))
        with pytest.raises(ValidationError) as caught:
            refresh_source(con, source)
        messages[kind] = (caught.value.problems, caught.value.total)
        assert con.execute("SELECT count(*) FROM source_refreshes").fetchall() == [(0,)]
        assert refresh_source(con, source, skip_invalid=True).rows_skipped == 2
        with pytest.raises(ValidationError) as caught:
            draw_sample(con, week, seed=SEED, actor="quinn", source=source)
        drawn[kind] = (caught.value.problems, caught.value.total)
    assert messages["spark"] == messages["parquet"]
    assert messages["parquet"][1] == 2
    assert sorted(p.split(": ", 1)[1] for p in messages["parquet"][0]) == [
        "-0.5 is outside [0, 1]", "nan is not a number in [0, 1]"]
    assert drawn["spark"] == drawn["parquet"]
    assert drawn["parquet"][1] == 1
    assert drawn["parquet"][0][0].endswith(
        "column extraction_id: 'x000012<U+200B>' holds the invisible character U+200B (a"
        " control, zero-width or direction character); keys must be plain text")
