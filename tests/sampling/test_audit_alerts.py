from __future__ import annotations

import duckdb
import numpy as np
import pytest
from fieldtrust.sampling.alerts import (
    LOOKBACK,
    alert_weeks,
    below_target_p_value,
    below_target_p_values,
    count_tests,
    lower_rate_p_value,
    lower_rate_p_values,
    weekly_alerts,
)
from fieldtrust.sampling.audit_report import audit_report
from fieldtrust.sampling.design import Design
from fieldtrust.sampling.draw import draw_sample
from fieldtrust.sampling.estimates import audit_labels, weekly_estimates
from fieldtrust.sampling.stratified import clopper_pearson
from fieldtrust.store import rollup
from fieldtrust.store.scope import Scope
from scipy import stats

WEEKS = ("2026-W44", "2026-W45", "2026-W46", "2026-W47", "2026-W48")
DESIGN = Design(base_rate=0.06, minimum=10)


def build(
    con: duckdb.DuckDBPyConnection,
    world,
    *,
    last_week_accuracy: float | None = None,
    new_share: float = 0.0,
    accuracy: float = 0.985,
) -> None:
    """Five audited weeks; optionally invoice/total falls to ``last_week_accuracy`` in the last."""
    for seed, week in enumerate(WEEKS):
        frame = world.frame(
            week,
            4000,
            seed=seed,
            accuracy_old=accuracy,
            accuracy_new=0.7,
            new_share=new_share if week == WEEKS[-1] else 0.0,
        )
        if last_week_accuracy is not None and week == WEEKS[-1]:
            hit = (frame["doc_type"] == "invoice") & (frame["field"] == "total")
            rng = np.random.default_rng(99)
            frame.loc[hit, "correct"] = rng.random(hit.sum()) < last_week_accuracy
        world.insert(con, frame)
        world.label(con, draw_sample(con, week, DESIGN, seed=3, actor=world.qa_lead).sample_id)


def test_stable_series_stays_quiet(con: duckdb.DuckDBPyConnection, world) -> None:
    build(con, world)
    assert weekly_alerts(con, target=0.95) == []


def test_injected_drop_fires(con: duckdb.DuckDBPyConnection, world) -> None:
    build(con, world, last_week_accuracy=0.75)
    alerts = weekly_alerts(con, target=0.95)
    kinds = {(a.kind, a.doc_type, a.field) for a in alerts}
    # 75% in one week is enough for the two weeks pooled to fall below the baseline too.
    assert kinds == {("below_target", "invoice", "total"), ("drop", "invoice", "total"),
                     ("sustained_drop", "invoice", "total")}
    drop = next(a for a in alerts if a.kind == "drop")
    assert drop.week == WEEKS[-1]
    assert drop.estimate < 0.85 < drop.baseline
    assert drop.interval[0] < drop.estimate < drop.interval[1]
    assert drop.p_value < 0.05
    assert "fell from" in drop.message and "2026-W44..2026-W47" in drop.message
    sustained = next(a for a in alerts if a.kind == "sustained_drop")
    assert drop.estimate < sustained.estimate < sustained.baseline
    assert "2026-W44..2026-W46" in sustained.message
    assert "in 2026-W47 and 2026-W48" in sustained.message
    # The drop is this week's: a week earlier everything was fine.
    assert weekly_alerts(con, WEEKS[-2], target=0.95) == []


def test_new_form_version_worse_than_established_fires(
    con: duckdb.DuckDBPyConnection, world
) -> None:
    build(con, world, new_share=0.15)
    alerts = [a for a in weekly_alerts(con, target=0.5) if a.kind == "new_version"]
    assert alerts, "v9 at 70% against 98.5% established must alert"
    assert {a.form_version for a in alerts} == {"v9"}
    for alert in alerts:
        assert alert.estimate < alert.baseline
        assert "new form version v9" in alert.message


def test_no_samples_no_alerts(con: duckdb.DuckDBPyConnection) -> None:
    assert weekly_alerts(con) == []


@pytest.mark.parametrize(("estimate", "n_eff"), [(0.9, 100.0), (0.93, 250.5), (0.97, 40.0)])
def test_below_target_p_value_agrees_with_the_upper_bound(estimate: float, n_eff: float) -> None:
    p_value = below_target_p_value(estimate, n_eff, 0.95)
    _, upper = clopper_pearson(estimate * n_eff, n_eff, confidence=0.95, sided="upper")
    assert (p_value < 0.05) == (upper[0] < 0.95)
    if float(n_eff).is_integer() and (estimate * n_eff).is_integer():
        expected = stats.binom.cdf(round(estimate * n_eff), int(n_eff), 0.95)
        assert p_value == pytest.approx(expected, rel=1e-9)


