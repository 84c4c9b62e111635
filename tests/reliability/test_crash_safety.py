"""Crash safety: SIGKILL in the middle of an ingest, a sample draw or decision recording.

A killed process must leave a store that opens, holds either all or none of
the interrupted write (never a partial batch or sample), keeps everything the
child had reported as committed, and accepts the same work again. Ingest
kills land at fractions of the time an unkilled ingest of the same
1,000,000-row Parquet file takes on this machine (fixed delays all landed after
the commit on a fast machine), plus one the moment the child starts storing;
sample draws and decisions run in endless loops over a 200,000-row week.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest
from crash import DECIDE_CHILD, DRAW_CHILD, INGEST_CHILD, Killed, run_and_kill, write_big_parquet
from fieldtrust.governance.acts import reject
from fieldtrust.governance.decisions import current_policy
from fieldtrust.ingest.extractions import ingest_files
from fieldtrust.sampling.design import Design
from fieldtrust.sampling.draw import draw_sample
from fieldtrust.store.access import bootstrap_admin, grant_role
from fieldtrust.store.verify import verify_history
from rel_store import ADMIN, QA_LEAD, record_figure

from fieldtrust import store
from tests.conftest import copy_store

pytestmark = pytest.mark.slow

ROWS = 1_000_000
#: Kill times as fractions of an unkilled ingest, from reading the file to its commit.
#: That ingest is the file's first read, so the ingests after it can take half its time
#: on a busy machine: no fraction above one half, or a kill comes after the commit.
INGEST_KILL_FRACTIONS = (0.05, 0.15, 0.25, 0.35, 0.45)
#: Tries of one kill, each at half the delay of the last, before it counts as too late.
KILL_ATTEMPTS = 3
DRAW_KILLS = (0.3, 1.5, 3.0)
DRAW_ROWS = 200_000
DECIDE_KILLS = (0.1, 0.6, 1.5)


@pytest.fixture(scope="module")
def big_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_big_parquet(tmp_path_factory.mktemp("crash") / "week 48.parquet", ROWS)


@pytest.fixture(scope="module")
def empty_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("crash-empty") / "empty.duckdb"
    store.connect(path).close()
    return path


def _count(con: duckdb.DuckDBPyConnection, sql: str, params: list[Any] | None = None) -> int:
    return int(con.execute(sql, params or []).fetchall()[0][0])


def _check_ingest_all_or_nothing(path: Path, rows: int) -> int:
    """The store opens and holds none or all of the file, with a consistent batch row."""
    con = store.connect(path)  # opening also replays or discards the WAL
    try:
        stored = _count(con, "SELECT count(*) FROM extractions")
        assert stored in (0, rows), f"partial batch: {stored:,} of {rows:,} rows"
        batches = con.execute("SELECT rows_in_file, rows_added FROM ingest_batches").fetchall()
        versions = _count(con, "SELECT count(*) FROM form_versions")
        if stored == 0:
            assert (batches, versions) == ([], 0)
        else:
            assert batches == [(rows, rows)]
            assert versions == 6  # 3 doc types x 2 form versions
            assert _count(con, "SELECT count(DISTINCT extraction_id) FROM extractions") == rows
        return stored
    finally:
        con.close()


def _unkilled_ingest_seconds(big_file: Path, empty_store: Path, tmp_path: Path) -> float:
    """Seconds from 'reading' to the end of a child that ingests the whole file."""
    path = copy_store(empty_store, tmp_path / "unkilled.duckdb")
    run = run_and_kill(INGEST_CHILD, str(path), str(big_file), marker="reading", delay=600.0)
    assert not run.killed and run.lines[-1] == f"committed {ROWS}", run.lines
    assert _check_ingest_all_or_nothing(path, ROWS) == ROWS
    return run.seconds


def test_a_killed_ingest_leaves_all_or_nothing_and_the_file_goes_in_after(
    big_file: Path, empty_store: Path, tmp_path: Path
) -> None:
    full = _unkilled_ingest_seconds(big_file, empty_store, tmp_path)
    kills = [("reading", fraction * full) for fraction in INGEST_KILL_FRACTIONS]
    kills.append(("storing", 0.0))  # the write itself, however fast this machine is
    outcomes = []
    for index, (marker, delay) in enumerate(kills):
        # A shared machine's speed changes between runs: a kill that came after the commit
        # (the ingest went in whole, as it must) is tried again at half the delay.
        for attempt in range(KILL_ATTEMPTS):
            path = copy_store(empty_store, tmp_path / f"kill{index}-{attempt}.duckdb")
            run = run_and_kill(INGEST_CHILD, str(path), str(big_file), marker=marker,
                               delay=delay)
            stored = _check_ingest_all_or_nothing(path, ROWS)
            if "committed" in " ".join(run.lines):
                assert stored == ROWS  # reported committed: it must all be there
            outcomes.append({"after": marker, "delay": round(delay, 3), "killed": run.killed,
                             "stage": run.lines[-1], "rows_after": stored})
            if run.killed:
                break
            delay /= 2
    killed = [o for o in outcomes if o["killed"]]
    assert len(killed) >= len(kills) - 1, (full, outcomes)
    assert any(o["stage"].startswith("storing") for o in killed), outcomes  # one in the write

    # The store killed while storing (the loop's last) takes the same file again.
    last = path
    con = store.connect(last)
    try:
        result = ingest_files(con, [big_file])[0]
        assert result.rows_added + result.rows_already_stored == ROWS
    finally:
        con.close()
    assert _check_ingest_all_or_nothing(last, ROWS) == ROWS
    record_figure("ingest_kills", {"unkilled_seconds": round(full, 3), "kills": outcomes})


@pytest.fixture(scope="module")
def week_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store holding 200,000 extractions of one week: the population samples are drawn from.

    Its qa_lead (``quinn``, as in the draw child) may draw.
    """
    folder = tmp_path_factory.mktemp("crash-week")
    path = folder / "week.duckdb"
    con = store.connect(path)
    try:
        ingest_files(con, [write_big_parquet(folder / "week.parquet", DRAW_ROWS, seed=2)])
        bootstrap_admin(con, ADMIN)
        grant_role(con, ADMIN, QA_LEAD, "qa_lead")
    finally:
        con.close()
    return path


