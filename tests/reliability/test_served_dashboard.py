"""A real `fieldtrust serve` in headless Chromium, as a hostile web page or a hostile file sees it.

One server (demo picker, this machine only) on a small store whose document
types, fields and values are links, e-mail addresses and markup. Checked
(issue "hostile conditions, round 2"):

* fault 5: a page on another site, reached through DNS rebinding to
  127.0.0.1 (Chromium's resolver maps ``evil.example`` there), gets no
  dashboard: the server refuses a foreign Host header, HTTP and WebSocket
  alike; the same server answers ``127.0.0.1`` and ``localhost``;
* fault 12: no text from the store becomes a link, an image or markup on the
  Overview or the Review page;
* fault 22: a page asks no outside host for anything (fonts, icons).
"""

from __future__ import annotations

import base64
import datetime as dt
import http.client
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fieldtrust.ingest.extractions import ingest_table
from fieldtrust.labels.assignment import next_items
from fieldtrust.labels.verdicts import record_verdict
from fieldtrust.sampling.draw import draw_sample
from rel_store import DESIGN, QA_LEAD, WEEK_START, build_store, extraction_rows

from fieldtrust import store
from tests.beside import CHROMIUM
from tests.served import free_port, server_env, serving, settle, wait_healthy

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"

#: Text a hostile file puts in the store: each would be a link or markup if rendered.
HOSTILE_DOC_TYPE = "https://evil.example/login"
HOSTILE_FIELD = "www.evil.example"
HOSTILE_VALUES = ("ana@evil.example", "![x](https://evil.example/pixel.png)",
                  "<img src=https://evil.example/i.png>", "[click](https://evil.example)")

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    # One worker runs this module: its module fixtures are built once, not once a worker.
    pytest.mark.xdist_group("served_dashboard"),
    pytest.mark.usefixtures("chromium"),  # first: no server starts for a skipped test
]


def _hostile_store(path: Path) -> None:
    """The reliability store, then a week whose one stratum's names and values are links and
    markup: its sample is the newest (ben reviews it), its labels put it below target (the
    Overview names it)."""
    import pyarrow as pa

    build_store(path)
    monday = WEEK_START + dt.timedelta(days=7)
    rows = extraction_rows(60, seed=5, prefix="h").to_pylist()
    for number, row in enumerate(rows):
        row.update(doc_type=HOSTILE_DOC_TYPE, field=HOSTILE_FIELD,
                   value=HOSTILE_VALUES[number % len(HOSTILE_VALUES)],
                   extracted_at=monday + dt.timedelta(minutes=number))
    con = store.connect(path)
    try:
        ingest_table(con, pa.Table.from_pylist(rows), source="hostile", fmt="test")
        sample = draw_sample(con, "2026-W49", DESIGN, seed=2, actor=QA_LEAD)
        for item in next_items(con, "ben", sample.sample_id, count=6):
            record_verdict(con, actor="ben", extraction_id=item.extraction_id,
                           verdict="incorrect", corrected_value="[x](https://evil.example)",
                           error_type="misread_characters")
    finally:
        con.close()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, Path]]:
    """`fieldtrust serve --demo` on the hostile store; yields (port, the server's log)."""
    folder = tmp_path_factory.mktemp("served")
    _hostile_store(folder / "hostile.duckdb")
    with serving(folder / "hostile.duckdb", folder, "--demo") as served:
        yield served


@pytest.fixture
def browser() -> Iterator[Any]:
    """Headless Chromium whose resolver sends evil.example to this machine (DNS rebinding)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=["--headless", "--no-sandbox", "--disable-gpu",
                  "--disable-background-networking",
                  "--host-resolver-rules=MAP evil.example 127.0.0.1"],
        )
        yield launched
        launched.close()


def _status(port: int, host: str, path: str = "/", *, websocket: bool = False) -> int:
    """The HTTP status the server gives a request naming ``host`` in its Host header."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    headers = {"Host": host}
    if websocket:
        headers.update({
            "Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13",
            "Sec-WebSocket-Key": base64.b64encode(os.urandom(16)).decode(),
            "Origin": f"http://{host}",
        })
    try:
        connection.request("GET", path, headers=headers)
        return connection.getresponse().status
    finally:
        connection.close()


# --- fault 5: a foreign Host header ------------------------------------------------------------


