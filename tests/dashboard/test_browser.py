"""End to end: `fieldtrust serve` on a demo store, driven by Playwright in headless Chromium.

A reviewer labels three items with the keyboard and a manager approves a
candidate; the test then reads both back from the DuckDB file. A screenshot
of every page lands in test-artifacts/ (gitignored) for a person to look at.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fieldtrust import store
from tests.beside import CHROMIUM
from tests.dashboard.conftest import settle_disagreements
from tests.served import serving, settle

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
PAGES = {"overview": "", "calibration": "calibration", "audit": "audit", "review": "review",
         "automation": "automation"}

#: Tabs whose content is screenshotted too.
TABS = {"audit": ("Labelling progress", "Adjudication", "Error types", "Trend and alerts"),
        "review": ("Priority queue",)}

pytestmark = [
    pytest.mark.browser,
    pytest.mark.usefixtures("chromium"),  # first: no server starts for a skipped test
]


@pytest.fixture
def server(demo_db: Path, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """`fieldtrust serve --demo` on a private demo store; yields (url, db path)."""
    with serving(demo_db, tmp_path, "--demo") as (port, _):  # the default address: 127.0.0.1
        yield f"http://127.0.0.1:{port}", demo_db


@pytest.fixture
def page() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        tab = browser.new_page(viewport={"width": 1400, "height": 1000})
        tab.set_default_timeout(120_000)
        yield tab
        browser.close()


def _settle(page: Any, timeout: float = 240.0) -> None:
    """Wait until Streamlit has finished running the script; a screenshot if it never does."""
    try:
        settle(page, timeout)
    except AssertionError:
        page.screenshot(path=str(ARTIFACTS / "stuck.png"), full_page=True)
        raise


def _no_exception(page: Any) -> None:
    errors = page.query_selector_all("[data-testid='stException']")
    assert not errors, errors[0].inner_text()


def _act_as(page: Any, label: str) -> None:
    """Pick a user in the demo-mode sidebar picker."""
    page.get_by_label("Act as (demo)").click()
    page.get_by_role("option", name=label).click()
    _settle(page)


def _shot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def test_every_page_then_label_by_keyboard_and_approve(
    server: tuple[str, Path], page: Any
) -> None:
    url, db = server
    for name, path in PAGES.items():
        page.goto(f"{url}/{path}")
        _settle(page)
        _no_exception(page)
        _shot(page, name)

    # A reviewer labels three items with the keyboard: "1" is Correct.
    page.goto(f"{url}/review")
    _settle(page)
    _act_as(page, "ana (reviewer)")
    shown = []
    for _ in range(3):
        heading = page.locator("[data-testid='stMain'] h3").first.inner_text()
        document = page.locator("code").filter(has_text=re.compile(r"^demo-\d+$")).first
        shown.append((heading, document.inner_text()))
        page.locator("h1").click()  # focus the page, not a text field
        page.keyboard.press("1")
        page.get_by_text("Recorded correct").first.wait_for()
        _settle(page)
        _no_exception(page)
    assert len(set(shown)) == 3, "each verdict moved on to a new item"
    _shot(page, "review-after-labelling")

    # The QA lead settles the disagreements waiting (an approval waits for them); then a
    # manager approves the first candidate with a comment.
    assert settle_disagreements(db) > 0
    page.goto(f"{url}/automation")
    _settle(page)
    _act_as(page, "maya (manager)")
    page.get_by_label("Comment").fill("approved in the end-to-end test")
    page.get_by_role("button", name="Approve").click()
    page.get_by_role("button", name="Confirm approve").click()
    page.get_by_text("approve of").first.wait_for()
    _settle(page)
    _no_exception(page)
    _shot(page, "automation-after-approval")

    # Read both back (read-only: a reader does not block the server, nor it us).
    con = store.connect(db, read_only=True)
    try:
        labels = con.execute(
            "SELECT count(*) FROM labels l JOIN assignments a USING (extraction_id, review_round)"
            " WHERE l.reviewer = 'ana' AND a.reviewer = 'ana' AND l.verdict = 'correct'"
        ).fetchall()
        decisions = con.execute(
            "SELECT d.action, d.decided_by, d.comment, d.threshold, e.payload_json"
            " FROM decisions d JOIN evidence_snapshots e USING (evidence_id)"
        ).fetchall()
    finally:
        con.close()
    assert labels == [(3,)]
    assert len(decisions) == 1
    action, who, comment, threshold, payload = decisions[0]
    assert (action, who, comment) == ("approve", "maya", "approved in the end-to-end test")
    assert f'"threshold":{threshold}' in payload

    # Last, the content of every tab (a page that never finishes fails here, after the writes).
    for name, tabs in TABS.items():
        page.goto(f"{url}/{PAGES[name]}")
        _settle(page)
        for tab in tabs:
            page.get_by_role("tab", name=tab).click()
            _settle(page)
            _no_exception(page)
            _shot(page, f"{name}-{tab.lower().replace(' ', '-')}")


def test_the_served_dashboard_runs_on_the_settings_serve_resolved(
    demo_db: Path, tmp_path: Path, page: Any
) -> None:
    # `fieldtrust --config team.toml serve`: before, the CLI said 99% and the server,
    # reading the settings again without the file, 95%.
    team = tmp_path / "team.toml"
    team.write_text("[fieldtrust]\ntarget = 0.99\n")
    with serving(demo_db, tmp_path, "--demo", options=("--config", str(team))) as (port, _):
        team.write_text("[fieldtrust]\ntarget = 0.5\n")  # the server does not read it again
        page.goto(f"http://127.0.0.1:{port}")
        _settle(page)
        _no_exception(page)
        shown = page.inner_text("[data-testid='stMain']")
        assert re.search(r"\d+ strata below 99%", shown), shown[:2000]


def test_a_reviewer_undoes_a_slip_by_keyboard_and_everything_fits_the_window(
    server: tuple[str, Path], page: Any
) -> None:
    url, db = server
    page.goto(f"{url}/review")
    _settle(page)
    _act_as(page, "ana (reviewer)")
    # At 1400 x 1000 the verdict buttons and the page image are on screen unscrolled.
    correct = page.get_by_role("button", name=re.compile(r"^Correct")).first.bounding_box()
    image = page.locator("[data-testid='stMain'] [data-testid='stImage'] img").first
    image.wait_for()
    shown = image.bounding_box()
    assert correct is not None and correct["y"] + correct["height"] <= 1000, correct
    assert shown is not None and shown["y"] + shown["height"] <= 1000, shown

    page.locator("h1").click()  # focus the page, not a text field
    page.keyboard.press("1")
    page.get_by_text("Recorded correct").first.wait_for()
    _settle(page)
    page.locator("h1").click()
    page.keyboard.press("u")
    page.get_by_text("Changing your verdict").first.wait_for()
    _settle(page)
    _no_exception(page)
    _shot(page, "review-changing-a-verdict")
    page.locator("h1").click()
    page.keyboard.press("3")
    page.get_by_text("Changed your verdict").first.wait_for()
    _settle(page)
    _no_exception(page)

    con = store.connect(db, read_only=True)
    try:
        chain = con.execute(
            "SELECT n.verdict, o.verdict, n.reviewer FROM labels n JOIN labels o"
            " ON n.supersedes = o.label_id WHERE n.reviewer = 'ana'"
            " AND n.labeled_at > now() - INTERVAL 1 HOUR"
        ).fetchall()
    finally:
        con.close()
    assert chain == [("unclear", "correct", "ana")]
