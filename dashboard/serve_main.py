"""``python -m fieldtrust.dashboard.serve_main [--allowed-hosts H,...] run app.py ...``: Streamlit,
answering only its own host names, with no outside lookups.

``fieldtrust serve`` runs the dashboard through this instead of ``python -m
streamlit``, for two things Streamlit does not do by itself:

* every request and WebSocket passes :class:`HostCheck` first, so a page
  on another site that reaches this server through DNS rebinding gets a 400
  and nothing else (the names it answers: :mod:`fieldtrust.store.hosts`,
  the bind address's and ``--allowed-hosts``, which ``fieldtrust serve``
  fills from the ``allowed_hosts`` setting);
* the modules the pages import are imported as soon as the server is up,
  beside it, so the first person to open the dashboard does not wait for
  them (about 2 s: the charts, the calibration report, the review page);
* the certificates of the report a first visit asks for (the default
  filters, the store's bar) are computed beside the server's start as well.
  They are kept by the content they are computed from
  (:mod:`fieldtrust.calibration.anytime`), so the first page finds them
  ready instead of paying for every stratum's (seconds on the demo store);
* Streamlit asks an outside service (checkip.amazonaws.com) for the
  machine's public address when it listens on every interface, and again to
  vet a browser's origin; a dashboard on a private network must not tell
  anyone it is running. Usage statistics are off by the command line
  (``--browser.gatherUsageStats false``).
"""

from __future__ import annotations

import importlib
import logging
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any

from fieldtrust.store import hosts
from streamlit import config, net_util, runtime
from streamlit.web import cli
from streamlit.web.server.starlette import starlette_app

#: What the pages import beyond what ``app.py`` does (the pages are scripts: they are run,
#: never imported, so their own imports are what can be loaded ahead).
PAGE_MODULES = (
    "fieldtrust.dashboard.views",
    "fieldtrust.dashboard.charts",
    "fieldtrust.dashboard.downloads",
    "fieldtrust.dashboard.reviewing",
    "fieldtrust.governance.acts",
    "fieldtrust.sampling.draw",
    "fieldtrust.labels.agreement",
)
log = logging.getLogger("fieldtrust.dashboard")

#: The option naming host names to answer besides the bind address's own.
ALLOWED_HOSTS_OPTION = "--allowed-hosts"


def _no_outside_lookup() -> str | None:
    """The machine's public address is never looked up: unknown."""
    return None


Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


class HostCheck:
    """ASGI middleware: a request or WebSocket naming another host gets a 400 and nothing else."""

    def __init__(self, app: App, allowed: Iterable[hosts.AllowedHost]) -> None:
        self.app = app
        self.allowed = tuple(allowed)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or hosts.host_allowed(
            _host_header(scope), self.allowed, scheme=str(scope.get("scheme", "http"))
        ):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await receive()  # websocket.connect; closing before accepting answers 403
            await send({"type": "websocket.close", "code": 1008})
            return
        body = hosts.REFUSAL.encode()
        await send({"type": "http.response.start", "status": 400, "headers": [
            (b"content-type", b"text/plain; charset=utf-8"),
            (b"content-length", str(len(body)).encode()),
        ]})
        await send({"type": "http.response.body", "body": body})


def _host_header(scope: Scope) -> str | None:
    values = [v for k, v in scope.get("headers", ()) if k.lower() == b"host"]
    # Two Host headers are ambiguous (which one a proxy read is unknown): neither counts.
    return values[0].decode("latin-1") if len(values) == 1 else None


def _take_allowed_hosts(argv: list[str]) -> tuple[hosts.AllowedHost, ...]:
    """Remove ``--allowed-hosts VALUE`` from the front of ``argv``; the hosts it names."""
    if len(argv) >= 3 and argv[1] == ALLOWED_HOSTS_OPTION:
        value = argv.pop(2)
        argv.pop(1)
        return hosts.setting_hosts(value)
    return ()


def _with_host_check(extra: tuple[hosts.AllowedHost, ...]) -> Any:
    """Streamlit's middleware factory with :class:`HostCheck` in front of everything."""
    streamlit_middleware = starlette_app.create_streamlit_middleware

    def middleware() -> list[Any]:
        from starlette.middleware import Middleware

        # Read when the app is built: the port and address Streamlit settled on.
        allowed = hosts.allowed_hosts(
            str(config.get_option("server.address") or ""),
            int(config.get_option("server.port")), extra,
        )
        return [Middleware(HostCheck, allowed=allowed), *streamlit_middleware()]

    return middleware


def import_pages_ahead(modules: Iterable[str] = PAGE_MODULES, wait: float = 120.0) -> None:
    """Import ``modules`` once Streamlit's runtime exists (their caches belong to it).

    Run beside the server: a first page that starts meanwhile waits only for what
    is left (Python imports a module once, under its own lock).
    """
    deadline = time.monotonic() + wait
    while not runtime.exists():
        if time.monotonic() > deadline:
            return
        time.sleep(0.05)
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:  # the page that needs it says what is wrong, in its own words
            log.debug("importing %s ahead failed", name, exc_info=True)


def compute_first_report() -> None:
    """Compute the report a first page reads, so that visit finds it ready.

    The certificates are the dear part (seconds on the demo store), and the
    library keeps them by their content, whoever asked: the store is read
    first and let go, so pages opened meanwhile read the store as usual, and
    one that needs a certificate being computed here waits for it instead of
    computing it again. Then the first page's report itself, with the
    certificates ready, is computed for the page (:func:`data.compute_ahead`):
    Streamlit's cache is filled only by a page run, and that run takes it. No
    store yet, or one that cannot be read: the first page says what is wrong,
    in its own words.
    """
    from pathlib import Path

    from fieldtrust.calibration.candidates import certificate_jobs
    from fieldtrust.dashboard import data, sidebar, views
    from fieldtrust.store.bar import resolve_bar
    from fieldtrust.store.scope import Scope

    path = data.db_path()
    if path != ":memory:" and not Path(path).exists():
        return
    try:
        with data.reading(path) as con:
            bar = resolve_bar(con, data.settings().criteria)  # what data.bar() reads
            jobs = certificate_jobs(con, Scope(), bar) if bar.certificate == "anytime" else []
            options = data.filter_options(con)
        # A first visit filters no type or version, and certificates read the
        # horizon's weeks whatever the window shows.
        for job in jobs:
            job.certify()
        data.compute_ahead("calibration_report",
                           *views.report_args(sidebar.first_scope(options, bar.weeks), bar))
    except Exception:
        log.debug("computing the first report ahead failed", exc_info=True)


def prepare_first_page() -> None:
    """Beside the server: the pages' modules, then the report a first page reads."""
    import_pages_ahead()
    if runtime.exists():
        compute_first_report()


def main() -> None:
    """Start Streamlit's command line with the host check in, the public lookup out and the
    pages' modules and the first report prepared beside it."""
    threading.Thread(target=prepare_first_page, name="fieldtrust-first-page",
                     daemon=True).start()
    extra = _take_allowed_hosts(sys.argv)
    starlette_app.create_streamlit_middleware = _with_host_check(extra)
    net_util.get_external_ip = _no_outside_lookup
    cli.main(prog_name="streamlit")


if __name__ == "__main__":
    main()