def test_a_page_on_another_site_gets_no_dashboard_through_dns_rebinding(
    served: tuple[int, Path], browser: Any
) -> None:
    port, _ = served
    page = browser.new_page()
    reply = page.goto(f"http://evil.example:{port}/")
    assert reply is not None and reply.status == 400
    assert "answers only its own host names" in page.content()
    assert page.query_selector("[data-testid='stApp']") is None
    # The WebSocket a rebound page would drive the session through, and the app's API.
    assert _status(port, f"evil.example:{port}", "/_stcore/stream", websocket=True) in (400, 403)
    assert _status(port, f"evil.example:{port}", "/_stcore/health") == 400
    assert _status(port, f"localhost:{port + 1}", "/_stcore/health") == 400  # another port
    # The server's own names still work, in the browser too.
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"):
        assert _status(port, host, "/_stcore/health") == 200, host
    own = browser.new_page()
    own.goto(f"http://localhost:{port}/")
    settle(own)
    assert own.get_by_label("Act as (demo)").count() == 1


def test_the_demo_picker_shows_only_to_a_loopback_name_even_without_the_host_check(
    served: tuple[int, Path], browser: Any, tmp_path: Path
) -> None:
    # A dashboard started by plain `streamlit run` has no host check: the page itself
    # still keeps the demo picker to this machine's loopback names.
    _, log_path = served
    db = log_path.parent / "hostile.duckdb"
    bare_port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(ROOT / "dashboard" / "app.py"),
         "--server.headless", "true", "--server.port", str(bare_port),
         "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false",
         "--server.fileWatcherType", "none", "--", "--demo", "--db", str(db)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp_path,
        env=server_env(),
    )
    try:
        wait_healthy(f"http://127.0.0.1:{bare_port}", process)
        rebound = browser.new_page()
        rebound.goto(f"http://evil.example:{bare_port}/")
        settle(rebound)
        assert rebound.get_by_label("Act as (demo)").count() == 0
        assert rebound.get_by_text("Sign-in is not configured").count() == 1
        local = browser.new_page()
        local.goto(f"http://127.0.0.1:{bare_port}/")
        settle(local)
        assert local.get_by_label("Act as (demo)").count() == 1
    finally:
        process.terminate()
        process.wait(timeout=20)


# --- fault 12: text from the store never becomes a link, an image or markup ----------------------

#: The pages, and whom the demo picker acts as on each (ben has hostile items to review).
PAGES = {"": "quinn (qa_lead)", "calibration": "quinn (qa_lead)", "review": "ben (reviewer)",
         "automation": "maya (manager)"}
_FOREIGN = """() => {
    const own = (url) => url.startsWith(location.origin) || url.startsWith('#')
        || url.startsWith('data:') || url.startsWith('blob:') || url.startsWith('about:');
    const links = [...document.querySelectorAll('a[href]')].map(a => a.getAttribute('href'))
        .filter(href => !own(new URL(href, location.href).href) && !href.startsWith('#'));
    const images = [...document.querySelectorAll('img[src]')].map(i => i.src)
        .filter(src => !own(src));
    return {links, images};
}"""


def _act_as(page: Any, label: str) -> None:
    picker = page.get_by_label("Act as (demo)")
    if label.split(" ")[0] in picker.inner_text():
        return
    picker.click()
    page.get_by_role("option", name=label).click()
    settle(page)


def test_text_from_the_store_shows_as_written_and_links_nowhere(
    served: tuple[int, Path], browser: Any
) -> None:
    port, _ = served
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    outside: list[str] = []
    page.on("request", lambda r: outside.append(r.url)
            if not r.url.startswith(("http://localhost", "http://127.0.0.1", "data:", "blob:"))
            else None)
    seen, foreign = "", {}
    for path, user in PAGES.items():
        page.goto(f"http://localhost:{port}/{path}")
        settle(page)
        _act_as(page, user)
        found = page.evaluate(_FOREIGN)
        if found != {"links": [], "images": []}:
            foreign[path or "overview"] = found
        assert not page.query_selector_all("[data-testid='stException']"), path
        seen += page.inner_text("body").replace("\u2060", "") + "\n"
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "hostile-review.png"), full_page=True)
    # No link or image made from the store's text, and (fault 22) no page asked another
    # host for anything (fonts, icons).
    assert (foreign, sorted(set(outside))) == ({}, [])
    # Shown as written: the reviewer reads the text, only never as a link.
    assert HOSTILE_DOC_TYPE in seen and HOSTILE_FIELD in seen
