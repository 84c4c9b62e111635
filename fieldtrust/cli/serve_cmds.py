"""`fieldtrust serve`: start the Streamlit dashboard on a store."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import click

from fieldtrust.cli.common import settings
from fieldtrust.settings import Settings


def app_path() -> Path:
    """The dashboard's entry script, wherever ``fieldtrust.dashboard`` is installed.

    Found without importing it: the CLI sits below the dashboard in the layers.
    """
    spec = importlib.util.find_spec("fieldtrust.dashboard")
    assert spec is not None and spec.submodule_search_locations, "fieldtrust.dashboard missing"
    return Path(next(iter(spec.submodule_search_locations))) / "app.py"


#: Only this machine can reach the dashboard unless asked otherwise: without
#: sign-in configured it runs in demo mode, where anyone can act as anyone.
DEFAULT_ADDRESS = "127.0.0.1"
_LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def streamlit_command(
    db: str, port: int, *, address: str = DEFAULT_ADDRESS, dev: bool = False
) -> list[str]:
    """The ``streamlit run`` command line that serves the dashboard on ``db``.

    The toolbar is in viewer mode (no Deploy button, no developer menu) unless
    ``dev``: the people using the dashboard are reviewers and managers.
    """
    command = [
        sys.executable, "-m", "streamlit", "run", str(app_path()),
        "--server.headless", "true",
        "--server.port", str(port),
        "--server.address", address,
        "--browser.gatherUsageStats", "false",
        # A served dashboard does not reload itself when source files change.
        "--server.fileWatcherType", "none",
        "--client.toolbarMode", "developer" if dev else "viewer",
    ]
    return [*command, "--", "--db", db]


def _ensure_store(db: str, *, demo: bool, default_db: bool) -> bool:
    """Build the demo store when asked to (or on the default path) and it is missing.

    Returns whether it was built now.
    """
    if Path(db).exists():
        return False
    if not (demo or default_db):
        raise click.UsageError(
            f"no store at {db}: run `fieldtrust demo`, `fieldtrust ingest FILE`,"
            " or `fieldtrust serve --demo` to build the demo store"
        )
    from fieldtrust.demo import ensure_demo_store

    click.echo(f"building the demo store at {db} (once; takes a minute)...", err=True)
    ensure_demo_store(db)
    return True


def register(group: click.Group) -> None:
    """Add ``serve`` to ``group``."""

    @group.command(
        "serve",
        epilog="Example: fieldtrust serve --demo --port 8501   (then open http://localhost:8501)",
    )
    @click.option("--port", type=int, default=None, help="Port to listen on [setting port].")
    @click.option(
        "--demo", is_flag=True,
        help="Build the demo store first when the store file is missing, and add demo users.",
    )
    @click.option(
        "--address", default=DEFAULT_ADDRESS, show_default=True,
        help="Address to listen on. 0.0.0.0 shares the dashboard on your network: configure"
             " sign-in first (docs/dashboard.md).",
    )
    @click.option("--dev", is_flag=True,
                  help="Show Streamlit's developer menu and Deploy button (hidden by default).")
    @click.pass_context
    def serve(
        ctx: click.Context, port: int | None, demo: bool, address: str, dev: bool
    ) -> None:
        """Start the dashboard (Streamlit) on the store; stops with Ctrl+C.

        It listens on this machine only (127.0.0.1) unless --address says otherwise.
        """
        resolved: Settings = settings(ctx)
        db = str(Path(resolved.db).resolve())
        built = _ensure_store(db, demo=demo, default_db=resolved.db == Settings().db)
        if demo or built:
            from fieldtrust.dashboard.demo_setup import ensure_demo_ready

            # Only a demo store (one with simulated truth) gets demo users and maps.
            for added in ensure_demo_ready(db):
                click.echo(f"demo: added {added}", err=True)
        port = port or resolved.port
        command = streamlit_command(db, port, address=address, dev=dev)
        # 0.0.0.0 and :: mean every interface, this machine's own included.
        host = "localhost" if address in {*_LOOPBACK, "0.0.0.0", "::"} else address
        click.echo(f"serving {db} on http://{host}:{port}", err=True)
        if address not in _LOOPBACK:
            click.echo(
                f"note: listening on {address}: anyone who can reach this machine can open the"
                " dashboard. Without [auth] in .streamlit/secrets.toml it runs in demo mode,"
                " where anyone can act as any user (docs/dashboard.md).",
                err=True,
            )
        sys.stdout.flush()
        sys.stderr.flush()
        # Become the server (no child left behind when this process is stopped).
        os.execve(sys.executable, command, {**os.environ, "FIELDTRUST_DB": db})
