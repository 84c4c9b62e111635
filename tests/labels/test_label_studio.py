"""The Label Studio round trip against a real Label Studio server on 127.0.0.1.

Label Studio is installed by ``.ci/run`` into a virtualenv of its own
(``.ls-venv``), so its pinned dependencies never touch fieldtrust's. The test
makes two Label Studio users with API tokens (``label-studio init``), starts
the server, creates a project with fieldtrust's labelling config through the
REST API, imports the tasks ``fieldtrust sample --format label-studio`` wrote,
posts annotations as both users (one cancelled), exports the project as JSON
and imports the export into fieldtrust, then checks every label.

Without ``.ls-venv`` the test skips, except in CI (``CI=true``), where it fails.
"""

from __future__ import annotations

import csv
import datetime as dt
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

import duckdb
import pytest
from click.testing import CliRunner
from fieldtrust.labels.label_studio import label_config

from fieldtrust.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]
LABEL_STUDIO = ROOT / ".ls-venv" / "bin" / "label-studio"
WEEK = "2026-W48"
#: (e-mail, password, API token) of the two annotators.
ANN = ("ann@example.com", "Passw0rd-ann", "annToken0123456789")
BOB = ("bob@example.com", "Passw0rd-bob", "bobToken0123456789")
#: Bounds: the first init migrates Label Studio's database (about a minute on two idle
#: cores, several when other test runs share them).
INIT_TIMEOUT = 900
START_TIMEOUT = 180

pytestmark = pytest.mark.slow


