"""``python -m bench.review_sessions --rows 1M``: twenty reviewers labelling at once through one
real ``fieldtrust serve``.

Where :mod:`bench.review_keys` calls the dashboard's write path from threads,
this starts the product itself (``fieldtrust --db COPY serve --demo``, the
documented command, as a subprocess) on a copy of a benchmark store and
drives it the way reviewers' browsers do, over Streamlit's own protocol:
protobuf ``BackMsg`` up and ``ForwardMsg`` down the WebSocket at
``/_stcore/stream``, with the XSRF cookie the server hands out and its token
as the second subprotocol, as the frontend sends them.

Each session, like a reviewer in the demo's sign-in: opens the dashboard,
picks itself in the "Act as (demo)" picker (the only way more than one
person reaches one server without an OpenID provider), opens the Review
page, then presses key 1 (correct) ``--keys`` times, reading each item
``--think`` seconds first. A key press is what the browser sends for a
button's shortcut: a rerun with the button's widget id triggered, the
fragment it is drawn in named, so only the labelling fragment reruns.

Key to next item is from sending that rerun to the server's
``script_finished`` for it: by then every delta of the next item (its name,
document and page image URL) has arrived. It is the server's time plus the
local socket, not the browser's drawing, nor its fetch of the page image.
Prints p50 / p95 / max, labels written against keys pressed, items labelled
twice in one round, keys whose next screen was not a new item, and every
"store is busy" message, error or exception the sessions were shown; then
each session's first page (connect to the end of its first run, one session
after the other, so the first meets a server that has served nobody) and its
Review page. Also the load average and cores: the machine may be shared.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import urllib.response
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.Element_pb2 import Element
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.WidgetStates_pb2 import WidgetState
from websockets.asyncio.client import ClientConnection, connect
from websockets.typing import Origin, Subprotocol

from bench.review_keys import (
    benchmark_store,
    figures,
    label_counts,
    p95,
    prepare_copy,
    reviewers_arguments,
)
from bench.run import parse_size

#: What the dashboard says when the store stayed locked past its wait (dashboard.data).
BUSY_TEXT = "The store is busy"
#: The flash a recorded verdict leaves (dashboard.reviewing).
RECORDED_TEXT = "Recorded **"
PICKER = "Act as (demo)"
REVIEW_PAGE = "Review"  # its title in the sidebar (the default page has no url path)
CORRECT_KEY = "1"
#: A run that takes longer than this is a hung session, not a slow key.
RUN_TIMEOUT = 300.0
XSRF_COOKIE = "_streamlit_xsrf"
GOAL_P95 = 1.0
#: The issue's goal for a fresh session's first page, in seconds.
GOAL_FIRST_PAGE = 3.0


# The server.

def free_port() -> int:
    """A TCP port nobody listens on now, on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _get(url: str, timeout: float = 5.0) -> urllib.response.addinfourl:
    # Never through a proxy: the server is on this machine.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    reply: urllib.response.addinfourl = opener.open(url, timeout=timeout)
    return reply


def wait_healthy(base: str, process: subprocess.Popen[bytes], timeout: float) -> None:
    """Wait until ``fieldtrust serve`` answers ``/_stcore/health``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"fieldtrust serve exited early with code {process.returncode}")
        try:
            with _get(f"http://{base}/_stcore/health", timeout=2) as reply:
                if reply.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise SystemExit(f"fieldtrust serve did not become healthy in {timeout:.0f} s")


@dataclass(frozen=True)
class Served:
    """A running ``fieldtrust serve``: where it answers, and its process (for its CPU time)."""

    base: str  # host:port
    pid: int


def cpu_seconds(pid: int) -> float | None:
    """CPU time (user + system) process ``pid`` has used so far; None where /proc is missing."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    # utime and stime are the stat file's 14th and 15th fields, in clock ticks.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def serving(db: Path, folder: Path, timeout: float = 180.0) -> Iterator[Served]:
    """``fieldtrust --db DB serve --port P --demo``, run in ``folder``, until the block ends.
    The log's tail is printed if the server fails to start."""
    port = free_port()
    log = folder / "serve.log"
    # The console script `fieldtrust` is this entry point; -m runs it on this interpreter.
    command = [sys.executable, "-m", "fieldtrust.cli.main", "--db", str(db), "serve",
               "--port", str(port), "--demo"]
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, cwd=folder)
    try:
        try:
            wait_healthy(f"127.0.0.1:{port}", process, timeout)
        except SystemExit:
            print(log.read_text(errors="replace")[-3000:], file=sys.stderr)
            raise
        yield Served(f"127.0.0.1:{port}", process.pid)
    finally:
        process.send_signal(signal.SIGTERM)  # `serve` became the server: no child left behind
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def xsrf_cookie(base: str) -> str:
    """The XSRF cookie the server sets on its health check, which the frontend asks first."""
    with _get(f"http://{base}/_stcore/health") as reply:
        for header in reply.headers.get_all("Set-Cookie") or ():
            name, _, rest = str(header).partition("=")
            if name.strip() == XSRF_COOKIE:
                return rest.split(";", 1)[0]
    raise SystemExit(f"the server at {base} set no {XSRF_COOKIE} cookie")