def test_drop_test_is_fisher_mid_p_on_effective_counts() -> None:
    p_value = lower_rate_p_value(0.80, 100, 0.90, 400)
    exact = stats.fisher_exact([[20, 80], [40, 360]], alternative="greater").pvalue
    # Mid-p: the exact p-value less half the probability of the table seen.
    at_table = stats.hypergeom(500, 60, 100).pmf(20)
    assert p_value == pytest.approx(exact - at_table / 2)
    assert p_value < 0.05
    # One error against a perfect record: a pooled z test would say p = 0.02;
    # the exact test 0.2, its mid-p 0.1: not an alert either way.
    assert lower_rate_p_value(0.99, 100, 1.0, 400) == pytest.approx(0.1)
    assert lower_rate_p_value(1.0, 50, 1.0, 200) == 0.5


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="target"):
        weekly_alerts(duckdb.connect(), target=1.5)


def test_report_reads_once_and_agrees_with_the_parts(con: duckdb.DuckDBPyConnection, world) -> None:
    build(con, world, last_week_accuracy=0.75)
    report = audit_report(con, weeks=3, target=0.95)
    assert report.weeks == WEEKS[-3:]
    expected = weekly_estimates(con, Scope(weeks=WEEKS[-3:]))
    assert report.trend.equals(expected)
    overall = weekly_estimates(con, Scope(weeks=WEEKS[-3:]), by=())
    assert report.overall.equals(overall)
    assert report.alerts == weekly_alerts(con, target=0.95)
    assert report.alerts
    # 4 strata x (below target, drop, sustained drop): the note counts every test.
    labels = audit_labels(con, Scope(weeks=alert_weeks(WEEKS[-1], LOOKBACK)))
    assert count_tests(con, labels, WEEKS[-1]) == 12
    assert report.alert_note.startswith("12 tests this week, false discovery rate held at 5%")
    assert "a false alert shows in at most 5% of weeks" in report.alert_note


def test_vectorised_p_values_match_the_scalar_ones() -> None:
    estimate = np.array([0.9, 0.97, 1.0, np.nan, 0.8])
    n_eff = np.array([100.0, 250.5, 40.0, 50.0, 0.0])
    below = below_target_p_values(estimate, n_eff, 0.95)
    for i in range(estimate.size):
        np.testing.assert_equal(below[i], below_target_p_value(estimate[i], n_eff[i], 0.95))
    assert below[2] == 1.0 and np.isnan(below[3]) and np.isnan(below[4])
    p1, n1 = np.array([0.8, 0.99, 1.0, 0.9]), np.array([100, 100, 50, 0])
    p0, n0 = np.array([0.9, 1.0, 1.0, 0.9]), np.array([400, 400, 200, 400])
    drop = lower_rate_p_values(p1, n1, p0, n0)
    assert drop[0] == pytest.approx(lower_rate_p_value(0.80, 100, 0.90, 400), rel=1e-12)
    assert drop[1] == pytest.approx(0.1) and drop[2] == 0.5 and np.isnan(drop[3])


def test_alerts_read_labels_never_the_extraction_rows(
    con: duckdb.DuckDBPyConnection, world
) -> None:
    """Alerts read the labels, the sampled copy and the rollup: scrambling every
    extraction row (their count unchanged) changes neither the alerts nor the test count."""
    build(con, world, last_week_accuracy=0.75)
    rollup.refresh_rollups(con)
    labels = audit_labels(con, Scope(weeks=alert_weeks(WEEKS[-1], LOOKBACK)))
    before = weekly_alerts(con, target=0.95)
    tests = count_tests(con, labels, WEEKS[-1])
    assert before and tests > len(before)
    con.execute("UPDATE extractions SET doc_type = 'scrambled', field = 'scrambled',"
                " form_version = 'scrambled', confidence = 0.01,"
                " extracted_at = TIMESTAMP '2001-01-01 00:00:00'")
    assert rollup.is_current(con)
    assert weekly_alerts(con, target=0.95) == before
    labels = audit_labels(con, Scope(weeks=alert_weeks(WEEKS[-1], LOOKBACK)))
    assert count_tests(con, labels, WEEKS[-1]) == tests
    # The control: once the copy is rebuilt from the scrambled rows, nothing alerts.
    rollup.refresh_sampled(con)
    assert weekly_alerts(con, target=0.95) == []
