"""``python -m fieldtrust.dashboard.timings``: every page's reads timed on a real store, and a
clear error (exit 2), never a traceback, when a read cannot run."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from fieldtrust.dashboard import timings

from tests.calibration.anytime_store import build_audited


def _run(monkeypatch: pytest.MonkeyPatch, *args: str) -> None:
    monkeypatch.setattr(sys, "argv", ["timings", *args])
    timings.main()


def test_each_page_is_timed_and_a_read_that_cannot_run_is_an_error_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "audited.duckdb"
    build_audited(db).close()
    _run(monkeypatch, "--db", str(db), "--pages", "overview", "calibration", "--verbose")
    shown = capsys.readouterr().out
    assert shown.startswith("overview") and "\ncalibration" in shown
    assert "calibration_report" in shown and "threshold_curve" in shown
    # This store's labels were written beside the history chain (the test's shortcut),
    # so the automation page's policy export refuses, as the page itself would say.
    with pytest.raises(SystemExit) as exited:
        _run(monkeypatch, "--db", str(db), "--pages", "automation")
    assert exited.value.code == 2
    assert capsys.readouterr().err.startswith("error: the policy is not exported")
    with pytest.raises(SystemExit) as exited:
        _run(monkeypatch, "--db", str(tmp_path / "missing.duckdb"))
    assert exited.value.code == 2 and capsys.readouterr().err.startswith("error:")
