"""Concurrency: reviewers labelling at once while the CLI ingests, against the real dashboard.

DuckDB lets one process at a time hold the store file. The dashboard keeps
its connections short and waits a bounded time for the lock; the CLI's
``store.connect`` retries too. So the ingest of a new week, several
reviewers in browsers on two dashboard servers and eight more reviewers on
the dashboard's own write path all share the file, and the tests check that
every label lands exactly once, the ingest completes, nobody sees a raw lock
error, and the store is whole afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from crash import write_big_parquet
from fieldtrust.dashboard import data, state
from fieldtrust.labels.assignment import next_items
from fieldtrust.labels.verdicts import record_verdict
from fieldtrust.store.verify import verify_history
from rel_store import dashboard_as, record_figure

from fieldtrust import store
from fieldtrust.errors import StoreLockedError
from tests.beside import CHROMIUM
from tests.conftest import file_rows, store_held, table_fingerprint
from tests.served import SCRIPT_RUNNING, QuietClock

ROOT = Path(__file__).resolve().parents[2]


#: The new week the ingests add (2026-W49) may lie ahead of the clock: accept it.
FUTURE_WEEK_OK = {"FIELDTRUST_FUTURE_DAYS": "3650"}


def _week_49(folder: Path, rows: int) -> Path:
    """The new week the ingests add (2026-W49): ``rows`` extractions in one Parquet file."""
    return write_big_parquet(folder / "week 49.parquet", rows, week_start="2026-11-30",
                             prefix="w49-")


def _labels_by(path: Path, reviewer: str) -> int:
    return int(file_rows(path, "SELECT count(*) FROM labels WHERE reviewer = ?", [reviewer])[0][0])


def test_a_verdict_while_the_store_is_busy_gives_a_friendly_message(
    populated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = dashboard_as(populated, monkeypatch, "ben")
    at.switch_page("app_pages/review.py").run()
    assert not at.exception
    before = _labels_by(populated, "ben")

    with store_held(populated):
        at.button(key=state.REVIEW_CORRECT).click().run()
        assert not at.exception, at.exception[0].message
        shown = [w.value for w in at.warning] + [e.value for e in at.error]
        assert any("busy" in text for text in shown), shown
        assert not any("Could not set lock" in text or "IOException" in text for text in shown)

    # Free again: the reviewer presses the key once more and the label lands once.
    at.run()
    at.button(key=state.REVIEW_CORRECT).click().run()
    assert not at.exception
    assert any("Recorded **correct**" in s.value for s in at.success)
    assert _labels_by(populated, "ben") == before + 1
    con = store.connect(populated, read_only=True)
    try:
        table_fingerprint(con)  # every table still reads
    finally:
        con.close()


def test_a_demo_user_picked_while_the_store_is_busy_is_kept(
    populated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pick arrives in a run that ends on the busy warning: the next run acts as ben."""
    at = dashboard_as(populated, monkeypatch)
    assert at.selectbox(key=state.AUTH_DEMO_USER).value != "ben"
    at.switch_page("app_pages/review.py")
    with store_held(populated):
        at.selectbox(key=state.AUTH_DEMO_USER).set_value("ben").run()
        assert any("The store is busy" in w.value for w in at.warning)
    at.run()
    assert at.selectbox(key=state.AUTH_DEMO_USER).value == "ben"
    before = _labels_by(populated, "ben")
    at.button(key=state.REVIEW_CORRECT).click().run()
    assert _labels_by(populated, "ben") == before + 1