# What one run of the script drew.

@dataclass
class Button:
    widget_id: str
    fragment_id: str


@dataclass
class Drawn:
    """The parts of one run's deltas a reviewer's eye (and keyboard) uses."""

    seconds: float = 0.0
    whole_page: bool = False  # the run was the whole script, not a fragment alone
    buttons: dict[str, Button] = field(default_factory=dict)  # by keyboard shortcut
    pickers: dict[str, tuple[str, list[str]]] = field(default_factory=dict)  # label: id, options
    pages: dict[str, str] = field(default_factory=dict)  # title: page script hash
    page_hash: str = ""
    headings: list[str] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)  # markdown and alerts
    errors: list[str] = field(default_factory=list)  # error alerts and exceptions

    def item(self) -> str | None:
        """The item on screen: its "type · field" heading and its "Document ..." line."""
        document = next((t for t in self.texts if t.startswith("Document `")), None)
        if document is None:
            return None
        heading = next((h for h in self.headings if " · " in h), "")  # "doc type · field"
        return f"{heading} | {document.split(' · ')[0]}"

    def busy(self) -> bool:
        return any(BUSY_TEXT in text for text in self.texts)

    def recorded(self) -> bool:
        """Whether the flash under the buttons says the verdict was recorded."""
        return any(text.startswith(RECORDED_TEXT) for text in self.texts)


def _read_element(drawn: Drawn, element: Element, fragment_id: str) -> None:
    kind = element.WhichOneof("type")
    assert kind is not None
    inner = getattr(element, kind)
    if kind == "button" and inner.shortcut:
        drawn.buttons[inner.shortcut] = Button(inner.id, fragment_id)
    elif kind == "selectbox":
        drawn.pickers[inner.label] = (inner.id, list(inner.options))
    elif kind == "heading":
        drawn.headings.append(inner.body)
    elif kind == "markdown":
        drawn.texts.append(inner.body)
    elif kind == "alert":
        drawn.texts.append(inner.body)
        if inner.format == inner.ERROR:
            drawn.errors.append(inner.body)
    elif kind == "exception":
        drawn.errors.append(f"{inner.type}: {inner.message}")


def _read(drawn: Drawn, message: ForwardMsg) -> None:
    kind = message.WhichOneof("type")
    if kind == "delta" and message.delta.WhichOneof("type") == "new_element":
        _read_element(drawn, message.delta.new_element, message.delta.fragment_id)
    elif kind == "navigation":
        drawn.pages = {page.page_name: page.page_script_hash
                       for page in message.navigation.app_pages}
        drawn.page_hash = message.navigation.page_script_hash
    elif kind == "new_session":
        drawn.page_hash = message.new_session.page_script_hash or drawn.page_hash


# The browser's side of one session.

