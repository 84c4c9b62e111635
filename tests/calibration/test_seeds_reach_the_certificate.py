"""A policy that seeds its samples certifies on the store's seed verdicts, on every path.

The anytime certificate allows for reviewer misses when the bar's
``seed_rate`` is above 0 (STATS.md section 13). The judged seeds live in
the store (``seed_verdicts``); every caller (``fieldtrust candidates``,
``calibrate``, the dashboard, a manager's approval) goes through
``automation_candidates``, which reads them itself. Before, the callers
passed none: every stratum of a seeding policy read "0 of 0 seeds" and
could never certify.
"""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner
from fieldtrust.calibration.candidates import automation_candidates
from fieldtrust.governance.bar_admin import set_policy_settings
from fieldtrust.labels.verdicts import record_verdict

from fieldtrust.cli.main import cli
from tests.seeded import seeded_store


def _judge_seeds(con, field: str, *, every_nth_missed: int) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    """Ana judges every seed of ``field``; each ``every_nth_missed``-th one she lets pass."""
    seeds = [s for (s,) in con.sql("SELECT seed_id FROM seed_items WHERE field = ?"
                                   " ORDER BY prn", params=[field]).fetchall()]
    missed = 0
    for i, seed_id in enumerate(seeds):
        if i % every_nth_missed == 0:
            missed += 1
            record_verdict(con, actor="ana", extraction_id=seed_id, verdict="correct")
        else:
            record_verdict(con, actor="ana", extraction_id=seed_id, verdict="incorrect",
                           corrected_value="0.00", error_type="wrong_field")
    return len(seeds), missed


def test_the_stores_seed_verdicts_reach_every_strata_certificate(tmp_path: Path) -> None:
    path = tmp_path / "seeded.duckdb"
    con = seeded_store(path, seed_rate=0.1)
    set_policy_settings(con, "root", certificate="anytime")
    judged, missed = _judge_seeds(con, "total", every_nth_missed=4)
    assert judged >= 30 and 0 < missed < judged
    shown = {(a.doc_type, a.field): a.evidence["reviewer_misses"]
             for a in automation_candidates(con)}
    assert f"({missed} of {judged} seeds)" in shown[("invoice", "total")]
    # A stratum whose seeds nobody judged yet allows for nothing: its bound is 100%.
    assert "at most 100.0% missed (0 of 0 seeds)" in shown[("invoice", "tax")]
    con.close()
    result = CliRunner().invoke(cli, ["--db", str(path), "candidates", "--json"])
    assert result.exit_code == 0, result.output
    assert f"({missed} of {judged} seeds)" in result.output
