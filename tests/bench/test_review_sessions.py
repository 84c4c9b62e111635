"""``python -m bench.review_sessions`` at a tiny size: two reviewers' websocket sessions on one
real ``fieldtrust serve``, two keys each.

No timing is asserted; what is asserted is what the issue counts: every key
wrote its label, none twice, each moved on to a new item, no busy store or
error was shown, and the figures were printed. About 25 s (a store built,
a server started), so it runs with ``pytest -m bench``.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench.generate import build_dataset

ROOT = Path(__file__).resolve().parents[2]
ROWS, SESSIONS, KEYS = 1000, 2, 2

pytestmark = [pytest.mark.bench, pytest.mark.xdist_group("review_sessions")]


@pytest.fixture(scope="module")
def printed(tmp_path_factory: pytest.TempPathFactory) -> str:
    """What the documented command prints on a 1,000-row benchmark store."""
    data = tmp_path_factory.mktemp("review-sessions")
    build_dataset(ROWS, 7, data)
    proc = subprocess.run(
        [sys.executable, "-m", "bench.review_sessions", "--rows", str(ROWS), "--data", str(data),
         "--sessions", str(SESSIONS), "--keys", str(KEYS), "--think", "0.2"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def _count(text: str, pattern: str) -> int:
    found = re.search(pattern, text)
    assert found, f"{pattern!r} not in the output:\n{text}"
    return int(found.group(1).replace(",", ""))


def test_every_key_wrote_one_label_and_moved_on(printed: str) -> None:
    keys = SESSIONS * KEYS
    written = re.search(r"labels written ([\d,]+) of ([\d,]+) keys answered", printed)
    assert written, printed
    assert (int(written.group(1)), int(written.group(2))) == (keys, keys)
    assert _count(printed, r"items labelled twice in one round: (\d+)") == 0
    assert _count(printed, r"keys not followed by a new item: (\d+)") == 0
    assert _count(printed, r"said were recorded: ([\d,]+)") == keys
    assert _count(printed, r"keys that reran the whole page: (\d+)") == 0


def test_nothing_went_wrong_on_screen_and_the_figures_are_printed(printed: str) -> None:
    assert _count(printed, r"store-busy messages shown: (\d+)") == 0
    assert _count(printed, r"errors shown: (\d+)") == 0
    assert _count(printed, r"sessions that stopped early: (\d+)") == 0
    assert re.search(r"key to next item median \d+ ms, p95 \d+ ms, max \d+ ms \(n = 4\)", printed)
    assert re.search(r"load average [\d.]+ on \d+ cores", printed)
    assert re.search(r"CPU while labelling: the server [\d.]+ s \(\d+ ms a key", printed)
