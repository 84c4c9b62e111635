"""A real Label Studio server on 127.0.0.1 for the tests, and calls of its REST API.

Label Studio is installed by ``.ci/run`` into a virtualenv of its own
(``.ls-venv``), so its pinned dependencies never touch fieldtrust's. Without
it the tests that need the server skip, except in CI (``CI=true``), where
they fail. One server serves the whole run (the ``label_studio`` fixture of
tests/conftest.py): starting one costs about a minute.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.beside import require, wait_for_install

ROOT = Path(__file__).resolve().parents[1]
LABEL_STUDIO = ROOT / ".ls-venv" / "bin" / "label-studio"
#: (e-mail, password, API token) of the two annotators.
ANN = ("ann@example.com", "Passw0rd-ann", "annToken0123456789")
BOB = ("bob@example.com", "Passw0rd-bob", "bobToken0123456789")
#: Bounds: the first init migrates Label Studio's database (about a minute on two idle
#: cores, several when other test runs share them).
INIT_TIMEOUT = 900
START_TIMEOUT = 180


def _require_label_studio() -> None:
    wait_for_install("ls-venv", "Label Studio")
    require(LABEL_STUDIO.exists(),
            f"Label Studio is not installed in {LABEL_STUDIO.parent.parent.name}/"
            " (.ci/run installs it: python -m venv .ls-venv &&"
            " .ls-venv/bin/python -m pip install 'label-studio>=1.23,<1.24' 'sentry-sdk<3')")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def running_label_studio(data_dir: Path) -> Iterator[tuple[str, Path]]:
    """A Label Studio server with users ann and bob in ``data_dir``: its base URL, and its
    local files root (LOCAL_FILES_DOCUMENT_ROOT, ``data_dir`` itself). Stopped on exit."""
    _require_label_studio()
    env = {**os.environ, "LABEL_STUDIO_DISABLE_SIGNUP_WITHOUT_LINK": "true",
           "LABEL_STUDIO_BASE_DATA_DIR": str(data_dir),
           "LOCAL_FILES_SERVING_ENABLED": "true", "LOCAL_FILES_DOCUMENT_ROOT": str(data_dir)}
    env.pop("CI", None)  # Label Studio reads CI itself; it must not change how it starts
    log = (data_dir / "server.log").open("w")
    # Each command boots Django and checks every migration: ann's init makes the
    # database and the organisation, and the server's start adds bob to it.
    email, password, token = ANN
    subprocess.run(
        [str(LABEL_STUDIO), "init", "--data-dir", str(data_dir), "--username", email,
         "--password", password, "--user-token", token, "--enable-legacy-api-token"],
        env=env, stdout=log, stderr=subprocess.STDOUT, check=True, timeout=INIT_TIMEOUT,
        stdin=subprocess.DEVNULL,
    )
    email, password, token = BOB
    port = _free_port()
    server = subprocess.Popen(
        [str(LABEL_STUDIO), "start", "--data-dir", str(data_dir), "--internal-host",
         "127.0.0.1", "--port", str(port), "--no-browser", "--username", email,
         "--password", password, "--user-token", token],
        env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if server.poll() is not None:
                pytest.fail(f"Label Studio exited: {(data_dir / 'server.log').read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{base}/api/version", timeout=5):
                    break
            except (urllib.error.URLError, OSError):
                if time.monotonic() > deadline:
                    pytest.fail(f"Label Studio did not answer within {START_TIMEOUT} s")
                time.sleep(0.5)
        yield base, data_dir
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=30)
        log.close()


def api_call(base: str, method: str, path: str, token: str, body: object = None) -> Any:
    """One call of Label Studio's REST API with a user's legacy token."""
    request = urllib.request.Request(
        base + path, method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        return json.loads(response.read() or b"null")


def api_get(base: str, path: str, token: str) -> tuple[int, str, bytes]:
    """GET ``path`` with a user's token: status, content type and body."""
    request = urllib.request.Request(base + path, headers={"Authorization": f"Token {token}"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return response.status, response.headers.get("Content-Type", ""), response.read()
