"""What the command line writes to a terminal: text only, never a control sequence.

Values come from ingested files, lakes, Label Studio exports and sign-ins,
and a terminal acts on some characters instead of showing them: ESC starts
sequences that clear the screen, retitle the window or write the clipboard
(OSC 52), a right-to-left override reorders what follows, NUL and other
control characters hide text. Every line the CLI writes goes through
:func:`echo`, which shows each such character as ``<U+XXXX>`` (as ingest's
messages do, :func:`fieldtrust.ingest.readers.visible`); a line break stays a
line break. JSON output is ASCII already (``echo_json``).
"""

from __future__ import annotations

import click

from fieldtrust.ingest.readers import INVISIBLE


def printable(text: str) -> str:
    """``text`` with every control, zero-width and direction character as ``<U+XXXX>``, but
    the line breaks between its lines."""
    return INVISIBLE.sub(lambda m: "\n" if m.group() == "\n" else f"<U+{ord(m.group()):04X}>",
                         text)


def echo(message: object = "", *, err: bool = False, nl: bool = True) -> None:
    """``click.echo`` of ``message`` made :func:`printable`: the CLI's one way to write text."""
    click.echo(printable(str(message)), err=err, nl=nl)