def test_a_verdict_saved_just_before_the_store_got_busy_still_says_saved(
    populated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The write lands, then the page's next read finds the store busy: both are said."""
    at = dashboard_as(populated, monkeypatch, "ben")
    at.switch_page("app_pages/review.py").run()
    # What the review page leaves for the next run after a verdict is saved.
    at.session_state[state.REVIEW_FLASH] = ("success", "Recorded **correct** for doc1 · total.")
    with store_held(populated):
        at.run()
        assert not at.exception
        assert any("The store is busy" in w.value for w in at.warning)
        assert [s.value for s in at.success] == ["Recorded **correct** for doc1 · total."]
    at.run()
    assert not [s.value for s in at.success]  # said once, not again on the next run


def test_a_busy_moment_does_not_change_who_the_demo_user_is(
    populated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The page drawn while the store is busy has no picker; the next must still act as ben."""
    at = dashboard_as(populated, monkeypatch)
    at.selectbox(key=state.AUTH_DEMO_USER).set_value("ben").run()
    at.switch_page("app_pages/review.py").run()
    with store_held(populated):
        at.run()
        assert any("The store is busy" in w.value for w in at.warning)
    at.run()
    assert at.selectbox(key=state.AUTH_DEMO_USER).value == "ben"
    before = (_labels_by(populated, "ben"), _labels_by(populated, "quinn"))
    at.button(key=state.REVIEW_CORRECT).click().run()
    assert (_labels_by(populated, "ben"), _labels_by(populated, "quinn")) == (
        before[0] + 1, before[1])


# --- the real servers, browsers, threads and a CLI ingest, all at once ---------------------------

THREAD_REVIEWERS = tuple(f"rev{i}" for i in range(1, 9))
BROWSER_REVIEWERS = ("ana", "ben", "chloe")
THREAD_LABELS = 5
BROWSER_LABELS = 2
NEW_WEEK_ROWS = 200_000
RAW_ERRORS = ("Could not set lock", "Conflicting lock", "IOException", "Traceback",
              "TransactionException", "ConstraintException")


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def _serving(db: Path, folder: Path, count: int) -> Iterator[list[tuple[str, Path]]]:
    """``count`` `fieldtrust serve` processes on ``db``, started together; (url, log) each."""
    processes = []
    try:
        for _ in range(count):
            port = _free_port()
            log_path = folder / f"serve-{port}.log"
            with log_path.open("wb") as log:
                process = subprocess.Popen(
                    [sys.executable, "-m", "fieldtrust.cli.main", "--db", str(db), "serve",
                     "--demo", "--port", str(port), "--address", "127.0.0.1"],
                    stdout=log, stderr=subprocess.STDOUT, cwd=folder,
                    env={**os.environ, "PYTHONPATH": str(ROOT)},
                )
            processes.append((process, f"http://127.0.0.1:{port}", log_path))
        for process, url, log_path in processes:
            _wait_healthy(process, url, log_path)
        yield [(url, log_path) for _, url, log_path in processes]
    finally:
        for process, _, _ in processes:
            process.send_signal(signal.SIGTERM)
        for process, _, _ in processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _wait_healthy(process: subprocess.Popen[bytes], url: str, log_path: Path) -> None:
    deadline = time.monotonic() + 180
    while True:
        assert process.poll() is None, log_path.read_text(errors="replace")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            assert time.monotonic() < deadline, "the dashboard never became healthy"
            time.sleep(0.3)


@dataclass
class Reviewer:
    """What one simulated reviewer did and saw."""

    name: str
    recorded: list[tuple[str, str]] = field(default_factory=list)  # (extraction, label id)
    busy: int = 0  # friendly "store is busy" messages seen
    raw: list[str] = field(default_factory=list)  # anything else: must stay empty
    started: float = 0.0
    ended: float = 0.0


def _thread_reviewer(reviewer: Reviewer, sample_id: str, stop: str | None = None,
                     pause: float = 0.0) -> None:
    """A reviewer on the dashboard's own write path (dashboard.data.write), retrying when busy.

    Labels :data:`THREAD_LABELS` items, and goes on until the file ``stop`` exists if
    given, ``pause`` seconds between items (a person reading the document).
    """
    reviewer.started = time.monotonic()

    def patiently(call: Any) -> Any:
        for _ in range(200):
            try:
                return call()
            except StoreLockedError as exc:
                assert "busy" in data.busy_message(exc)
                reviewer.busy += 1
                time.sleep(0.2)
        raise AssertionError("the store stayed busy for minutes")

    try:
        while len(reviewer.recorded) < THREAD_LABELS or (stop and not Path(stop).exists()):
            items = patiently(lambda: data.write(next_items, reviewer.name, sample_id, count=1))
            if not items:
                break
            item = items[0]
            label = patiently(lambda item=item: data.write(
                record_verdict, actor=reviewer.name, extraction_id=item.extraction_id,
                verdict="correct", sample_id=item.sample_id, review_round=item.review_round))
            reviewer.recorded.append((item.extraction_id, label.label_id))
            time.sleep(pause)
    except Exception as exc:
        reviewer.raw.append(f"{type(exc).__name__}: {exc}")
    reviewer.ended = time.monotonic()


async def _settled(page: Any, timeout: float = 180.0) -> None:
    """Wait until Streamlit has finished running the script (quiet for 1 s)."""
    await page.wait_for_selector("[data-testid='stApp']", timeout=timeout * 1000)
    clock = QuietClock(1.0)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if clock.settled(await page.evaluate(SCRIPT_RUNNING)):
            return
        await asyncio.sleep(0.2)
    raise AssertionError("a page kept running for minutes")


async def _look(page: Any, reviewer: Reviewer) -> str:
    """The page's text; raw errors on it are recorded."""
    text = await page.inner_text("body")
    if await page.query_selector("[data-testid='stException']"):
        reviewer.raw.append("stException: " + text[:500])
    reviewer.raw.extend(f"{word} on the page" for word in RAW_ERRORS if word in text)
    return str(text)


async def _when_free(page: Any, reviewer: Reviewer) -> str:
    """The page's text once it is not the busy warning (pressing R reruns, as a person would)."""
    for _ in range(120):
        text = await _look(page, reviewer)
        if "The store is busy" not in text:
            return text
        reviewer.busy += 1
        await asyncio.sleep(1.0)
        await page.locator("body").press("r")
        await _settled(page)
    raise AssertionError(f"{reviewer.name}: the store stayed busy for minutes")


async def _browser_reviewer(context: Any, url: str, reviewer: Reviewer) -> None:
    """A reviewer in a browser: picks themselves, presses 1 (Correct) on each item."""
    reviewer.started = time.monotonic()
    page = await context.new_page()
    page.set_default_timeout(180_000)
    await page.goto(f"{url}/review")
    await _settled(page)
    await _when_free(page, reviewer)
    await page.get_by_label("Act as (demo)").click()
    await page.get_by_role("option", name=f"{reviewer.name} (reviewer)").click()
    await _settled(page)
    attempts = 0
    while len(reviewer.recorded) < BROWSER_LABELS and attempts < 40:
        attempts += 1
        await _when_free(page, reviewer)
        acting_as = await page.get_by_label("Act as (demo)").input_value()
        if acting_as != f"{reviewer.name} (reviewer)":
            reviewer.raw.append(f"{reviewer.name} is acting as {acting_as!r} now")
            break
        heading = (await page.locator("[data-testid='stMain'] h3").first.inner_text()).strip()
        doc = await page.locator("code").filter(has_text=re.compile(r"^doc\d+$")).first.inner_text()
        field_name = heading.split("·")[-1].strip()
        await page.locator("h1").first.click()
        await page.keyboard.press("1")
        confirmation = f"Recorded correct for {doc} · {field_name}"
        await page.wait_for_function(
            "([done, busy]) => document.body.innerText.includes(done)"
            " || document.body.innerText.includes(busy)",
            arg=[confirmation, "The store is busy"], timeout=180_000)
        await _settled(page)
        if confirmation in await _look(page, reviewer):
            reviewer.recorded.append((f"{doc}/{field_name}", ""))
        else:
            reviewer.busy += 1  # not recorded: the next round presses 1 again
    await page.close()
    reviewer.ended = time.monotonic()


async def _browsers(urls: list[str], reviewers: list[Reviewer]) -> None:
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=["--headless", "--no-sandbox", "--disable-gpu",
                  "--disable-background-networking"])
        try:
            contexts = [await browser.new_context(viewport={"width": 1300, "height": 900})
                        for _ in reviewers]
            await asyncio.gather(*(
                _browser_reviewer(context, urls[i % len(urls)], reviewer)
                for i, (context, reviewer) in enumerate(zip(contexts, reviewers, strict=True))
            ))
        finally:
            await browser.close()


@pytest.mark.soak  # about 2 minutes on 2 busy cores, in every run; `pytest -m soak` runs it alone
@pytest.mark.browser
@pytest.mark.usefixtures("chromium")
def test_reviewers_on_two_dashboards_and_a_cli_ingest_share_the_store(
    populated: Path, sample_id: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FIELDTRUST_DB", str(populated))
    new_week = _week_49(tmp_path, NEW_WEEK_ROWS)
    con = store.connect(populated, read_only=True)
    try:
        before = {name: _count(con, "SELECT count(*) FROM labels WHERE reviewer = ?", [name])
                  for name in (*THREAD_REVIEWERS, *BROWSER_REVIEWERS)}
        extractions_before = _count(con, "SELECT count(*) FROM extractions")
    finally:
        con.close()

    threads = [Reviewer(name) for name in THREAD_REVIEWERS]
    browsers = [Reviewer(name) for name in BROWSER_REVIEWERS]
    with _serving(populated, tmp_path, 2) as [(first, log1), (second, log2)]:
        workers = [threading.Thread(target=_thread_reviewer, args=(r, sample_id)) for r in threads]
        for worker in workers:
            worker.start()
        ingest_started = time.monotonic()
        ingest = subprocess.Popen(
            [sys.executable, "-m", "fieldtrust.cli.main", "--db", str(populated), "ingest",
             "--json", "--quiet", str(new_week)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": str(ROOT), **FUTURE_WEEK_OK},
        )
        finished: dict[str, Any] = {}

        def wait_for_ingest() -> None:
            finished["out"], finished["err"] = ingest.communicate(timeout=600)
            finished["at"] = time.monotonic()

        watcher = threading.Thread(target=wait_for_ingest)
        watcher.start()
        asyncio.run(_browsers([first, second], browsers))
        for worker in [*workers, watcher]:
            worker.join(timeout=600)
        logs = log1.read_text(errors="replace") + log2.read_text(errors="replace")
    out, err, ingest_ended = finished["out"], finished["err"], finished["at"]

    # The ingest completed, with clean JSON on stdout, despite the dashboards and reviewers.
    assert ingest.returncode == 0, err
    assert json.loads(out)[0]["rows_added"] == NEW_WEEK_ROWS
    # Nobody saw a raw error; the servers logged none.
    everyone = [*threads, *browsers]
    assert [r.raw for r in everyone] == [[] for _ in everyone]
    assert not [word for word in RAW_ERRORS if word in logs], logs[-3000:]
    # Everyone got their work done, and worked while the ingest ran.
    assert all(len(r.recorded) == THREAD_LABELS for r in threads), [r.recorded for r in threads]
    assert all(len(r.recorded) == BROWSER_LABELS for r in browsers)
    assert min(r.started for r in threads) < ingest_ended
    assert max(r.ended for r in threads) > ingest_started

    con = store.connect(populated)  # opens read-write: no lock left behind, WAL replayed
    try:
        assert _count(con, "SELECT count(*) FROM extractions") == (
            extractions_before + NEW_WEEK_ROWS)
        for reviewer in threads:  # every label exactly once, with the id the writer returned
            stored = {row[0] for row in con.execute(
                "SELECT label_id FROM labels WHERE reviewer = ?", [reviewer.name]).fetchall()}
            assert {label for _, label in reviewer.recorded} <= stored
            assert len(stored) - before[reviewer.name] == THREAD_LABELS
        for reviewer in browsers:
            added = _count(con, "SELECT count(*) FROM labels WHERE reviewer = ?",
                           [reviewer.name]) - before[reviewer.name]
            assert added == BROWSER_LABELS, (reviewer.name, added, reviewer.recorded)
        assert _count(con, """
            SELECT count(*) FROM (
                SELECT extraction_id, review_round FROM labels l
                WHERE NOT EXISTS (SELECT 1 FROM labels s WHERE s.supersedes = l.label_id)
                GROUP BY ALL HAVING count(*) > 1)""") == 0  # never two live labels per round
        check = verify_history(con)
        assert check.intact, check.summary()
        first_read = table_fingerprint(con)
        con.execute("CHECKPOINT")
        assert table_fingerprint(con) == first_read
    finally:
        con.close()
    record_figure("concurrency", {
        "thread_reviewers": len(threads), "browser_reviewers": len(browsers),
        "dashboard_servers": 2, "labels": sum(len(r.recorded) for r in everyone),
        "busy_messages_seen": sum(r.busy for r in everyone),
        "ingest_rows": NEW_WEEK_ROWS,
        "ingest_seconds_including_start_up": round(ingest_ended - ingest_started, 1),
        "reviewing_seconds": round(max(r.ended for r in everyone)
                                   - min(r.started for r in everyone), 1),
    })


def _count(con: Any, sql: str, params: list[Any] | None = None) -> int:
    return int(con.execute(sql, params or []).fetchall()[0][0])


# --- the same without browsers, for every CI run -------------------------------------------------

SECOND_PROCESS = """
import json, sys, threading
sys.path.insert(0, sys.argv[3])
from test_concurrency import Reviewer, _thread_reviewer
reviewers = [Reviewer(name) for name in sys.argv[2].split(",")]
workers = [threading.Thread(target=_thread_reviewer, args=(r, sys.argv[1], sys.argv[4], 0.3))
           for r in reviewers]
for worker in workers:
    worker.start()
for worker in workers:
    worker.join()
print(json.dumps([[r.name, r.recorded, r.busy, r.raw] for r in reviewers]))
"""
CI_WEEK_ROWS = 100_000


@pytest.mark.slow
def test_eight_reviewers_in_two_processes_and_a_cli_ingest_share_the_store(
    populated: Path, sample_id: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Four reviewers here, four in a second process (two dashboards' write paths), an ingest."""
    monkeypatch.setenv("FIELDTRUST_DB", str(populated))
    new_week = _week_49(tmp_path, CI_WEEK_ROWS)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FIELDTRUST_DB": str(populated)}
    stop = tmp_path / "ingest finished"  # reviewers keep labelling until the ingest is done
    here = [Reviewer(name) for name in THREAD_REVIEWERS[:4]]
    there = subprocess.Popen(
        [sys.executable, "-c", SECOND_PROCESS, sample_id, ",".join(THREAD_REVIEWERS[4:]),
         str(Path(__file__).parent), str(stop)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=env)
    workers = [threading.Thread(target=_thread_reviewer, args=(r, sample_id, str(stop), 0.3))
               for r in here]
    for worker in workers:
        worker.start()
    ingest = subprocess.Popen(
        [sys.executable, "-m", "fieldtrust.cli.main", "--db", str(populated), "ingest",
         "--json", str(new_week)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
        env={**env, **FUTURE_WEEK_OK})
    out, err = ingest.communicate(timeout=600)
    stop.touch()
    ingest_done = time.monotonic()
    for worker in workers:
        worker.join(timeout=600)
    second_out, second_err = there.communicate(timeout=600)

    assert ingest.returncode == 0, err
    assert json.loads(out)[0]["rows_added"] == CI_WEEK_ROWS
    assert there.returncode == 0, second_err
    reviewers = here + [Reviewer(name, [tuple(x) for x in recorded], busy, raw)
                        for name, recorded, busy, raw in json.loads(second_out)]
    assert [r.raw for r in reviewers] == [[] for _ in reviewers]
    assert all(len(r.recorded) >= THREAD_LABELS for r in reviewers)
    assert all(r.ended >= ingest_done for r in here)  # they labelled on through the ingest
    con = store.connect(populated)
    try:
        for reviewer in reviewers:  # exactly the labels each writer was told it wrote
            stored = {x for (x,) in con.execute(
                "SELECT label_id FROM labels WHERE reviewer = ?", [reviewer.name]).fetchall()}
            assert stored == {label for _, label in reviewer.recorded}
        labelled = con.execute(
            "SELECT extraction_id, review_round, reviewer FROM labels WHERE reviewer LIKE 'rev%'"
        ).fetchall()
        rounds = [(extraction, rnd) for extraction, rnd, _ in labelled]
        total = sum(len(r.recorded) for r in reviewers)
        assert len(rounds) == len(set(rounds)) == total  # no item twice in one round
        people = [(extraction, who) for extraction, _, who in labelled]
        assert len(people) == len(set(people))  # double review always by two people
        assert _count(con, "SELECT count(*) FROM extractions WHERE extraction_id LIKE 'w49-%'"
                      ) == CI_WEEK_ROWS
        check = verify_history(con)  # one history chain, every label in it once
        assert check.intact, check.summary()
    finally:
        con.close()
    record_figure("concurrency_ci", {"reviewers": 8, "processes": 2,
                                     "labels": total, "ingest_rows": CI_WEEK_ROWS,
                                     "busy_messages_seen": sum(r.busy for r in reviewers)})