class BrowserSession:
    """One reviewer's browser tab on the served dashboard: the widget values it holds and the
    page it is on, sent with every rerun as the frontend sends them."""

    def __init__(self, base: str, user: str) -> None:
        self.base = base
        self.user = user
        self.values: dict[str, WidgetState] = {}
        self.page_hash = ""
        self.pages: dict[str, str] = {}
        self.socket: ClientConnection | None = None
        self.last = Drawn()

    async def open(self) -> Drawn:
        """Connect as the frontend does (XSRF cookie, then its token as a subprotocol) and run
        the app's first page."""
        token = xsrf_cookie(self.base)
        self.socket = await connect(
            f"ws://{self.base}/_stcore/stream",
            subprotocols=[Subprotocol("streamlit"), Subprotocol(token)],
            origin=Origin(f"http://{self.base}"),
            additional_headers={"Cookie": f"{XSRF_COOKIE}={token}"},
            max_size=None, proxy=None, compression=None,
        )
        return await self.rerun()

    async def rerun(self, trigger: Button | None = None) -> Drawn:
        """Send one rerun (with ``trigger``'s button pressed, its fragment alone); what it drew."""
        assert self.socket is not None, "open() first"
        request = BackMsg()
        state = request.rerun_script
        state.page_script_hash = self.page_hash
        state.context_info.timezone = "UTC"
        state.context_info.url = f"http://{self.base}/"
        for value in self.values.values():
            state.widget_states.widgets.append(value)
        if trigger is not None:
            state.widget_states.widgets.add(id=trigger.widget_id, trigger_value=True)
            state.fragment_id = trigger.fragment_id
        drawn = Drawn()
        started = time.perf_counter()
        await self.socket.send(request.SerializeToString())
        await asyncio.wait_for(self._until_finished(drawn), RUN_TIMEOUT)
        drawn.seconds = time.perf_counter() - started
        self.pages = drawn.pages or self.pages
        self.page_hash = drawn.page_hash or self.page_hash
        self.last = drawn
        return drawn

    async def _until_finished(self, drawn: Drawn) -> None:
        assert self.socket is not None
        while True:
            message = ForwardMsg()
            message.ParseFromString(await self.socket.recv())
            _read(drawn, message)
            if message.WhichOneof("type") == "script_finished":
                drawn.whole_page = (message.script_finished
                                    != ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY)
                return

    async def act_as(self, user: str) -> Drawn:
        """Pick ``user`` in the demo sign-in's picker (its option reads "user (roles)")."""
        widget_id, options = self.last.pickers[PICKER]
        option = next(o for o in options if o.startswith(f"{user} ("))
        self.values[widget_id] = WidgetState(id=widget_id, string_value=option)
        return await self.rerun()

    async def open_page(self, title: str) -> Drawn:
        """Follow the sidebar's link to the page called ``title``."""
        self.page_hash = self.pages[title]
        return await self.rerun()

    async def press(self, shortcut: str) -> Drawn:
        """A key press: the shortcut's button on screen now, triggered."""
        return await self.rerun(trigger=self.last.buttons[shortcut])

    async def close(self) -> None:
        if self.socket is not None:
            await self.socket.close()


# Twenty reviewers.

@dataclass
class Outcome:
    """What one reviewer pressed and saw."""

    user: str
    first_page: float = 0.0  # a fresh session's first page: connect to its run's end
    review_page: float = 0.0  # the Review page opened from the sidebar
    waits: list[float] = field(default_factory=list)
    items: list[str | None] = field(default_factory=list)  # on screen before each key, then after
    recorded: int = 0  # keys whose next screen said the verdict was recorded
    whole_page: int = 0  # keys that reran the whole page instead of the labelling fragment
    busy: int = 0
    errors: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)  # keys that got no answer

    def same_item_again(self) -> int:
        """Keys after which the screen did not show a new item."""
        return sum(1 for before, after in zip(self.items, self.items[1:], strict=False)
                   if after is None or after == before)

    def seen(self, drawn: Drawn) -> None:
        self.busy += drawn.busy()
        self.errors += drawn.errors


async def sign_in(base: str, user: str) -> tuple[BrowserSession, float]:
    """A reviewer's tab: the dashboard opened, themselves picked (still on the first page),
    and the seconds the first page took, from connecting to its run's end."""
    session = BrowserSession(base, user)
    started = time.perf_counter()
    await session.open()
    first_page = time.perf_counter() - started
    await session.act_as(user)
    return session, first_page


async def label(session: BrowserSession, outcome: Outcome, keys: int, think: float,
                delay: float) -> None:
    """Read, press 1, ``keys`` times; the first key ``delay`` s late so keys spread out."""
    await asyncio.sleep(delay)
    for _ in range(keys):
        await asyncio.sleep(think)
        try:
            drawn = await session.press(CORRECT_KEY)
        except (TimeoutError, KeyError, OSError) as exc:  # no answer, or no button to press
            outcome.failures.append(f"{type(exc).__name__}: {exc}")
            return
        outcome.waits.append(drawn.seconds)
        outcome.items.append(drawn.item())
        outcome.recorded += drawn.recorded()
        outcome.whole_page += drawn.whole_page
        outcome.seen(drawn)


@dataclass
class Labelling:
    """Every reviewer's outcome, and what the labelling cost in time and CPU."""

    outcomes: list[Outcome]
    wall: float
    server_cpu: float | None  # seconds the server used while they labelled
    client_cpu: float  # seconds these sessions' own process used meanwhile