def _require_label_studio() -> None:
    if LABEL_STUDIO.exists():
        return
    reason = (f"Label Studio is not installed in {LABEL_STUDIO.parent.parent.name}/"
              " (.ci/run installs it: python -m venv .ls-venv &&"
              " .ls-venv/bin/python -m pip install label-studio)")
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must run the Label Studio round trip: {reason}")
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def label_studio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Label Studio server with users ann and bob; its base URL. Stopped after the module."""
    _require_label_studio()
    data_dir = tmp_path_factory.mktemp("label-studio")
    env = {**os.environ, "LABEL_STUDIO_DISABLE_SIGNUP_WITHOUT_LINK": "true",
           "LABEL_STUDIO_BASE_DATA_DIR": str(data_dir)}
    env.pop("CI", None)  # Label Studio reads CI itself; it must not change how it starts
    log = (data_dir / "server.log").open("w")
    for email, password, token in (ANN, BOB):
        subprocess.run(
            [str(LABEL_STUDIO), "init", "--data-dir", str(data_dir), "--username", email,
             "--password", password, "--user-token", token, "--enable-legacy-api-token"],
            env=env, stdout=log, stderr=subprocess.STDOUT, check=True, timeout=INIT_TIMEOUT,
            stdin=subprocess.DEVNULL,
        )
    port = _free_port()
    server = subprocess.Popen(
        [str(LABEL_STUDIO), "start", "--data-dir", str(data_dir), "--internal-host",
         "127.0.0.1", "--port", str(port), "--no-browser"],
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
        yield base
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=30)
        log.close()


def _api(base: str, method: str, path: str, token: str, body: object = None) -> Any:
    """One call of Label Studio's REST API with a user's legacy token."""
    request = urllib.request.Request(
        base + path, method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        return json.loads(response.read() or b"null")


def _run(db: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, [*args, "--db", str(db)], env={"FIELDTRUST_USER": "quinn"})
    return result.exit_code, result.output


def _choice(name: str, value: str) -> dict[str, Any]:
    return {"from_name": name, "to_name": "value", "type": "choices",
            "value": {"choices": [value]}}


def _text(name: str, value: str) -> dict[str, Any]:
    return {"from_name": name, "to_name": "value", "type": "textarea",
            "value": {"text": [value]}}


def _store(tmp_path: Path) -> Path:
    db = tmp_path / "store.duckdb"
    rows = [{"doc_id": f"d{i}", "doc_type": "invoice", "field": "total", "value": f"{100 + i}.00",
             "confidence": 0.55 + i / 100, "extracted_at": "2026-11-24T10:00:00Z"}
            for i in range(30)]
    source = tmp_path / "extractions.csv"
    with source.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    for args in (["init", "--admin", "quinn"], ["ingest", str(source), "--quiet"],
                 ["users", "grant", "quinn", "qa_lead"]):
        code, out = _run(db, *args)
        assert code == 0, out
    return db


def test_tasks_annotated_in_label_studio_come_back_as_labels(
    label_studio: str, tmp_path: Path
) -> None:
    db = _store(tmp_path)
    tasks_file, config_file = tmp_path / "tasks.json", tmp_path / "config.xml"
    code, out = _run(db, "sample", "--week", WEEK, "--out", str(tasks_file), "--format",
                     "label-studio", "--label-config", str(config_file))
    assert code == 0, out
    tasks = json.loads(tasks_file.read_text())
    assert len(tasks) >= 6 and all("confidence" not in t["data"] for t in tasks)
    assert config_file.read_text() == label_config()

    project = _api(label_studio, "POST", "/api/projects/", ANN[2],
                   {"title": "fieldtrust W48", "label_config": config_file.read_text()})
    imported = _api(label_studio, "POST", f"/api/projects/{project['id']}/import", ANN[2], tasks)
    assert imported["task_count"] == len(tasks)
    listed = _api(label_studio, "GET", f"/api/tasks/?project={project['id']}&page_size=100",
                  ANN[2])
    by_extraction = {t["data"]["extraction_id"]: t["id"] for t in listed["tasks"]}
    ids = [t["data"]["extraction_id"] for t in tasks]
    assert set(by_extraction) == set(ids)

    # ann labels five items (one cancelled), bob reviews two of them blind.
    plan = [
        (ANN, ids[0], [_choice("verdict", "correct")], False, 3.5),
        (ANN, ids[1], [_choice("verdict", "incorrect"), _text("corrected_value", "112.50"),
                       _choice("error_type", "misread_characters")], False, 9.25),
        (ANN, ids[2], [_choice("verdict", "unclear")], False, 4.0),
        (ANN, ids[3], [_choice("verdict", "incorrect")], False, 2.0),  # verdict only
        (ANN, ids[4], [], True, 1.0),  # skipped in Label Studio
        (BOB, ids[0], [_choice("verdict", "correct")], False, 2.5),
        (BOB, ids[1], [_choice("verdict", "correct")], False, 3.0),
    ]
    posted = {}
    for (_, _, token), extraction, result, cancelled, lead in plan:
        answer = _api(label_studio, "POST", f"/api/tasks/{by_extraction[extraction]}/annotations/",
                      token, {"result": result, "was_cancelled": cancelled, "lead_time": lead})
        posted[(token, extraction)] = answer
    users = {_api(label_studio, "GET", "/api/current-user/whoami", token)["email"]: token
             for _, _, token in (ANN, BOB)}
    assert set(users) == {ANN[0], BOB[0]}

    export = _api(label_studio, "GET",
                  f"/api/projects/{project['id']}/export?exportType=JSON", ANN[2])
    export_file = tmp_path / "export.json"
    export_file.write_text(json.dumps(export))

    # A task that is not fieldtrust's is refused by its row, and nothing is written.
    foreign = tmp_path / "mixed.json"
    foreign.write_text(json.dumps([*export, {"id": 999, "data": {"text": "hello"},
                                             "annotations": []}]))
    code, out = _run(db, "labels", "import", str(foreign), "--format", "label-studio")
    assert code == 2
    assert f"row {len(export) + 1} (task 999): not a fieldtrust task" in out
    assert _labels(db) == []

    code, out = _run(db, "labels", "import", str(export_file), "--format", "label-studio")
    assert code == 0, out
    assert "6 labels added" in out and "1 cancelled Label Studio annotations skipped" in out
    assert "1 'incorrect' rows lack an error type or a corrected value" in out

    user_id = {ANN[2]: posted[(ANN[2], ids[0])]["completed_by"],
               BOB[2]: posted[(BOB[2], ids[0])]["completed_by"]}
    expected = []
    for (_, _, token), extraction, result, cancelled, lead in plan:
        if cancelled:
            continue
        picked = {r["from_name"]: (r["value"].get("choices") or r["value"]["text"])[0]
                  for r in result}
        verdict = picked["verdict"]
        corrected = picked.get("corrected_value")
        error_type = picked.get("error_type", "not_recorded" if verdict == "incorrect" else None)
        created = dt.datetime.fromisoformat(
            posted[(token, extraction)]["created_at"].replace("Z", "+00:00")
        ).replace(tzinfo=None)
        expected.append((
            extraction, tasks[ids.index(extraction)]["data"]["sample_id"], verdict, corrected,
            "present" if corrected else None, error_type,
            f"label-studio-user-{user_id[token]}",
            "second" if token == BOB[2] else "primary", created, lead,
        ))
    assert sorted(_labels(db)) == sorted(expected)

    # The double reviews are agreement and adjudication material, as in the dashboard.
    code, out = _run(db, "adjudicate", "--queue", "--json")
    assert code == 0, out
    queue = json.loads(out)
    assert [(q["extraction_id"], q["primary_verdict"], q["second_verdict"]) for q in queue] \
        == [(ids[1], "incorrect", "correct")]
    code, out = _run(db, "verify")
    assert code == 0 and "history intact" in out


def _labels(db: Path) -> list[tuple[Any, ...]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(
            "SELECT l.extraction_id, l.sample_id, l.verdict, l.corrected_value,"
            " l.corrected_status, l.error_type, l.reviewer, l.review_round, l.labeled_at,"
            " t.lead_time_seconds FROM labels l LEFT JOIN label_lead_times t USING (label_id)"
        ).fetchall()
    finally:
        con.close()
