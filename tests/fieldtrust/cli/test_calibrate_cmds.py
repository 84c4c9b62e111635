"""The calibration report and the `calibrate`, `candidates`, `recalibrate` commands.

The stores here are built from the tests' own samples (``calib_store``: cells and items
written directly, not drawn), which the one-look certificate reads, so the commands run
with ``FIELDTRUST_CERTIFICATE=fixed`` (a view's ask) and the library with that bar. The
default anytime-valid certificate is tested on drawn samples (``test_small_team.py``,
``tests/test_first_hour.py``).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner
from fieldtrust.calibration.report import calibration_report
from fieldtrust.store.bar import Bar
from fieldtrust.store.scope import Scope

from fieldtrust import store
from fieldtrust.cli.main import cli
from fieldtrust.errors import InputError
from tests.calibration.calib_store import (
    ONE_LOOK,
    ONE_LOOK_ENV,
    DesignSpec,
    StratumSpec,
    add_stratum,
    build_store,
    insert_labels,
    weeks_from,
)

WEEKS = weeks_from("2026-W20", 3)
FIXED_ASKED = "certificate fixed (from FIELDTRUST_CERTIFICATE) is not the store's policy (anytime)"
STRATUM_KEYS = {
    "doc_type", "field", "n_population", "n_labeled", "accuracy", "accuracy_low",
    "accuracy_high", "mean_confidence", "ece", "brier", "point_threshold",
    "certified_threshold", "certified_accuracy_low", "coverage", "labels_needed",
    "candidate", "reason",
}


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = tmp_path_factory.mktemp("report") / "store.duckdb"
    con = store.connect(path)
    build_store(
        con,
        [StratumSpec("invoice", "total", per_week=4000, beta_a=25,
                     p_correct=lambda c: np.clip(1 - 0.4 * (1 - c), 0, 1)),
         StratumSpec("handwritten_receipt", "tax", per_week=1500,
                     p_correct=lambda c: np.full_like(c, 0.6)),
         StratumSpec("invoice", "date", per_week=3000)],
        weeks=WEEKS, design=DesignSpec(rate=0.04, minimum=10), seed=9,
    )
    add_stratum(con, "invoice", "currency", "2026-W10", n=200, labelled=0, errors=0)
    con.close()
    return path


@pytest.fixture
def reader(db):
    con = store.connect(db, read_only=True)
    yield con
    con.close()


def run(db, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["--db", str(db), *args],
                                env=ONE_LOOK_ENV)
    return result.exit_code, result.stdout, result.stderr


def test_overall_sits_next_to_the_strata_below_target(reader) -> None:
    report = calibration_report(reader, Scope(weeks=tuple(WEEKS)))
    tables = [s.table for s in report.strata if s.table.n_labeled]
    sizes = np.array([t.n_population for t in tables], dtype=float)
    expected = np.sum(sizes / sizes.sum() * [t.accuracy for t in tables])
    assert report.overall.accuracy == pytest.approx(expected)
    below = [(r["doc_type"], r["field"]) for r in report.overall.strata_below_target]
    assert below[0] == ("handwritten_receipt", "tax")
    assert set(below) == {(t.doc_type, t.field) for t in tables if t.accuracy < 0.95}
    assert "strata below 95%" in report.overall.summary
    assert "handwritten_receipt/tax" in report.overall.summary


def test_strata_come_worst_first_with_unlabelled_ones_last(reader) -> None:
    report = calibration_report(reader, Scope(weeks=tuple(WEEKS)), ONE_LOOK)
    accuracies = [s.table.accuracy for s in report.strata]
    labelled = [a for a in accuracies if not math.isnan(a)]
    assert labelled == sorted(labelled)
    assert math.isnan(accuracies[-1])
    assert report.strata[-1].to_dict()["reason"] == "no_coverage"


def test_the_library_prints_nothing(reader, capsys) -> None:
    calibration_report(reader)
    assert capsys.readouterr() == ("", "")


def test_report_refuses_bad_settings(reader) -> None:
    with pytest.raises(InputError, match=r"target = 1\.5 must be strictly between 0 and 1"):
        calibration_report(reader, Scope(), Bar(target=1.5))
    with pytest.raises(InputError, match="no stratum doc_type='x'"):
        calibration_report(reader).stratum("x", "y")


def test_calibrate_json_has_the_documented_shape(db) -> None:
    code, out, _ = run(db, "calibrate", "--json", "--weeks", "3")
    assert code == 0
    payload = json.loads(out)
    assert set(payload) == {"target", "confidence", "bar", "approvable", "not_approvable_because",
                            "across_strata", "overall", "strata"}
    assert payload["target"] == 0.95 and payload["confidence"] == 0.95
    # What is promised across the strata shown: each at delta, sum of deltas expected wrong.
    promise = payload["across_strata"]
    certified = sum(s["certified_threshold"] is not None for s in payload["strata"])
    assert promise["certified_shown"] == certified
    assert promise["expected_wrong_certificates"] == pytest.approx(0.05 * certified)
    assert promise["strata_shown"] == sum(s["n_population"] > 0 for s in payload["strata"])
    # Every setting the report was held to; 3 weeks is not the policy's 8.
    assert payload["bar"] == {**ONE_LOOK.values(), "weeks": 3}
    assert payload["approvable"] is False
    assert payload["not_approvable_because"] == (
        f"{FIXED_ASKED}; weeks 3 (from --weeks) is not the store's policy (8)")
    assert {"accuracy", "accuracy_low", "accuracy_high", "n_population", "n_labeled",
            "strata_below_target"} <= set(payload["overall"])
    assert len(payload["strata"]) == 4
    for stratum in payload["strata"]:
        assert set(stratum) >= STRATUM_KEYS
    empty = next(s for s in payload["strata"] if s["field"] == "currency")
    assert empty["accuracy"] is None and empty["certified_threshold"] is None
    assert empty["n_population"] == 0 and empty["reason"] == "no_coverage"
    certified = [s for s in payload["strata"] if s["certified_threshold"] is not None]
    assert certified and all(s["certified_accuracy_low"] >= 0.95 for s in certified)


def test_calibrate_flags_reach_the_report(db) -> None:
    _, out, _ = run(db, "calibrate", "--json", "--target", "0.9", "--confidence", "0.9",
                    "--weeks", "1")
    payload = json.loads(out)
    assert (payload["target"], payload["confidence"]) == (0.9, 0.9)
    one_week = sum(s["n_population"] for s in payload["strata"])
    _, out3, _ = run(db, "calibrate", "--json", "--weeks", "3")
    assert one_week < sum(s["n_population"] for s in json.loads(out3)["strata"])


def test_calibrate_prints_the_overall_line_first_then_worst_strata(db) -> None:
    code, out, _ = run(db, "calibrate", "--weeks", "3")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("overall: ")
    table = [line for line in lines if line.startswith(("invoice", "handwritten"))]
    assert table[0].startswith("handwritten_receipt")


def test_bad_flag_values_become_a_one_line_error(db) -> None:
    code, _, err = run(db, "calibrate", "--target", "1.5")
    assert code == 2
    assert err.startswith("error: ") and "--target: 1.5 must be strictly between 0 and 1" in err


def test_candidates_lists_evidence_and_reasons(db) -> None:
    code, out, err = run(db, "candidates", "--json", "--weeks", "3")
    assert code == 0, (out, err)
    payload = json.loads(out)
    reasons = {(s["doc_type"], s["field"]): s["reason"] for s in payload["not_candidates"]}
    assert reasons[("handwritten_receipt", "tax")] in ("accuracy_below_target", "too_few_labels")
    assert reasons[("invoice", "currency")] == "no_coverage"
    for evidence in payload["candidates"]:
        assert evidence["accuracy_low"] >= 0.95 and evidence["threshold"] is not None
    code, out, _ = run(db, "candidates", "--weeks", "3")
    assert code == 0 and "not candidates:" in out


def test_recalibrate_stores_maps(tmp_path, db) -> None:
    copy = tmp_path / "copy.duckdb"
    copy.write_bytes(db.read_bytes())
    code, out, _ = run(copy, "recalibrate", "--json", "--weeks", "3")
    assert code == 0
    rows = json.loads(out)
    assert {(r["doc_type"], r["field"]) for r in rows} == {
        ("invoice", "total"), ("handwritten_receipt", "tax"), ("invoice", "date")}
    assert all(r["non_random_labels"] == 0 for r in rows)
    con = store.connect(copy)
    assert con.execute("SELECT count(*) FROM current_recalibration_maps").fetchone()[0] == 3
    # The review queue: the 300 least confident unlabelled invoice totals.
    queue = [r[0] for r in con.execute(
        "SELECT extraction_id FROM extractions WHERE doc_type = 'invoice' AND field = 'total'"
        " AND extraction_id NOT IN (SELECT extraction_id FROM labels)"
        " ORDER BY confidence, extraction_id LIMIT 300").fetchall()]
    insert_labels(con, queue, np.arange(300) % 3 > 0, random_sample=False, prefix="Q")
    con.close()
    code, out, _ = run(copy, "recalibrate", "--json", "--weeks", "3", "--non-random")
    assert code == 0
    with_queue = {(r["doc_type"], r["field"]): r for r in json.loads(out)}
    assert with_queue[("invoice", "total")]["non_random_labels"] == 300
    assert with_queue[("invoice", "date")]["non_random_labels"] == 0
    assert sorted(r["labels"] for r in with_queue.values()) == sorted(r["labels"] for r in rows)


@pytest.mark.parametrize("command", ["calibrate", "candidates", "recalibrate"])
def test_every_command_help_has_an_example(command) -> None:
    result = CliRunner().invoke(cli, [command, "--help"])
    assert result.exit_code == 0
    assert "Example: fieldtrust " + command in result.stdout


@pytest.fixture(scope="module")
def one_audited_week(tmp_path_factory):
    """invoice/total over six weeks, only the last one audited (400 labels, about 1% errors)."""
    path = tmp_path_factory.mktemp("one-week") / "store.duckdb"
    con = store.connect(path)
    weeks = weeks_from("2026-W20", 6)
    spec = StratumSpec("invoice", "total", per_week=4000, beta_a=25,
                       p_correct=lambda c: np.clip(1 - 0.4 * (1 - c), 0, 1))
    build_store(con, [spec], weeks=weeks[:5], seed=3)  # five weeks nobody audited
    build_store(con, [spec], weeks=weeks[5:], design=DesignSpec(rate=0.1, minimum=10), seed=4)
    con.close()
    return path


def test_one_audited_week_of_six_is_not_called_a_candidate(one_audited_week) -> None:
    # At the store's policy (the last 8 weeks) the five unaudited weeks stop it.
    _, out, _ = run(one_audited_week, "candidates", "--json")
    (at_policy,) = json.loads(out)["not_candidates"]
    assert at_policy["reason"] == "unaudited_weeks"
    # --weeks 1 sees only the audited week, where it passes: before, the word was
    # "candidate"; now the view says what it is.
    code, out, _ = run(one_audited_week, "candidates", "--weeks", "1", "--json")
    assert code == 0
    payload = json.loads(out)
    assert payload["candidates"] == [] and payload["approvable"] is False
    (narrowed,) = payload["not_candidates"]
    assert narrowed["reasons"] == ["not_at_policy"]
    assert narrowed["reason_text"] == (f"at these settings, not approvable: {FIXED_ASKED};"
                                       " weeks 1 (from --weeks) is not the store's policy (8)")
    _, table, _ = run(one_audited_week, "calibrate", "--weeks", "1")
    assert "weeks 1 (from --weeks) is not the store's policy (8)" in table
    row = next(line for line in table.splitlines() if line.startswith("invoice"))
    assert row.split()[-1] == "not_at_policy"  # the candidate column, never "yes"


def test_calibrate_table_has_human_headers_and_a_note_for_an_uninformative_interval(
    tmp_path,
) -> None:
    path = tmp_path / "store.duckdb"
    con = store.connect(path)
    build_store(con, [StratumSpec("invoice", "total", per_week=4000, beta_a=25)],
                weeks=WEEKS, design=DesignSpec(rate=0.04, minimum=10), seed=9)
    # Three labels, all right, from a declared random sample: Clopper-Pearson [29%, 100%].
    add_stratum(con, "invoice", "iban", WEEKS[-1], n=300, labelled=3, errors=0)
    con.close()
    code, out, _ = run(path, "calibrate", "--weeks", "3")
    assert code == 0, out
    lines = out.splitlines()
    header = next(line for line in lines if line.startswith("doc type"))
    for name in ("labels", "95% interval", "stated", "point threshold", "certified threshold",
                 "lower bound", "labels needed"):
        assert f"  {name}  " in header
    assert "point t " not in header and "acc low" not in header
    payload = {(s["doc_type"], s["field"]): s
               for s in json.loads(run(path, "calibrate", "--weeks", "3", "--json")[1])["strata"]}
    iban = payload[("invoice", "iban")]
    assert iban["n_labeled"] == 3 and iban["interval_note"] == "no usable interval on 3 labels"
    row = next(line for line in lines if line.split()[:2] == ["invoice", "iban"])
    assert row.split()[5:8] == ["no", "usable", "interval*"]
    total = payload[("invoice", "total")]
    assert total["interval_note"] is None and total["n_eff"] > 0
    shown = f"[{total['accuracy_low']:.1%}, {total['accuracy_high']:.1%}]"
    assert shown in next(line for line in lines if line.split()[:2] == ["invoice", "total"])
    assert lines[-1].startswith("*: no usable interval (it would span over half of 0-100%)")
    assert "3 design-based labels" not in lines[1]  # the overall line counts every stratum
    assert "design-based labels" in lines[1]
