"""``python -m bench.first_page`` at a tiny size: two fresh Chromium sessions on one real
``fieldtrust serve``.

No timing is asserted: that each session's page settled (a bench that never
sees the run end would time out instead) and the figures were printed, with
their n. About 20 s, so it runs with ``pytest -m bench``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench.generate import build_dataset
from tests.beside import chromium

ROOT = Path(__file__).resolve().parents[2]
ROWS, SESSIONS = 1000, 2

pytestmark = [pytest.mark.bench, pytest.mark.xdist_group("review_sessions")]


def test_each_fresh_session_s_first_page_is_timed(tmp_path: Path) -> None:
    build_dataset(ROWS, 7, tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "bench.first_page", "--rows", str(ROWS), "--data", str(tmp_path),
         "--sessions", str(SESSIONS)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
        env={**os.environ, "CHROMIUM": chromium()},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(line for line in proc.stdout.splitlines() if "session's first page" in line)
    assert re.search(rf"median \d+ ms, p95 \d+ ms, max \d+ ms \(n = {SESSIONS}\)", line), line
    assert re.search(r"goal <= 3 s: (met|not met)", line), line
