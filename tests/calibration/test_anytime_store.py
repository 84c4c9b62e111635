"""The anytime certificate on real stores: closed weeks, cells at drawing, unclear, open weeks.

Each store is a real DuckDB file: extractions inserted, samples drawn by
:func:`fieldtrust.sampling.draw.draw_sample`, labels from the stored truth in
review (PRN) order. Figures are checked against SQL counts written here, not
against the module's own arrays.
"""

from __future__ import annotations

import collections
import dataclasses
import math
import threading
from pathlib import Path

import duckdb
import numpy as np
import pytest
from fieldtrust.calibration.anytime import NO_SEEDS, anytime_certificate
from fieldtrust.calibration.betting import CellLabels, stratified_evalue
from fieldtrust.calibration.candidates import across_strata, automation_candidates
from fieldtrust.calibration.closed import closed_cells, store_facts
from fieldtrust.calibration.design import grid_index
from fieldtrust.calibration.population import load_strata
from fieldtrust.calibration.seeds import SeedJudgements
from fieldtrust.store.bar import Bar, policy_bar
from fieldtrust.store.weeks import Week

from fieldtrust.errors import InputError
from tests.calibration.anytime_store import BAR, WEEKS, build_audited
from tests.sampling.conftest import World


@pytest.fixture
def audited(tmp_path: Path) -> duckdb.DuckDBPyConnection:
    con = build_audited(tmp_path / "audited.duckdb")
    yield con
    con.close()


def _closed(con: duckdb.DuckDBPyConnection, bar: Bar = BAR):
    (data,) = load_strata(con)
    return closed_cells(data, store_facts(con, [data]))


def test_cells_hold_their_population_at_drawing_and_their_prefix_in_prn_order(audited) -> None:
    con = audited
    closed = _closed(con)
    assert closed.weeks == WEEKS and closed.open_weeks == () and closed.dropped == ()
    k = int(grid_index(0.93))
    (candidate,) = closed.threshold_cells([k], prior_error=0.03, target=0.95)
    for cell, labels in zip(closed.cells, candidate.cells, strict=True):
        lo, hi = (round(float(x) * 200) for x in cell.band.strip("[]()").split(","))
        hi += 1 if cell.band.endswith("]") else 0
        start, end = Week(cell.week).bounds()
        # N_h(t): the cell's extractions at or above t, counted in SQL.
        n_above = con.execute(
            "SELECT count(*) FROM (SELECT floor(confidence * 200 + 1e-9) AS g FROM extractions"
            " WHERE extracted_at >= ? AND extracted_at < ?) WHERE g >= ? AND g >= ? AND g < ?",
            [start, end, lo, k, hi]).fetchone()[0]
        assert labels.n_population == n_above
        # Its labels above t in PRN order, the verdicts as stored.
        verdicts = [row[0] for row in con.execute(
            "SELECT l.verdict FROM audit_items i JOIN labels l USING (extraction_id)"
            " JOIN extractions e USING (extraction_id)"
            " WHERE i.sample_id = ? AND i.cell = ? AND floor(e.confidence * 200 + 1e-9) >= ?"
            " ORDER BY i.prn, i.extraction_id", [cell.sample_id, cell.cell, k]).fetchall()]
        assert labels.errors.tolist() == [0.0 if v == "correct" else 1.0 for v in verdicts]
    # The stratified evidence on cells rebuilt by hand is the walk's.
    rebuilt = [CellLabels(c.n_population, c.errors, c.bets) for c in candidate.cells]
    assert stratified_evalue(rebuilt, max_error=0.05, unaccounted=candidate.unaccounted
                             ).log_evalue == pytest.approx(candidate.evidence(0.05).log_evalue)


def test_a_well_labelled_stratum_certifies_with_its_allowances_stated(audited) -> None:
    result = anytime_certificate(_closed(audited), BAR, delta=0.05)
    certified = result.thresholds.certified
    assert certified is not None and certified.threshold <= 0.9
    assert certified.accuracy_low < certified.accuracy <= 1.0
    assert result.steps[-1].log_evalue >= math.log(20) or result.thresholds.first_failure
    assert 0 < result.between_week.allowance < 0.05
    assert result.misses == NO_SEEDS
    assert result.enough_evidence and not result.unstable
    assert [w.week for w in result.weeks_checked] == list(reversed(WEEKS))


