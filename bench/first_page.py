"""``python -m bench.first_page --rows 1M``: a fresh browser session's first page, in Chromium.

Starts one ``fieldtrust serve --demo`` on a copy of a benchmark store (as
:mod:`bench.review_sessions` does) and opens the dashboard ``--sessions``
times, each in a new browser context (no cookies, no cache: a reviewer's
first visit), one after the other, so the first meets a server that has
served nobody yet (the browser itself has shown a page of its own first, as a
person's running browser has). A first page is from asking for the URL to the moment
Streamlit's script state says the run is over and stays so (nothing drawn
after that), with the sidebar's pages shown: everything a person waits for,
the page's JavaScript and fonts included.

Needs Debian's Chromium at ``/usr/bin/chromium`` (``CHROMIUM`` to point
elsewhere); Playwright drives it, as the browser tests do.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from bench.review_keys import benchmark_store, figures, prepare_copy, store_arguments
from bench.review_sessions import serving
from bench.run import parse_size

if TYPE_CHECKING:
    from playwright.sync_api import Browser

#: The issue's goal for a fresh session's first page, in seconds.
GOAL = 3.0
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
#: True while Streamlit runs the script or still draws a skeleton (its own script state).
_RUNNING = (
    "() => document.querySelector('[data-testid=\"stApp\"]')?.dataset.testScriptState"
    " !== 'notRunning'"
    " || !!document.querySelector('[data-testid=\"stSkeleton\"]')"
    " || !document.querySelector('[data-testid=\"stSidebarNav\"]')"
)
#: How long the page must stay quiet after a run for the run to count as the last one.
_QUIET = 0.5
_TIMEOUT = 120.0


def first_page(browser: Browser, url: str) -> float:
    """Seconds from asking for ``url`` in a fresh context to the end of its last run."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        page = context.new_page()
        started = time.perf_counter()
        page.goto(url, wait_until="commit", timeout=_TIMEOUT * 1000)
        ended: float | None = None
        while time.perf_counter() - started < _TIMEOUT:
            now = time.perf_counter()
            if page.evaluate(_RUNNING):
                ended = None
            elif ended is None:
                ended = now
            elif now - ended >= _QUIET:
                return ended - started
            time.sleep(0.02)
        raise SystemExit(f"{url} did not settle in {_TIMEOUT:.0f} s")
    finally:
        context.close()


def _warm(browser: Browser) -> None:
    """One page of the browser's own first: a person's browser is running before they visit
    (its processes started, its JavaScript engine loaded), and that is not the dashboard's."""
    context = browser.new_context()
    try:
        context.new_page().goto("data:text/html,<p>ready</p>")
    finally:
        context.close()


def main(argv: list[str] | None = None) -> None:
    parser = store_arguments(__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=5)
    parser.add_argument("--after", type=float, default=0.0,
                        help="seconds between the server answering and the first session"
                             " (people seldom arrive the moment it starts)")
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    rows = parse_size(args.rows)
    source = benchmark_store(Path(args.data), rows, args.seed, args.rows)
    print(f"first pages on {rows:,} rows; load average {os.getloadavg()[0]:.1f} on"
          f" {os.cpu_count()} cores", flush=True)
    with tempfile.TemporaryDirectory(prefix="fieldtrust-first-page-") as folder:
        path, _ = prepare_copy(source, Path(folder), args.seed, ())
        with serving(path, Path(folder)) as server, sync_playwright() as driver:
            browser = driver.chromium.launch(executable_path=CHROMIUM, headless=True)
            try:
                _warm(browser)
                time.sleep(args.after)
                seconds = [first_page(browser, f"http://{server.base}/")
                           for _ in range(args.sessions)]
            finally:
                browser.close()
    print(f"a fresh browser session's first page, one session after the other, the first"
          f" {args.after:.0f} s after the server answered:"
          f" {figures(seconds)}; the first (a server that has served nobody)"
          f" {1000 * seconds[0]:.0f} ms; goal <= {GOAL:.0f} s:"
          f" {'met' if max(seconds) <= GOAL else 'not met'}")


if __name__ == "__main__":
    main()
