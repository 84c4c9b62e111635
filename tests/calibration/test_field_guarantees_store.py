"""The field scenarios through real stores and the CLI (smaller versions of test_field_guarantees).

(a) labels of the review queue (low confidence first) added to an audited
history change no certificate and no design-based count, and imported
without ``--random-sample`` they never let an unaudited, worse week certify
(imported as a random sample, the same file does); (b) a partly
labelled boosted week is weighed by its labelled prefix; (c) eight weeks with
only the last audited: every figure says it covers that week only.

The figures are read under the one-look certificate (``FIELDTRUST_CERTIFICATE=fixed``,
a view's ask): it is the certificate that weighs imported labels declared a random
sample, which the control arm of (a) needs. The anytime-valid certificate reads weekly
audit samples only, so queue labels cannot enter it at all (``test_anytime_store.py``).
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pytest
from calib_store import (
    ONE_LOOK_ENV,
    DesignSpec,
    StratumSpec,
    build_store,
    draw_samples,
    generate_population,
    insert_extractions,
    insert_labels,
    insert_sample,
    weeks_from,
)
from click.testing import CliRunner
from fieldtrust.governance.certification import certify

from fieldtrust import store
from fieldtrust.cli.main import cli
from tests.conftest import Builder

WEEKS = weeks_from("2026-W41", 4)


def calibrate_json(path) -> dict[tuple[str, str], dict]:  # type: ignore[no-untyped-def]
    result = CliRunner().invoke(cli, ["--db", str(path), "calibrate", "--json", "--weeks", "8"],
                                env=ONE_LOOK_ENV)
    assert result.exit_code == 0, result.output
    return {(s["doc_type"], s["field"]): s for s in json.loads(result.stdout)["strata"]}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_queue_labels_change_no_certificate(tmp_path, seed: int) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "store.duckdb"
    con = store.connect(path)
    population = build_store(
        con, [StratumSpec("invoice", "total", per_week=5000, beta_a=20,
                          p_correct=lambda c: np.clip(1 - 0.9 * (1 - c), 0, 1))],
        weeks=WEEKS, design=DesignSpec(rate=0.04), seed=seed,
    )
    con.close()
    before = calibrate_json(path)[("invoice", "total")]

    # The queue: the 600 least confident unlabelled extractions, labelled by hand.
    con = store.connect(path)
    labelled = {r[0] for r in con.execute("SELECT extraction_id FROM labels").fetchall()}
    queue = population[~population["extraction_id"].isin(labelled)].nsmallest(600, "confidence")
    insert_labels(con, queue["extraction_id"].to_numpy(), queue["truth"].to_numpy(),
                  random_sample=False, prefix="Q")
    con.close()
    after = calibrate_json(path)[("invoice", "total")]

    assert after["labels_by_provenance"]["non_random"] == 600
    assert after["labels_by_provenance"]["audit"] == before["labels_by_provenance"]["audit"]
    for key in ("n_labeled", "certified_threshold", "accuracy", "accuracy_low", "candidate",
                "covered_weeks"):
        assert after[key] == before[key], key


@pytest.mark.parametrize("seed", [1, 2])
def test_a_imported_queue_labels_never_cover_an_unaudited_week(tmp_path, seed: int) -> None:  # type: ignore[no-untyped-def]
    """test_field_guarantees' scenario (a) through ``labels import`` and ``calibrate --json``.

    W47 (never audited, at most 85% accurate) and W48 (audited, about 97% at
    the top); the review queue's 2,000 least confident items of each week,
    labelled and imported. Without ``--random-sample`` nothing certifies; the
    same file declared a random sample certifies a threshold above which the
    window is below target (the control arm).
    """
    weeks = weeks_from("2026-W47", 2)
    rng = np.random.default_rng(seed)
    population = pd.concat([
        generate_population([StratumSpec(
            "invoice", "total", per_week=20_000,
            p_correct=lambda c: np.minimum(0.85, 1 - 1.2 * (1 - c)))], weeks[:1], rng),
        generate_population([StratumSpec(
            "invoice", "total", per_week=20_000, p_correct=lambda c: 1 - 1.2 * (1 - c))],
            weeks[1:], rng),
    ], ignore_index=True)
    path = tmp_path / "store.duckdb"
    con = store.connect(path)
    insert_extractions(con, population)
    Builder(con).users()
    audited = population[population["week"] == weeks[1]]
    cells, items = draw_samples(audited, DesignSpec(rate=0.1), rng)
    sample_id = insert_sample(con, weeks[1], cells[weeks[1]], items[weeks[1]])
    ids = items[weeks[1]]["extraction_id"].to_numpy()
    insert_labels(con, ids, population.set_index("extraction_id")["truth"].loc[ids].to_numpy(),
                  sample_id=sample_id)
    con.close()
    free = population[~population["extraction_id"].isin(ids)]
    queue = free.groupby("week", group_keys=False).apply(lambda w: w.nsmallest(2000, "confidence"))
    queue_file = tmp_path / "queue.csv"
    queue.assign(verdict=np.where(queue["truth"], "correct", "incorrect"))[
        ["extraction_id", "verdict"]].to_csv(queue_file, index=False)
    declared = tmp_path / "declared.duckdb"
    shutil.copy(path, declared)

    rows = {}
    for db, flags in ((path, []), (declared, ["--random-sample"])):
        result = CliRunner().invoke(cli, ["--db", str(db), "labels", "import", str(queue_file),
                                          "--reviewer", "alice", *flags, "--as", "carol"])
        assert result.exit_code == 0, result.output
        rows[db] = calibrate_json(db)[("invoice", "total")]
    kept, weighted = rows[path], rows[declared]
    assert kept["labels_by_provenance"]["non_random"] == 4000
    assert kept["n_labeled"] == ids.size
    assert kept["uncovered_weeks"] == ["2026-W47"] and kept["reason"] == "unaudited_weeks"
    assert kept["certified_threshold"] is None and kept["candidate"] is False
    # The control: declared a random sample, the labels cover W47 and a threshold
    # certifies above which the window's truth is below the target.
    assert weighted["uncovered_weeks"] == [] and weighted["certified_threshold"] is not None
    above = population["confidence"] >= weighted["certified_threshold"] - 1e-12
    truth_above = population.loc[above, "truth"].mean()
    print(f"\n(a, CLI seed {seed}) non-random: certified {kept['certified_threshold']};"
          f" declared random: certified {weighted['certified_threshold']}"
          f" (candidate {weighted['candidate']}), true accuracy above {truth_above:.3f}")
    assert truth_above < 0.95


def test_b_a_partly_labelled_week_is_weighed_by_its_prefix(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "store.duckdb"
    con = store.connect(path)
    spec = StratumSpec("invoice", "total", per_week=4000,
                       versions={"v1": (0.85, 0, 1.0), "v2": (0.15, 1, 2.0)})
    build_store(con, [spec], weeks=WEEKS[:2], design=DesignSpec(rate=0.05), seed=5,
                label_share=0.6)
    items = con.execute(
        "SELECT i.sample_id, i.cell, c.n_population, i.extraction_id, l.correct"
        " FROM audit_items i JOIN audit_cells c USING (sample_id, cell)"
        " LEFT JOIN effective_labels l USING (extraction_id)"
        " ORDER BY i.sample_id, i.cell, i.prn, i.extraction_id"
    ).df()
    con.close()
    # By hand: each cell's leading labelled items, weighed N_h / prefix_h.
    total = weighted = 0.0
    prefix_labels = 0
    for _, cell in items.groupby(["sample_id", "cell"], sort=False):
        done = cell["correct"].notna().to_numpy()
        prefix = int(np.argmin(done)) if not done.all() else done.size
        if prefix == 0:
            continue
        total += cell["n_population"].iloc[0]
        weighted += cell["n_population"].iloc[0] * cell["correct"].iloc[:prefix].mean()
        prefix_labels += prefix
    row = calibrate_json(path)[("invoice", "total")]
    assert row["n_labeled"] == prefix_labels < int(items["correct"].notna().sum())
    assert row["accuracy"] == pytest.approx(weighted / total, abs=1e-9)
    assert row["n_population_covered"] == total < row["n_population"]


def test_c_eight_weeks_one_audited_claims_only_that_week(tmp_path) -> None:  # type: ignore[no-untyped-def]
    weeks = weeks_from("2026-W41", 8)
    path = tmp_path / "store.duckdb"
    con = store.connect(path)
    rng = np.random.default_rng(4)
    population = generate_population([StratumSpec("invoice", "total", per_week=4000)], weeks, rng)
    insert_extractions(con, population)
    last = population[population["week"] == weeks[-1]]
    cells, items = draw_samples(last, DesignSpec(rate=0.05), rng)
    sample_id = insert_sample(con, weeks[-1], cells[weeks[-1]], items[weeks[-1]])
    ids = items[weeks[-1]]["extraction_id"].to_numpy()
    insert_labels(con, ids, population.set_index("extraction_id")["truth"].loc[ids].to_numpy(),
                  sample_id=sample_id)
    certification = certify(con, "invoice", "total")
    con.close()

    row = calibrate_json(path)[("invoice", "total")]
    assert row["covered_weeks"] == ["2026-W48"]
    assert row["uncovered_weeks"] == weeks[:-1]
    assert (row["n_population_covered"], row["n_population"]) == (4000, 32000)
    assert row["covers"] == "covers W48: 4,000 of 32,000 extractions"
    assert row["candidate"] is False and row["reason"] == "unaudited_weeks"
    assert row["labels_needed"] is None
    assert abs(row["accuracy"] - last["truth"].mean()) < 0.03  # W48's accuracy, not the window's
    assert not certification.candidate and certification.covered_versions == ()
    result = CliRunner().invoke(cli, ["--db", str(path), "candidates"], env=ONE_LOOK_ENV)
    assert "until they are audited or leave the window" in result.stdout
