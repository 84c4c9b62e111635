"""Agreement (kappa as sklearn computes it), the adjudication queue, adjudication."""

from __future__ import annotations

import math
import warnings
from typing import Any

import duckdb
import numpy as np
import pytest
from fieldtrust.labels.agreement import adjudicate, adjudication_queue, agreement, cohen_kappa
from fieldtrust.labels.verdicts import label_history, record_verdict
from fieldtrust.store.labelled import labelled_items
from fieldtrust.store.scope import Scope
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import cohen_kappa_score

from fieldtrust.errors import InputError, PermissionDenied

VERDICTS = ("correct", "incorrect", "unclear")


def _sklearn(a: list[str], b: list[str]) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(cohen_kappa_score(a, b))


def _same(x: float, y: float) -> bool:
    return (math.isnan(x) and math.isnan(y)) or math.isclose(x, y, abs_tol=1e-12)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(VERDICTS), st.sampled_from(VERDICTS)),
                min_size=1, max_size=60))
def test_kappa_equals_sklearn(pairs: list[tuple[str, str]]) -> None:
    a = [p[0] for p in pairs]
    b = [p[1] for p in pairs]
    assert _same(cohen_kappa(a, b), _sklearn(a, b))
    assert _same(cohen_kappa(a, b), cohen_kappa(b, a))  # symmetric in the raters


def test_kappa_hand_computed_and_degenerate() -> None:
    # 2x2 table [[20, 5], [10, 15]]: p_o = 0.7, p_e = 0.5 -> kappa = 0.4.
    a = ["correct"] * 25 + ["incorrect"] * 25
    b = ["correct"] * 20 + ["incorrect"] * 5 + ["correct"] * 10 + ["incorrect"] * 15
    assert cohen_kappa(a, b) == pytest.approx(0.4)
    assert math.isnan(cohen_kappa(["correct"] * 3, ["correct"] * 3))
    with pytest.raises(InputError, match="equally long"):
        cohen_kappa(["correct"], [])


def _double_reviewed(builder: Any, seed: int = 3) -> list[tuple[str, ...]]:
    """Random double reviews over two fields and three reviewer pairs; returns the rows."""
    rng = np.random.default_rng(seed)
    pairs = [("alice", "bob"), ("bob", "alice"), ("alice", "dave"), ("dave", "bob")]
    rows, extractions, labels = [], [], []
    for i in range(80):
        field = "total" if i % 2 else "tax"
        extraction_id = f"d{i:03d}"
        extractions.append({"extraction_id": extraction_id, "field": field})
        first, second = pairs[int(rng.integers(len(pairs)))]
        truth = rng.choice(["correct", "incorrect"], p=[0.7, 0.3])
        v1 = truth if rng.random() < 0.85 else str(rng.choice(VERDICTS))
        v2 = truth if rng.random() < 0.85 else str(rng.choice(VERDICTS))
        for reviewer, verdict, rnd in ((first, v1, "primary"), (second, v2, "second")):
            labels.append({"extraction_id": extraction_id, "reviewer": reviewer,
                           "verdict": str(verdict), "review_round": rnd})
        rows.append((extraction_id, field, first, second, str(v1), str(v2)))
    builder.extractions(extractions)
    builder.labels(labels)
    return rows


def test_agreement_per_field_and_pair_equals_sklearn(
    review_store: duckdb.DuckDBPyConnection, builder: Any
) -> None:
    rows = _double_reviewed(builder)
    report = agreement(review_store)
    assert report.n_items == 80
    for result in report.per_field:
        group = [r for r in rows if ("invoice", r[1]) == result.group]
        a, b = [r[4] for r in group], [r[5] for r in group]
        assert result.n == len(group)
        agreed = [x == y for x, y in zip(a, b, strict=True)]
        assert result.percent_agreement == pytest.approx(np.mean(agreed))
        assert _same(result.kappa, _sklearn(a, b))
    assert [r.group for r in report.per_field] == [("invoice", "tax"), ("invoice", "total")]
    for result in report.per_pair:
        group = [r for r in rows if tuple(sorted(r[2:4])) == result.group]
        # Rater a = the alphabetically first name, whichever round they reviewed in.
        a = [r[4] if r[2] == result.group[0] else r[5] for r in group]
        b = [r[5] if r[2] == result.group[0] else r[4] for r in group]
        assert result.n == len(group)
        assert _same(result.kappa, _sklearn(a, b))
    assert {r.group for r in report.per_pair} == {("alice", "bob"), ("alice", "dave"),
                                                  ("bob", "dave")}
    assert report.to_adjudicate == sum(r[4] != r[5] for r in rows)


def test_disagreements_are_queued_and_adjudication_is_what_calibration_uses(
    review_store: duckdb.DuckDBPyConnection,
) -> None:
    con = review_store
    record_verdict(con, actor="alice", extraction_id="e00", verdict="correct")
    record_verdict(con, actor="bob", extraction_id="e00", verdict="incorrect",
                   corrected_value="11.00", error_type="misread_characters",
                   review_round="second")
    record_verdict(con, actor="alice", extraction_id="e10", verdict="correct")
    record_verdict(con, actor="bob", extraction_id="e10", verdict="correct",
                   review_round="second")
    queue = adjudication_queue(con)
    assert [(q.extraction_id, q.primary_verdict, q.second_verdict) for q in queue] == [
        ("e00", "correct", "incorrect")
    ]
    assert queue[0].second_corrected_value == "11.00"

    def truth_of(extraction_id: str) -> tuple[int, str]:
        items = labelled_items(con, Scope(weeks=("2026-W10",))).to_pylist()
        row = next(r for r in items if r["extraction_id"] == extraction_id)
        return row["correct"], row["review_round"]

    assert truth_of("e00") == (1, "primary")
    label = adjudicate(con, "carol", "e00", "incorrect", corrected_value="11.00",
                       error_type="misread_characters")
    assert (label.review_round, label.reviewer, label.sample_id) == (
        "adjudication", "carol", "2026-W10/v1")
    assert truth_of("e00") == (0, "adjudication")
    assert adjudication_queue(con) == []
    # Settling it again supersedes the first adjudication; history keeps both.
    again = adjudicate(con, "carol", "e00", "correct")
    assert again.supersedes == label.label_id
    assert truth_of("e00") == (1, "adjudication")
    assert [h.review_round for h in label_history(con, "e00")] == [
        "primary", "second", "adjudication", "adjudication"
    ]


def test_only_a_qa_lead_adjudicates_and_only_reviewed_items(
    review_store: duckdb.DuckDBPyConnection,
) -> None:
    record_verdict(review_store, actor="alice", extraction_id="e00", verdict="correct")
    with pytest.raises(PermissionDenied, match=r"bob \(role reviewer\) may not adjudicate"):
        adjudicate(review_store, "bob", "e00", "incorrect", corrected_status="null",
                   error_type="value_not_in_document")
    with pytest.raises(InputError, match="has no review to adjudicate"):
        adjudicate(review_store, "carol", "e11", "correct")