def test_unclear_counts_as_an_error(tmp_path: Path) -> None:
    con = build_audited(tmp_path / "unclear.duckdb")
    before = anytime_certificate(_closed(con), BAR, delta=0.05)
    # A reviewer cannot read 15 high-confidence sources: each is a new label naming the
    # old one it supersedes (labels are append-only).
    rows = con.execute(
        "SELECT l.label_id, l.extraction_id, l.sample_id FROM labels l"
        " JOIN extractions e USING (extraction_id) WHERE e.confidence >= 0.95"
        " AND l.verdict = 'correct' ORDER BY l.label_id LIMIT 15").fetchall()
    for label_id, extraction_id, sample_id in rows:
        con.execute(
            "INSERT INTO labels (label_id, extraction_id, sample_id, verdict, reviewer,"
            " review_round, labeled_at, supersedes) VALUES (?, ?, ?, 'unclear', 'tester',"
            " 'primary', TIMESTAMP '2027-01-02', ?)", [f"U-{label_id}", extraction_id,
                                                      sample_id, label_id])
    closed = _closed(con)
    assert closed.n_unclear == 15
    assert int(closed.label_error.sum()) == int(_closed_errors(before)) + 15
    after = anytime_certificate(closed, BAR, delta=0.05)
    k = int(grid_index(0.95))
    (was,) = before.closed.threshold_cells([k], prior_error=0.03, target=0.95)
    (now,) = closed.threshold_cells([k], prior_error=0.03, target=0.95)
    assert now.evidence(0.05).log_evalue < was.evidence(0.05).log_evalue
    assert (after.thresholds.certified is None
            or after.thresholds.certified.accuracy < before.thresholds.certified.accuracy)


def _closed_errors(result) -> float:
    return float(result.closed.label_error.sum())


def test_the_open_week_is_shown_and_changes_nothing(audited) -> None:
    con = audited
    before = anytime_certificate(_closed(con), BAR, delta=0.05)
    world = World()
    world.insert(con, world.frame("2026-W48", 180, seed=9, doc_types=("invoice",),
                                  fields=("total",), prefix="open-"))
    closed = _closed(con)
    assert closed.open_weeks == ("2026-W48",) and closed.weeks == WEEKS
    after = anytime_certificate(closed, BAR, delta=0.05)
    assert after.thresholds.certified == before.thresholds.certified is not None
    assert after.steps == before.steps
    (assessment,) = automation_candidates(con, bar=BAR)
    assert assessment.candidate, assessment.reason_text
    assert assessment.evidence["open_weeks"] == ["2026-W48"]
    assert "open: not audited" in assessment.evidence["open_weeks_text"]


def test_rows_that_arrive_after_the_draw_count_as_errors(audited) -> None:
    con = audited
    before = _closed(con)
    world = World()
    late = world.frame(WEEKS[1], 60, seed=5, doc_types=("invoice",), fields=("total",),
                       prefix="late-")
    world.insert(con, late)
    after = _closed(con)
    assert after.dropped and all(name.startswith(WEEKS[1]) for name in after.dropped)
    k = int(grid_index(0.9))
    (was,) = before.threshold_cells([k], prior_error=0.03, target=0.95)
    (now,) = after.threshold_cells([k], prior_error=0.03, target=0.95)
    # The late rows and the cells they fell into are unaccounted: counted as errors.
    assert now.unaccounted >= int((late["confidence"] >= 0.9).sum())
    assert now.n_population == was.n_population + int((late["confidence"] >= 0.9).sum())
    assert now.evidence(0.05).log_evalue < was.evidence(0.05).log_evalue


def test_stability_needs_the_closed_weeks_the_bar_asks_for(audited) -> None:
    (assessment,) = automation_candidates(audited, bar=dataclasses.replace(BAR,
                                                                           stability_weeks=4))
    assert assessment.threshold is not None and not assessment.candidate
    assert assessment.reason == "no_week_evidence"
    assert "1 more closed week(s)" in assessment.reason_text


def test_labels_needed_names_cells_and_stays_within_the_unlabelled_items(tmp_path: Path) -> None:
    con = build_audited(tmp_path / "partial.duckdb", share=0.15)
    closed = _closed(con)
    result = anytime_certificate(closed, BAR, delta=0.05)
    assert result.thresholds.certified is None
    needed = result.thresholds.labels_needed
    assert needed is not None and needed > 0
    at = result.thresholds.labels_needed_threshold
    (candidate,) = closed.threshold_cells([int(grid_index(at))], prior_error=0.03, target=0.95)
    assert needed <= candidate.n_unlabelled
    named = result.labels_needed_cells
    assert sum(c.labels for c in named) == needed
    assert {c.week for c in named} <= set(WEEKS)
    by_cell = {(c.week, c.cell): c for c in closed.cells}
    for item, cell in zip(closed.cells, candidate.cells, strict=True):
        wanted = next((n.labels for n in named if (n.week, n.cell) == (item.week, item.cell)), 0)
        assert wanted <= cell.n_population - cell.n_labels
    assert set(by_cell) >= {(c.week, c.cell) for c in named}


