"""`fieldtrust serve`: start the Streamlit dashboard on a store."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import click

from fieldtrust.cli.common import settings
from fieldtrust.cli.terminal import echo
from fieldtrust.settings import Settings, serve_environment
from fieldtrust.store.hosts import LOOPBACK_ADDRESSES, allowed_hosts, setting_hosts


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
_LOOPBACK = LOOPBACK_ADDRESSES


#: Runs Streamlit without its outside lookups (found by name: the CLI sits below the dashboard).
LAUNCHER = "fieldtrust.dashboard.serve_main"


def streamlit_command(
    db: str,
    port: int,
    *,
    address: str = DEFAULT_ADDRESS,
    demo: bool = False,
    user: str | None = None,
    dev: bool = False,
    extra_hosts: str = "",
) -> list[str]:
    """The ``streamlit run`` command line that serves the dashboard on ``db``.

    ``demo`` gives the demo user picker; ``user`` is the one local user the
    dashboard acts as. Without either (and without ``[auth]``) it lets nobody in.
    The server answers only the names of its address and ``extra_hosts`` (the
    ``allowed_hosts`` setting; :mod:`fieldtrust.store.hosts`). The toolbar is
    in viewer mode (no Deploy button, no developer menu) unless ``dev``: the
    people using the dashboard are reviewers and managers.
    """
    command = [
        sys.executable, "-m", LAUNCHER, "--allowed-hosts", extra_hosts, "run", str(app_path()),
        "--server.headless", "true",
        "--server.port", str(port),
        "--server.address", address,
        "--browser.gatherUsageStats", "false",
        # A served dashboard does not reload itself when source files change.
        "--server.fileWatcherType", "none",
        # Streamlit collects every generation of garbage after each run, fragments included:
        # a quarter of the server's CPU a key with twenty reviewers on one process. Python's
        # own collector still runs as objects pile up.
        "--runner.postScriptGC", "false",
        "--client.toolbarMode", "developer" if dev else "viewer",
        # Streamlit's defaults, said here so that no .streamlit/config.toml turns them off:
        # requests carry a token another site's page cannot read, and a WebSocket from
        # another origin is refused.
        "--server.enableXsrfProtection", "true",
        "--server.enableCORS", "true",
    ]
    mode = ["--demo"] if demo else []
    if user is not None:
        mode += ["--as", user]
    return [*command, "--", "--db", db, *mode]


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

    echo(f"building the demo store at {db} (once; takes a minute)...", err=True)
    ensure_demo_store(db)
    return True


def _granted(db: str, user: str, given_by: str = "--as") -> str:
    """``user``, checked against the store's grants; a usage error when they hold no role.

    ``given_by`` names where the name came from, for the message.
    """
    from fieldtrust.store import connect
    from fieldtrust.store.access import current_role, user_name

    name = user_name(user, what=given_by)
    con = connect(db, read_only=True)
    try:
        role = current_role(con, name)
    finally:
        con.close()
    if role is None:
        raise click.UsageError(
            f"{given_by} {name}: {name} holds no role in {db}; an admin grants one"
            f" (`fieldtrust users grant {name} ROLE --as ADMIN`)"
        )
    return name


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
    @click.option(
        "--as", "user", metavar="NAME", default=None,
        help="Without sign-in: the one local user the dashboard acts as (their role is read"
             " from the store's grants) [default: setting user].",
    )
    @click.option("--dev", is_flag=True,
                  help="Show Streamlit's developer menu and Deploy button (hidden by default).")
    @click.pass_context
    def serve(
        ctx: click.Context, port: int | None, demo: bool, address: str, user: str | None,
        dev: bool,
    ) -> None:
        """Start the dashboard (Streamlit) on the store; stops with Ctrl+C.

        It listens on this machine only (127.0.0.1) unless --address says otherwise.
        Without [auth] in .streamlit/secrets.toml, say who you are (--as NAME, or
        the user setting: FIELDTRUST_USER) or ask for the demo user picker (--demo,
        this machine only; it ignores the user setting).
        """
        resolved = settings(ctx, port=port)
        db = str(Path(resolved.db).resolve())
        if demo and address not in _LOOPBACK:
            raise click.UsageError(
                f"--demo lets anyone act as any user, so it listens on this machine only, not"
                f" {address}; configure sign-in to share the dashboard (docs/dashboard.md)"
            )
        if demo and user is not None:
            raise click.UsageError("--demo and --as exclude each other: pick one")
        built = _ensure_store(db, demo=demo, default_db=resolved.db == Settings().db)
        if demo or built:
            from fieldtrust.demo.users import ensure_demo_ready

            # Only a demo store (one with simulated truth) gets demo users and maps.
            for added in ensure_demo_ready(db):
                echo(f"demo: added {added}", err=True)
        if user is not None:
            user = _granted(db, user)
        elif resolved.user and not (demo or built):
            # The `user` setting says who you are, for serve as for every other command.
            user = _granted(db, resolved.user, "the user setting (FIELDTRUST_USER) names")
        port = resolved.port
        picker = (demo or built) and address in _LOOPBACK
        # The demo picker is for this machine only: no other name reaches it.
        extra = "" if picker else resolved.allowed_hosts
        command = streamlit_command(
            db, port, address=address, demo=picker, user=user, dev=dev, extra_hosts=extra
        )
        # 0.0.0.0 and :: mean every interface, this machine's own included.
        host = "localhost" if address in {*_LOOPBACK, "0.0.0.0", "::"} else address
        echo(f"serving {db} on http://{host}:{port}", err=True)
        names = ", ".join(map(str, allowed_hosts(address, port, setting_hosts(extra))))
        echo(f"answering the host names {names} (setting allowed_hosts adds more)",
                   err=True)
        if picker and resolved.allowed_hosts:
            echo("note: --demo answers this machine's names only; the allowed_hosts"
                       " setting is not used", err=True)
        if address not in _LOOPBACK:
            echo(
                f"note: listening on {address}: anyone who can reach this machine can open the"
                " dashboard. Without [auth] in .streamlit/secrets.toml it lets nobody in, or"
                " everyone in as the --as user (docs/dashboard.md).",
                err=True,
            )
        handed = resolved.with_flags(db=db)
        if picker and not resolved.signing_key_file:
            from fieldtrust.demo.users import demo_signing_key

            demo_key = demo_signing_key(db)
            if demo_key is not None:
                handed = handed.with_flags(signing_key_file=str(demo_key))
                echo(f"demo: decisions are signed with the demo store's own key {demo_key}"
                     " (a real store uses the team's: docs/governance.md)", err=True)
        sys.stdout.flush()
        sys.stderr.flush()
        # Become the server (no child left behind when this process is stopped). It runs on
        # the settings resolved here (--config, flags, environment), not on a second reading.
        served = serve_environment(handed)
        os.execve(sys.executable, command, {**os.environ, "FIELDTRUST_DB": db, **served})
