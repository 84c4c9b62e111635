"""What ``.ci/run`` installs beside the running tests, and how a test waits for it.

On a fresh CI machine, Debian's Chromium and Label Studio each take a minute
or more to install. ``.ci/run`` installs them in the background while
fieldtrust installs and the tests start, so the run does not wait for them
before its first test. While one installs, a file ``.NAME.installing`` beside
the checkout is empty; when the install ends it is replaced, in one rename,
by its outcome: ``ok``, or the installer's exit code (the output is in
``.NAME.log``). With no such file, nothing is installing.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
INSTALL_TIMEOUT = 900
CHROMIUM = "/usr/bin/chromium"


def wait_for_install(name: str, what: str) -> None:
    """Wait while ``.ci/run`` installs ``what`` (its files ``.NAME.*``) beside the tests;
    fail if the install failed."""
    installing = ROOT / f".{name}.installing"
    deadline = time.monotonic() + INSTALL_TIMEOUT
    while (state := installing.read_text().strip() if installing.exists() else "ok") == "":
        if time.monotonic() > deadline:
            pytest.fail(f"{what} was still installing after {INSTALL_TIMEOUT} s")
        time.sleep(2)
    if state != "ok":
        pytest.fail(f"installing {what} failed (exit {state}): see .{name}.log")


def require(present: bool, reason: str) -> None:
    """Skip without what the test needs; in CI (``CI=true``), where it must run, fail."""
    if present:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must run this test: {reason}")
    pytest.skip(reason)


def chromium() -> str:
    """Debian's Chromium, once an install beside the tests has ended."""
    wait_for_install("chromium", "Chromium")
    require(Path(CHROMIUM).exists(),
            f"no Chromium at {CHROMIUM}: `apt-get install chromium` (CI's .ci/run does)")
    return CHROMIUM
