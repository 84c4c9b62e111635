"""Entry point of the `fieldtrust` command.

Each command group lives in its own module and registers itself here; a
command opens the store, calls one library function and prints the result.
Errors fieldtrust raises on purpose become one line on stderr and exit code 2.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

import click
import duckdb

from fieldtrust import __version__
from fieldtrust.cli.terminal import echo, printable
from fieldtrust.errors import FieldtrustError
from fieldtrust.settings import load_settings
from fieldtrust.store import signing

#: Modules that add commands; each defines ``register(group)``.
COMMAND_MODULES = (
    "fieldtrust.cli.store_cmds",
    "fieldtrust.cli.demo_cmds",
    "fieldtrust.cli.calibrate_cmds",
    "fieldtrust.cli.sample_cmds",
    "fieldtrust.cli.source_cmds",
    "fieldtrust.cli.review_cmds",
    "fieldtrust.cli.monitor_cmds",
    "fieldtrust.cli.extract_cmds",
    "fieldtrust.cli.serve_cmds",
    "fieldtrust.cli.key_cmds",
)


#: Options of the top-level group that may also come after the subcommand.
GLOBAL_OPTIONS = ("--db", "--config")


def hoist_global_options(args: list[str]) -> list[str]:
    """``args`` with ``--db X`` / ``--config X`` (or ``--db=X``) moved to the front.

    Every help text starts with "set --db", so ``fieldtrust calibrate --db x.duckdb``
    must work as well as ``fieldtrust --db x.duckdb calibrate``. Nothing after
    ``--`` moves (it belongs to the command, e.g. ``serve``'s Streamlit options).
    """
    front: list[str] = []
    rest: list[str] = []
    index = 0
    while index < len(args):
        arg = args[index]
        if arg == "--":
            rest += args[index:]
            break
        name = arg.split("=", 1)[0]
        if name in GLOBAL_OPTIONS and "=" in arg:
            front.append(arg)
        elif arg in GLOBAL_OPTIONS and index + 1 < len(args):
            front += args[index : index + 2]
            index += 1
        else:
            rest.append(arg)
        index += 1
    return front + rest


class FieldtrustGroup(click.Group):
    """A click group that turns fieldtrust errors into a message and exit code 2."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, hoist_global_options(args))

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.ClickException as exc:
            # Click quotes the value it refused: shown, never acted on by the terminal.
            # (Click types the message final; it is an instance attribute all the same.)
            vars(exc)["message"] = printable(exc.message)
            raise
        except FieldtrustError as exc:
            echo(f"error: {capped(str(exc))}", err=True)
            ctx.exit(2)
        except duckdb.IOException as exc:
            # The store file failed under a read (damaged, truncated, or its disk went away).
            first = (str(exc).splitlines() or [type(exc).__name__])[0]
            echo(f"error: the store could not be read or written: {capped(first)}",
                       err=True)
            ctx.exit(2)


#: Longest error message the CLI prints; the rest is cut (a message quotes input).
MAX_MESSAGE_CHARS = 8_000


def capped(message: str) -> str:
    """``message`` cut to :data:`MAX_MESSAGE_CHARS`, lines cut to 500 characters."""
    lines = [line if len(line) <= 500 else line[:497] + "..." for line in message.splitlines()]
    text = "\n".join(lines)
    return text if len(text) <= MAX_MESSAGE_CHARS else text[: MAX_MESSAGE_CHARS - 3] + "..."


@click.group(
    cls=FieldtrustGroup,
    epilog="Example: fieldtrust --db audit.duckdb ingest extractions.parquet\n\n"
    "--db and --config may also follow the command: fieldtrust ingest x.csv --db audit.duckdb",
)
@click.option(
    "--db",
    envvar="FIELDTRUST_DB",
    default=None,
    help="DuckDB store file [env FIELDTRUST_DB; default ./fieldtrust.duckdb].",
)
@click.option(
    "--config",
    envvar="FIELDTRUST_CONFIG",
    default=None,
    type=click.Path(dir_okay=False),
    help="TOML settings file [env FIELDTRUST_CONFIG; default ./fieldtrust.toml].",
)
@click.version_option(__version__, prog_name="fieldtrust")
@click.pass_context
def cli(ctx: click.Context, db: str | None, config: str | None) -> None:
    """Calibrate stated confidence against human labels and decide, with evidence,
    where a human still has to look.
    """
    try:
        resolved = load_settings({"db": db}, config_file=config)
    except FieldtrustError:
        raise  # a setting or the settings file: one `error:` line, exit 2
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
    ctx.obj = {"settings": resolved}
    # The keys of the settings, not only of the environment: what a command signs
    # and trusts (store.signing), for as long as it runs.
    ctx.with_resource(signing.using(resolved.signing_key_file, resolved.trusted_key_files))


for _name in COMMAND_MODULES:
    importlib.import_module(_name).register(cli)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    cli.main(args=argv, prog_name="fieldtrust", standalone_mode=True)


if __name__ == "__main__":  # pragma: no cover
    main(sys.argv[1:])
