"""What every command shares: settings on the context, opening the store, output."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click
import duckdb

from fieldtrust import store
from fieldtrust.cli.terminal import echo, printable
from fieldtrust.errors import InputError
from fieldtrust.ingest.rules import TimeWindow
from fieldtrust.settings import Settings
from fieldtrust.store.weeks import Week

if TYPE_CHECKING:
    from fieldtrust.store.bar import Bar


def settings(ctx: click.Context, **flags: object) -> Settings:
    """The resolved settings (put on the context by the top-level group) with this
    command's own flags laid over them.

    A command passes its flags by setting name (``settings(ctx, weeks=weeks)``);
    ``None`` means the flag was not given. A refused value raises
    :class:`~fieldtrust.settings.InputError` naming the flag.
    """
    resolved: Settings = ctx.find_root().obj["settings"]
    return resolved.with_flags(**flags)


def held_bar(ctx: click.Context, con: duckdb.DuckDBPyConnection, **flags: object) -> Bar:
    """The bar this command is held to: the store's policy, then the settings' asks and
    this command's flags (:func:`fieldtrust.store.bar.resolve_bar`, as everywhere)."""
    from fieldtrust.store.bar import resolve_bar

    return resolve_bar(con, settings(ctx, **flags).criteria)


def acting_user(ctx: click.Context, given: str | None, *, what: str = "this") -> str:
    """``--as NAME`` if given, else the ``user`` setting (``FIELDTRUST_USER``)."""
    if given:
        return given
    default = settings(ctx).user
    if default:
        return default
    raise click.UsageError(
        f"{what} needs to know who you are: give --as NAME, or set FIELDTRUST_USER=NAME"
        " (or user = \"NAME\" in fieldtrust.toml) once"
    )


#: Help of every --as option.
AS_HELP = ("Who is acting; their roles in the store are checked"
           " [default: setting user, env FIELDTRUST_USER].")


#: Help of every --force option of a command that writes a file.
FORCE_HELP = ("Replace an existing file fieldtrust did not write (never a store or its log);"
              " its own earlier output is replaced without it.")


#: Seconds a command waits for the store file. The dashboard's writes hold it for
#: moments, but many reviewers at once can keep it busy for a while, and an
#: ingest run by a person or a nightly job should wait for them, not fail.
CLI_LOCK_WAIT = 120.0


def open_db(
    ctx: click.Context, *, read_only: bool = False, adopt: bool = False
) -> duckdb.DuckDBPyConnection:
    """Open the store named by ``--db`` / ``FIELDTRUST_DB``; closed when the command ends.

    While another process holds the store, one line on stderr says so at once.
    """
    con = store.connect(
        settings(ctx).db, read_only=read_only, lock_timeout=CLI_LOCK_WAIT,
        on_wait=_say_waiting, adopt=adopt,
    )
    ctx.call_on_close(con.close)
    return con


def time_window(ctx: click.Context) -> TimeWindow:
    """The accepted input times, from settings ``earliest_time`` and ``future_days``."""
    return TimeWindow.from_settings(settings(ctx))


class WeekType(click.ParamType[Week, str]):
    """An ISO week option (``--week 2026-W48``), parsed once into a :class:`Week`."""

    name = "week"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Week:
        try:
            return Week(value)
        except InputError as exc:
            self.fail(str(exc), param, ctx)


WEEK = WeekType()


def _say_waiting(message: str) -> None:
    echo(message, err=True)


def echo_json(payload: Any) -> None:
    """Print ``payload`` as JSON; NaN and infinities become null, dates ISO text."""
    echo(json.dumps(_clean(payload), indent=2, default=str, allow_nan=False))


def _clean(value: Any) -> Any:
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def echo_table(rows: list[dict[str, Any]], columns: list[str] | None = None) -> None:
    """Print rows as an aligned plain-text table (no dependency, pipes cleanly)."""
    if not rows:
        echo("(no rows)")
        return
    columns = columns or list(rows[0])
    cells = [[_fmt(row.get(c)) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    echo("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)))
    echo("  ".join("-" * w for w in widths))
    for row in cells:
        echo("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)))


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return "-" if value != value else f"{value:.3f}"
    # Escaped before the widths are measured; a line break would split the row.
    return printable(str(value)).replace("\n", "<U+000A>")