def test_familywise_certifies_each_stratum_at_its_share_of_delta(tmp_path: Path) -> None:
    con = build_audited(tmp_path / "two.duckdb", fields=("total", "date"))
    family = dataclasses.replace(BAR, familywise=1)
    assessments = automation_candidates(con, bar=family)
    assert [a.evidence["delta"] for a in assessments] == [pytest.approx(0.025)] * 2
    promise = across_strata(assessments, family)
    assert promise["delta_per_stratum"] == pytest.approx(0.025)
    certified = sum(a.threshold is not None for a in assessments)
    assert promise["expected_wrong_certificates"] == pytest.approx(0.025 * certified)
    assert "the chance of any wrong one is at most 5%" in promise["text"]
    plain = across_strata(automation_candidates(con, bar=BAR), BAR)
    assert plain["delta_per_stratum"] == pytest.approx(0.05)


def test_seeds_are_an_input_and_too_few_refuse(audited) -> None:
    seeded = dataclasses.replace(BAR, seed_rate=0.02)
    closed = _closed(audited)
    refused = anytime_certificate(closed, seeded, delta=0.05)
    assert refused.thresholds.certified is None
    assert "seeds judged" in (refused.labels_needed_reason or "")
    judged = anytime_certificate(closed, seeded, delta=0.05, seeds=SeedJudgements(400, 4))
    assert "4 of 400 seeds" in judged.misses
    plain = anytime_certificate(closed, BAR, delta=0.05)
    # Allowing for misses can only make the certificate harder to reach.
    if judged.thresholds.certified is not None:
        assert judged.thresholds.certified.threshold >= plain.thresholds.certified.threshold
    with pytest.raises(InputError, match="missed=5"):
        SeedJudgements(3, 5)


def test_anytime_is_the_default_and_fixed_ignores_the_open_week_rule(audited) -> None:
    assert Bar().certificate == "anytime"
    assert policy_bar(audited).bar.certificate == "anytime"  # no admin has set the policy
    (default,) = automation_candidates(audited)
    assert default.evidence["certificate"] == "anytime" and "open_weeks" in default.evidence
    (assessment,) = automation_candidates(audited, bar=dataclasses.replace(BAR,
                                                                           certificate="fixed"))
    assert assessment.evidence["certificate"] == "fixed"
    assert "open_weeks" not in assessment.evidence and "labels_needed_cells" not in (
        assessment.to_dict())
    assert np.isfinite(assessment.evidence["n_population"])


def test_a_policy_set_before_the_setting_existed_keeps_the_one_look_certificate(
    audited,
) -> None:
    # A row written before the certificate columns existed: they are NULL in it. Its
    # admin signed it when the one-look certificate certified; it still does.
    audited.execute(
        "INSERT INTO policy_settings (setting_id, target, confidence, n_min, stability_weeks,"
        " version_share, min_week_labels, prior_error, weeks, set_by, set_at)"
        " VALUES ('old', 0.95, 0.95, 100, 3, 0.05, 50, 0.03, 8, 'root', now()::TIMESTAMP)"
    )
    old = policy_bar(audited).bar
    assert (old.certificate, old.familywise, old.seed_rate) == ("fixed", 0, 0.0)
    (assessment,) = automation_candidates(audited)
    assert assessment.evidence["certificate"] == "fixed"


def test_a_certificate_is_kept_by_its_inputs_content_and_recomputed_when_a_verdict_changes(
    audited,
) -> None:
    first = anytime_certificate(_closed(audited), BAR, delta=0.05)
    # Read again from the store: new arrays, the same content, the same result.
    assert anytime_certificate(_closed(audited), BAR, delta=0.05) is first
    closed = _closed(audited)
    every_verdict_flipped = dataclasses.replace(closed, label_error=1.0 - closed.label_error)
    flipped = anytime_certificate(every_verdict_flipped, BAR, delta=0.05)
    assert flipped is not first and flipped.steps != first.steps
    assert flipped.thresholds.certified is None and first.thresholds.certified is not None
    stricter = anytime_certificate(closed, dataclasses.replace(BAR, target=0.99), delta=0.05)
    assert stricter is not first
    assert anytime_certificate(closed, BAR, delta=0.01) is not first