def _check_samples_whole(path: Path, printed: list[str]) -> int:
    """Every sample has all its cells and items; every sample reported drawn is there."""
    con = store.connect(path)
    try:
        samples = {s for (s,) in con.execute("SELECT sample_id FROM audit_samples").fetchall()}
        reported = {line.split()[1] for line in printed if line.startswith("drew")}
        assert reported <= samples
        broken = con.execute(
            """
            SELECT s.sample_id,
                   (SELECT sum(n_sample) FROM audit_cells c WHERE c.sample_id = s.sample_id),
                   (SELECT count(*) FROM audit_items i WHERE i.sample_id = s.sample_id)
            FROM audit_samples s
            """
        ).fetchall()
        for sample_id, planned, drawn in broken:
            assert planned is not None and planned == drawn, (sample_id, planned, drawn)
        orphans = _count(con, "SELECT count(*) FROM audit_items WHERE sample_id NOT IN"
                              " (SELECT sample_id FROM audit_samples)")
        assert orphans == 0
        return len(samples)
    finally:
        con.close()


def test_a_killed_sample_draw_leaves_whole_samples_and_draws_again(
    week_store: Path, tmp_path: Path
) -> None:
    path = copy_store(week_store, tmp_path / "draws.duckdb")
    outcomes = []
    for delay in DRAW_KILLS:
        run = run_and_kill(DRAW_CHILD, str(path), marker="ready", delay=delay)
        samples = _check_samples_whole(path, run.lines)
        outcomes.append({"delay": delay, "killed": run.killed,
                         "drawn_before_kill": sum(line.startswith("drew") for line in run.lines),
                         "samples_in_store": samples})
    assert all(o["killed"] for o in outcomes), outcomes
    assert outcomes[-1]["samples_in_store"] > 0  # some draws committed between the kills
    con = store.connect(path)
    try:
        again = draw_sample(con, "2026-W48", Design(base_rate=0.02), seed=5000, actor=QA_LEAD,
                            redraw=True)
        assert again.created and again.n_sample > 0
    finally:
        con.close()
    _check_samples_whole(path, [])
    record_figure("draw_kills", outcomes)


def _check_governance(path: Path, printed: list[str]) -> dict[str, int]:
    """Everything reported committed is stored; decisions point at stored evidence; the
    history chain is intact (a killed write leaves neither its rows nor their chain entries).
    """
    con = store.connect(path)
    try:
        decisions = {d for (d,) in con.execute("SELECT decision_id FROM decisions").fetchall()}
        labels = {x for (x,) in con.execute("SELECT label_id FROM labels").fetchall()}
        for line in printed:
            kind, ident, *_ = [*line.split(), ""]
            if not ident:
                continue  # a line cut short by the kill names nothing
            if kind == "decision":
                assert ident in decisions, f"committed decision {ident} lost"
            elif kind == "label":
                assert ident in labels, f"committed label {ident} lost"
        dangling = _count(con, "SELECT count(*) FROM decisions WHERE evidence_id IS NOT NULL"
                               " AND evidence_id NOT IN (SELECT evidence_id FROM"
                               " evidence_snapshots)")
        broken_chain = _count(con, "SELECT count(*) FROM labels WHERE supersedes IS NOT NULL"
                                   " AND supersedes NOT IN (SELECT label_id FROM labels)")
        assert (dangling, broken_chain) == (0, 0)
        check = verify_history(con)
        assert check.intact, check.summary()
        current_policy(con)  # still readable
        return {"decisions": len(decisions), "labels": len(labels)}
    finally:
        con.close()


def test_killed_decision_and_label_recording_loses_nothing_committed(
    populated: Path, sample_id: str
) -> None:
    outcomes = []
    for delay in DECIDE_KILLS:
        run: Killed = run_and_kill(DECIDE_CHILD, str(populated), sample_id, marker="ready",
                                   delay=delay)
        counts = _check_governance(populated, run.lines)
        outcomes.append({"delay": delay, "killed": run.killed,
                         "committed_before_kill": len(run.lines) - 1, **counts})
    assert all(o["killed"] for o in outcomes), outcomes
    assert outcomes[-1]["decisions"] > outcomes[0]["decisions"]
    con = store.connect(populated)
    try:
        decision = reject(con, "maya", "receipt", "date", "after the kills")
        assert decision.decided_by == "maya"
    finally:
        con.close()
    record_figure("decide_kills", outcomes)
