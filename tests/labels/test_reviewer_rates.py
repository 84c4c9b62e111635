"""Per-reviewer miss rates (seeds) and false-flag rates (settled double reviews), with n.

A real seeded store: ana misses 4 of the seeds she judges, ben none; on the
double-reviewed items ana gives the primary verdict and ben the second, ben
flags some items ana called correct, and the qa_lead's adjudication settles
them. Rates are checked against counts made here and the intervals against
scipy's Wilson interval.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner
from fieldtrust.labels.agreement import adjudicate
from fieldtrust.labels.reviewer_rates import reviewer_rates
from fieldtrust.labels.verdicts import record_verdict
from scipy.stats import binomtest

from fieldtrust.cli.main import cli
from tests.seeded import seeded_store

WRONG = {"corrected_value": "1.00", "error_type": "wrong_field"}


@pytest.fixture
def judged(tmp_path: Path) -> tuple[duckdb.DuckDBPyConnection, Path]:
    path = tmp_path / "rates.duckdb"
    con = seeded_store(path, double_review_share=0.5)
    seeds = [s for (s,) in con.sql("SELECT seed_id FROM seed_items ORDER BY seed_id").fetchall()]
    for k, seed_id in enumerate(seeds[:20]):
        verdict = "correct" if k < 4 else "incorrect"
        record_verdict(con, actor="ana", extraction_id=seed_id, verdict=verdict,
                       **({} if verdict == "correct" else WRONG))
    for seed_id in seeds[20:32]:
        record_verdict(con, actor="ben", extraction_id=seed_id, verdict="unclear")
    double = [e for (e,) in con.sql("SELECT extraction_id FROM audit_items WHERE double_review"
                                    " ORDER BY extraction_id LIMIT 30").fetchall()]
    for k, extraction_id in enumerate(double):
        record_verdict(con, actor="ana", extraction_id=extraction_id, verdict="correct",
                       review_round="primary")
        flagged = k % 5 == 0  # ben flags 6 of the 30
        record_verdict(con, actor="ben", extraction_id=extraction_id,
                       verdict="incorrect" if flagged else "correct", review_round="second",
                       **(WRONG if flagged else {}))
        if flagged:  # the qa_lead settles 4 of ben's flags as correct, 2 as errors
            settled = "correct" if k < 20 else "incorrect"
            adjudicate(con, "quinn", extraction_id, settled,
                       **({} if settled == "correct" else WRONG))
    return con, path


def test_miss_and_false_flag_rates_with_their_n_and_wilson_intervals(
    judged: tuple[duckdb.DuckDBPyConnection, Path],
) -> None:
    con, _ = judged
    rates = {r.reviewer: r for r in reviewer_rates(con)}
    ana, ben = rates["ana"], rates["ben"]
    assert (ana.seeds_judged, ana.misses, ana.miss_rate) == (20, 4, 0.2)
    assert (ben.seeds_judged, ben.misses, ben.miss_rate) == (12, 0, 0.0)  # unclear catches
    # Settled correct: 24 agreed-correct items and 4 adjudicated correct = 28 each.
    assert (ana.settled_correct, ana.false_flags, ana.false_flag_rate) == (28, 0, 0.0)
    assert (ben.settled_correct, ben.false_flags) == (28, 4)
    expected = binomtest(4, 20).proportion_ci(0.95, method="wilson")
    assert (ana.miss_low, ana.miss_high) == pytest.approx((expected.low, expected.high))
    expected = binomtest(4, 28).proportion_ci(0.95, method="wilson")
    assert (ben.false_flag_low, ben.false_flag_high) == pytest.approx(
        (expected.low, expected.high))
    assert "quinn" not in rates  # an adjudicator is no reviewer here


def test_reviewers_json_prints_the_same_rates_and_none_without_n(
    judged: tuple[duckdb.DuckDBPyConnection, Path],
) -> None:
    con, path = judged
    con.close()
    result = CliRunner().invoke(cli, ["--db", str(path), "reviewers", "--json"])
    assert result.exit_code == 0, result.output
    shown = {r["reviewer"]: r for r in json.loads(result.output)}
    assert shown["ana"]["miss_rate"] == 0.2 and shown["ana"]["seeds_judged"] == 20
    assert shown["ben"]["false_flags"] == 4
    text = CliRunner().invoke(cli, ["--db", str(path), "reviewers"])
    assert text.exit_code == 0 and "20.0% [" in text.output


def test_a_reviewer_without_seeds_has_no_miss_rate(tmp_path: Path) -> None:
    con = seeded_store(tmp_path / "none.duckdb", double_review_share=0.5)
    [extraction_id] = con.sql("SELECT min(extraction_id) FROM audit_items"
                              " WHERE double_review").fetchall()[0]
    record_verdict(con, actor="ana", extraction_id=extraction_id, verdict="correct")
    record_verdict(con, actor="ben", extraction_id=extraction_id, verdict="correct",
                   review_round="second")
    [ana, _] = reviewer_rates(con)
    assert ana.seeds_judged == 0 and ana.to_dict()["miss_rate"] is None
    assert (ana.settled_correct, ana.false_flags) == (1, 0)