def test_a_certificate_asked_for_while_another_thread_computes_it_is_computed_once(
    audited, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The server computes the first report's certificates at its start; a page opened
    # meanwhile asks for the same ones, and waits for them rather than compute them again.
    from fieldtrust.calibration import anytime

    monkeypatch.setattr(anytime, "_KEPT", collections.OrderedDict())
    first_started, release = threading.Event(), threading.Event()
    computed = []
    real = anytime._certify

    def slow_certify(*args, **kwargs):
        computed.append(threading.current_thread().name)
        first_started.set()
        release.wait(10)
        return real(*args, **kwargs)

    monkeypatch.setattr(anytime, "_certify", slow_certify)
    closed = _closed(audited)
    results = {}

    def ask(name: str) -> None:
        results[name] = anytime_certificate(closed, BAR, delta=0.05)

    server = threading.Thread(target=ask, args=("server",), name="server")
    server.start()
    assert first_started.wait(10)
    page = threading.Thread(target=ask, args=("page",), name="page")
    page.start()
    page.join(0.3)
    assert page.is_alive()  # waiting for the server's result, not computing its own
    release.set()
    server.join(10)
    page.join(10)
    assert computed == ["server"] and results["page"] is results["server"]


def test_a_certificate_whose_computation_failed_is_computed_by_the_one_who_waited(
    audited, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fieldtrust.calibration import anytime

    monkeypatch.setattr(anytime, "_KEPT", collections.OrderedDict())
    started, release = threading.Event(), threading.Event()
    real = anytime._certify

    def fail_on_the_server(*args, **kwargs):
        if threading.current_thread().name == "server":
            started.set()
            release.wait(10)
            raise RuntimeError("the server's computation broke")
        return real(*args, **kwargs)

    monkeypatch.setattr(anytime, "_certify", fail_on_the_server)
    closed = _closed(audited)
    errors, results = [], []

    def server_asks() -> None:
        try:
            anytime_certificate(closed, BAR, delta=0.05)
        except RuntimeError as error:
            errors.append(error)

    server = threading.Thread(target=server_asks, name="server")
    server.start()
    assert started.wait(10)
    page = threading.Thread(target=lambda: results.append(
        anytime_certificate(closed, BAR, delta=0.05)), name="page")
    page.start()
    release.set()
    server.join(10)
    page.join(30)
    assert errors and len(results) == 1
    assert results[0].thresholds.certified is not None  # the page's own, complete result
    assert anytime._UNDERWAY == {}


def _decided(assessments: list) -> list[tuple]:  # type: ignore[type-arg]
    return sorted((a.doc_type, a.field, a.candidate, a.reason, a.threshold, a.labels_needed,
                   a.evidence.get("accuracy_low")) for a in assessments)


@pytest.mark.parametrize("window", [WEEKS, WEEKS[1:]], ids=["every-week", "a-week-left-out"])
def test_a_report_reads_the_strata_once_when_its_window_holds_the_horizons_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, window: tuple[str, ...]
) -> None:
    from fieldtrust.calibration import candidates
    from fieldtrust.calibration.report import calibration_report
    from fieldtrust.store.rollup import refresh
    from fieldtrust.store.scope import Scope

    con = build_audited(tmp_path / "young.duckdb", share=0.6, fields=("total", "tax"))
    refresh(con)  # the rows went in with SQL; an ingest keeps the rollup current itself
    reads: list[object] = []
    real = candidates.load_strata
    monkeypatch.setattr(candidates, "load_strata",
                        lambda *args, **kwargs: reads.append(args[1]) or real(*args, **kwargs))
    report = calibration_report(con, Scope(weeks=window), BAR)
    # The certificate's horizon is 52 weeks, and this store has 3: when the window holds
    # them all, the report's own read serves the certificate too; otherwise it reads again.
    assert len(reads) == (0 if window == WEEKS else 1)
    fresh = automation_candidates(con, Scope(weeks=window), BAR)
    assert len(reads) == (1 if window == WEEKS else 2)
    assert _decided([s.assessment for s in report.strata]) == _decided(fresh)
    assert any(a.candidate for a in fresh)
    con.close()
