"""``python -m bench.review_keys --rows 1M``: a reviewer's key press, alone and among twenty.

The review page's cost of one keyboard verdict on the server, on a copy of a
benchmark store (``python -m bench`` builds them under ``bench/.data/``), with
a week's sample redrawn so every reviewer has open items:

- **One reviewer**: key to next item ready, the way the page does it now
  (:mod:`fieldtrust.dashboard.reviewing`: the verdict, the next screen and its
  document on one connection, the one the dashboard keeps open between writes;
  the page after it rendered in the background while the reviewer reads)
  against the way it did before, in the same process: the verdict on one
  connection, then the whole page again, every cached read
  missed because a new label changes the data version (the sample's progress,
  its cells, the next item on a read-write connection, the item's context and
  location) and the page rendered on the spot.
- **Twenty reviewers** at once, each on its own thread labelling its own
  assigned items, the way a ``serve`` process runs one thread per session,
  through the dashboard's own write path and its one process-wide connection
  lock; each reads for ``--think`` seconds before the next key. Prints p50
  / p95 / max key-to-next, labels written against keys pressed, items
  labelled twice in one round, and busy-store errors.

Server time only: no browser, websocket or Streamlit delta encoding (the
fragment that reruns draws what the callback prepared). Prints the load
average: the machine is shared, so read ratios rather than seconds.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
from fieldtrust.dashboard import data, render, viewer
from fieldtrust.labels.assignment import ReviewItem, current_sample, next_items, sample_progress
from fieldtrust.labels.review_progress import cell_progress, item_context
from fieldtrust.labels.review_screen import review_screen
from fieldtrust.labels.verdicts import record_verdict
from fieldtrust.sampling.draw import draw_sample
from fieldtrust.store.access import grant_role
from fieldtrust.store.locations import Location, document_location, documents_root

from bench.generate import bench_design
from bench.run import parse_size
from fieldtrust import store
from fieldtrust.demo.users import ADMIN, QA_LEAD
from fieldtrust.errors import StoreLockedError

LOCK = threading.Lock()  # the server's one connection at a time
LOCK_WAIT = 4.0


def _connect(path: Path, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    return store.connect(path, read_only=read_only, lock_timeout=LOCK_WAIT)


def _open(con: duckdb.DuckDBPyConnection, path: Path, location: Location | None) -> Any:
    if location is None:
        return None
    return render.open_document(con, location, root=documents_root("", path), store_key=str(path))


def _draw(document: Any, location: Location | None) -> None:
    if isinstance(document, render.Source) and location is not None:
        render.page_image(document, location.page, location.bbox, window=viewer.FIT_ROWS,
                          width=viewer.PAGE_SHOWN_WIDTH)


def _prepare(document: Any, location: Location | None) -> threading.Thread:
    thread = threading.Thread(target=_draw, args=(document, location), daemon=True)
    thread.start()
    return thread


@dataclass
class Reviewer:
    """One session: who, the item on screen, the page being prepared for the next."""

    name: str
    sample: str
    item: ReviewItem | None = None
    preparing: threading.Thread | None = None


def start(path: Path, reviewer: Reviewer) -> None:
    """A first visit: the screen, its page drawn, the next one prepared."""
    with LOCK, _connect(path) as con:
        screen = review_screen(con, reviewer.name, reviewer.sample)
        document = _open(con, path, screen.location)
        upcoming = _open(con, path, screen.upcoming)
    _draw(document, screen.location)
    reviewer.item = screen.item
    reviewer.preparing = _prepare(upcoming, screen.upcoming)


def _verdict(con: duckdb.DuckDBPyConnection, reviewer: Reviewer) -> None:
    item = reviewer.item
    assert item is not None, "nothing left to label: redraw a larger sample"
    record_verdict(con, actor=reviewer.name, extraction_id=item.extraction_id, verdict="correct",
                   sample_id=item.sample_id, review_round=item.review_round)


def key_now(path: Path, reviewer: Reviewer) -> None:
    """One key press as the page does it now: the dashboard's own write path
    (:func:`fieldtrust.dashboard.data.writing`, the store kept open between keys while
    nobody else waits for it), then a draw from the cache."""
    with data.writing(str(path)) as con:
        _verdict(con, reviewer)
        screen = review_screen(con, reviewer.name, reviewer.sample)
        document = _open(con, path, screen.location)
        upcoming = _open(con, path, screen.upcoming)
    if reviewer.preparing is not None:
        reviewer.preparing.join()  # (the reviewer read the item meanwhile: done long ago)
    _draw(document, screen.location)
    reviewer.item = screen.item
    reviewer.preparing = _prepare(upcoming, screen.upcoming)


def key_before(path: Path, reviewer: Reviewer) -> None:
    """One key press as the page did it before: the verdict, then the whole page again."""
    with LOCK, _connect(path) as con:
        _verdict(con, reviewer)
    with LOCK, _connect(path, read_only=True) as con:  # the page run's reads, all missed
        sample = current_sample(con)
        sample_progress(con, sample)
        cell_progress(con, sample)
    with LOCK, _connect(path) as con:
        (nxt,) = next_items(con, reviewer.name, sample, count=1) or (None,)
    if nxt is not None:
        with LOCK, _connect(path, read_only=True) as con:
            item_context(con, nxt.extraction_id, reviewer.name, sample)
            location = document_location(con, nxt.extraction_id)
            document = _open(con, path, location)
        render.PAGES.clear()  # nothing prepared it: rendered on the spot
        _draw(document, location)
    reviewer.item = nxt


def _timed(fn: Callable[[], None]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def p95(seconds: list[float]) -> float:
    """The 95th percentile of ``seconds`` (nearest rank)."""
    ordered = sorted(seconds)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def figures(seconds: list[float]) -> str:
    """Median, p95 and max of ``seconds``, in milliseconds, with their count."""
    ordered = sorted(seconds)
    return (f"median {1000 * statistics.median(ordered):.0f} ms,"
            f" p95 {1000 * p95(ordered):.0f} ms,"
            f" max {1000 * ordered[-1]:.0f} ms (n = {len(ordered)})")


def one_reviewer(path: Path, sample: str, keys: int, think: float) -> None:
    now, before = Reviewer("bench-solo-a", sample), Reviewer("bench-solo-b", sample)
    start(path, now)
    with LOCK, _connect(path) as con:
        (before.item,) = next_items(con, before.name, sample, count=1)
    new_s, old_s = [], []
    for _ in range(keys):  # alternated, so both see the same load
        new_s.append(_timed(lambda: key_now(path, now)))
        time.sleep(think)
        old_s.append(_timed(lambda: key_before(path, before)))
        time.sleep(think)
    ratio = statistics.median(new_s) / statistics.median(old_s)
    print(f"one reviewer, key to next item ready (server): now {figures(new_s)}")
    print(f"  before (whole page rerun, page rendered on the spot): {figures(old_s)}")
    print(f"  ratio now / before (medians): {ratio:.2f}")


def label_counts(path: Path, sample: str, reviewers: str = "bench-r%") -> tuple[int, int]:
    """(labels the reviewers named like ``reviewers`` wrote, items of ``sample`` labelled
    twice in one round): a lost key shows in the first, a doubled one in the second."""
    with _connect(path, read_only=True) as con:
        written = con.execute("SELECT count(*) FROM labels WHERE reviewer LIKE ?",
                              [reviewers]).fetchall()[0][0]
        doubled = con.execute(
            "SELECT count(*) FROM (SELECT extraction_id, review_round FROM labels"
            " WHERE sample_id = ? AND supersedes IS NULL GROUP BY ALL HAVING count(*) > 1)",
            [sample]).fetchall()[0][0]
    return int(written), int(doubled)


def twenty(path: Path, sample: str, sessions: int, keys: int, think: float) -> None:
    people = [Reviewer(f"bench-r{i:02d}", sample) for i in range(sessions)]
    for person in people:
        start(path, person)
    waits: list[float] = []
    locked: list[str] = []
    gate = threading.Barrier(sessions)

    def session(person: Reviewer) -> None:
        gate.wait()
        time.sleep(think * people.index(person) / sessions)  # keys not all at one instant
        for _ in range(keys):
            try:
                waits.append(_timed(lambda: key_now(path, person)))
            except StoreLockedError as exc:
                locked.append(str(exc))
            time.sleep(think)

    threads = [threading.Thread(target=session, args=(p,)) for p in people]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    written, doubled = label_counts(path, sample)
    print(f"{sessions} reviewers at once, {keys} keys each, {think:.1f} s reading each item,"
          f" {wall:.0f} s: key to next item {figures(waits)}")
    print(f"  labels written {written:,} of {sessions * keys:,} keys pressed; items labelled"
          f" twice in one round: {doubled}; busy-store errors: {len(locked)}")


def benchmark_store(data: Path, rows: int, seed: int, size: str) -> Path:
    """The store ``python -m bench`` built for ``rows`` (``size`` as typed), or exit saying how
    to build it."""
    source = Path(data) / f"rows-{rows}-seed-{seed}" / "store.duckdb"
    if not source.exists():
        raise SystemExit(f"no benchmark store at {source}: run python -m bench --rows {size} first")
    return source


def prepare_copy(source: Path, folder: Path, seed: int,
                 reviewers: Iterable[str]) -> tuple[Path, str]:
    """Copy ``source`` and its documents into ``folder``, redraw the newest week's sample (so
    every reviewer has open items) and make ``reviewers`` reviewers: (the copy, the sample)."""
    path = folder / "store.duckdb"
    shutil.copy(source, path)
    shutil.copytree(source.parent / "chunks", folder / "chunks", dirs_exist_ok=True)
    with _connect(path) as con:
        week = con.execute("SELECT max(week) FROM audit_samples").fetchall()[0][0]
        sample = draw_sample(con, week, bench_design(), seed=seed + 1, actor=QA_LEAD,
                             redraw=True).sample_id
        for name in reviewers:
            grant_role(con, ADMIN, name, "reviewer")
    return path, sample


def store_arguments(description: str) -> argparse.ArgumentParser:
    """A parser with the flags naming a benchmark store (the served benchmarks take them)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--rows", default="1M", help="benchmark store size (built by python -m"
                        " bench --rows N)")
    parser.add_argument("--data", default=str(Path(__file__).parent / ".data"))
    parser.add_argument("--seed", type=int, default=7)
    return parser


def reviewers_arguments(description: str, argv: list[str] | None) -> argparse.Namespace:
    """The flags both review benchmarks take: which store, how many reviewers, how fast."""
    parser = store_arguments(description)
    parser.add_argument("--keys", type=int, default=20, help="key presses per reviewer")
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--think", type=float, default=1.0,
                        help="seconds a reviewer reads an item before the next key")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = reviewers_arguments(__doc__.splitlines()[0], argv)
    rows = parse_size(args.rows)
    source = benchmark_store(Path(args.data), rows, args.seed, args.rows)
    print(f"review keys on {rows:,} rows; load average {os.getloadavg()[0]:.1f} on"
          f" {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory(prefix="fieldtrust-review-keys-") as folder:
        reviewers = ("bench-solo-a", "bench-solo-b",
                     *(f"bench-r{i:02d}" for i in range(args.sessions)))
        path, sample = prepare_copy(source, Path(folder), args.seed, reviewers)
        one_reviewer(path, sample, args.keys, args.think)
        twenty(path, sample, args.sessions, args.keys, args.think)
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
