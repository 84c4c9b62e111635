"""Write the CLI reference (docs/cli.md) from the commands' own help.

Run ``python -m fieldtrust.cli.reference > docs/cli.md`` after changing a
command; ``tests/test_docs.py`` fails while a command is missing from the file.
"""

from __future__ import annotations

from collections.abc import Iterator

import click

from fieldtrust.cli.main import cli
from fieldtrust.cli.terminal import echo

HEADER = """# Command-line reference

Every dashboard action has a command. All commands take the global options
`--db PATH` (or `FIELDTRUST_DB`, default `./fieldtrust.duckdb`) and
`--config FILE` (see [settings](settings.md)). Errors print one line starting
with `error:` on stderr and exit with code 2; nothing is written to the store.

This page is generated from the commands' help by
`python -m fieldtrust.cli.reference > docs/cli.md`.
"""


def walk(command: click.Command, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every command path below ``command``, groups before their subcommands."""
    yield path
    if isinstance(command, click.Group):
        for name in sorted(command.commands):
            yield from walk(command.commands[name], (*path, name))


def command_paths() -> list[str]:
    """``['fieldtrust', 'fieldtrust calibrate', ...]``: what the reference must cover."""
    return [" ".join(("fieldtrust", *path)) for path in walk(cli)]


def help_text(path: tuple[str, ...]) -> str:
    """The ``--help`` output of one command, as a user sees it."""
    context = click.Context(cli, info_name="fieldtrust", terminal_width=88)
    command: click.Command = cli
    for name in path:
        assert isinstance(command, click.Group)
        command = command.commands[name]
        context = click.Context(command, info_name=name, parent=context, terminal_width=88)
    return command.get_help(context)


def render() -> str:
    sections = [HEADER]
    for path in walk(cli):
        title = " ".join(("fieldtrust", *path))
        sections.append(f"## `{title}`\n\n```text\n{help_text(path)}\n```\n")
    return "\n".join(sections)


if __name__ == "__main__":  # pragma: no cover
    echo(render(), nl=False)