async def review_at_once(server: Served, users: list[str], keys: int,
                         think: float) -> Labelling:
    """Every user signs in, then opens Review (one after the other, as people arrive), then
    all label at once."""
    base = server.base
    outcomes = [Outcome(user) for user in users]
    sessions = []
    for outcome in outcomes:  # one after the other: the first is the coldest
        session, outcome.first_page = await sign_in(base, outcome.user)
        sessions.append(session)
    for session, outcome in zip(sessions, outcomes, strict=True):
        drawn = await session.open_page(REVIEW_PAGE)
        outcome.review_page = drawn.seconds
        outcome.items.append(drawn.item())
        outcome.seen(drawn)
    started, server_started, client_started = (
        time.perf_counter(), cpu_seconds(server.pid), time.process_time())
    await asyncio.gather(*(
        label(session, outcome, keys, think, delay=think * index / len(sessions))
        for index, (session, outcome) in enumerate(zip(sessions, outcomes, strict=True))))
    server_now = cpu_seconds(server.pid)
    server_cpu = None if server_now is None or server_started is None \
        else server_now - server_started
    done = Labelling(outcomes, time.perf_counter() - started, server_cpu,
                     time.process_time() - client_started)
    for session in sessions:
        await session.close()
    return done


def report(labelling: Labelling, keys: int, think: float, written: int, doubled: int) -> None:
    """The figures the issue asks for, in the words of :mod:`bench.review_keys`."""
    outcomes, wall = labelling.outcomes, labelling.wall
    waits = [w for o in outcomes for w in o.waits]
    pressed = len(waits)
    print(f"{len(outcomes)} sessions on one fieldtrust serve, {keys} keys each, {think:.1f} s"
          f" reading each item, {wall:.0f} s: key to next item "
          + (figures(waits) if waits else "(no key answered)"))
    print(f"  labels written {written:,} of {pressed:,} keys answered"
          f" ({len(outcomes) * keys:,} planned); items labelled twice in one round: {doubled};"
          f" keys not followed by a new item: {sum(o.same_item_again() for o in outcomes)}")
    print(f"  verdicts the next screen said were recorded: {sum(o.recorded for o in outcomes):,};"
          f" keys that reran the whole page: {sum(o.whole_page for o in outcomes)}")
    errors = [e for o in outcomes for e in o.errors]
    failures = [f for o in outcomes for f in o.failures]
    print(f"  store-busy messages shown: {sum(o.busy for o in outcomes)}; errors shown:"
          f" {len(errors)}; sessions that stopped early: {len(failures)}")
    for text in [*errors, *failures][:5]:
        print(f"    {text[:200]}")
    if waits:
        verdict = "met" if p95(waits) <= GOAL_P95 else "not met"
        print(f"  goal p95 <= {GOAL_P95:.0f} s: {verdict}")
    _cpu(labelling, pressed)
    _first_pages(outcomes)


def _first_pages(outcomes: list[Outcome]) -> None:
    """Each session's first page (the first session's was the coldest) and its Review page."""
    first = [o.first_page for o in outcomes]
    print(f"  a fresh session's first page (connect to its run's end, one session after the"
          f" other): {figures(first)}; the first session's {1000 * first[0]:.0f} ms;"
          f" goal <= {GOAL_FIRST_PAGE:.0f} s:"
          f" {'met' if max(first) <= GOAL_FIRST_PAGE else 'not met'}")
    print(f"  the Review page opened: {figures([o.review_page for o in outcomes])}")


def _cpu(labelling: Labelling, pressed: int) -> None:
    """Where the CPU went: with the server's time per key, the keys a second a core can serve."""
    client = f"this client's sessions {labelling.client_cpu:.1f} s"
    if labelling.server_cpu is None or not pressed:
        print(f"  CPU while labelling: {client}")
        return
    per_key = labelling.server_cpu / pressed
    print(f"  CPU while labelling: the server {labelling.server_cpu:.1f} s"
          f" ({1000 * per_key:.0f} ms a key, at most {1 / per_key:.1f} keys a second a core),"
          f" {client}")


def main(argv: list[str] | None = None) -> None:
    args = reviewers_arguments(__doc__.splitlines()[0], argv)
    rows = parse_size(args.rows)
    source = benchmark_store(Path(args.data), rows, args.seed, args.rows)
    print(f"review sessions on {rows:,} rows; load average {os.getloadavg()[0]:.1f} on"
          f" {os.cpu_count()} cores", flush=True)
    users = [f"bench-r{i:02d}" for i in range(args.sessions)]
    with tempfile.TemporaryDirectory(prefix="fieldtrust-review-sessions-") as folder:
        path, sample = prepare_copy(source, Path(folder), args.seed, users)
        with serving(path, Path(folder)) as server:
            labelling = asyncio.run(review_at_once(server, users, args.keys, args.think))
        written, doubled = label_counts(path, sample)  # the server gone: its store is free
    report(labelling, args.keys, args.think, written, doubled)
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
