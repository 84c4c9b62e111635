"""Text that acts instead of showing (issue "hostile conditions, round 2", faults 12 and 13).

12. A doc_type ``https://evil.example/login`` or a field ``www.evil.example``
    became a clickable link on the Review page and in the Overview caption; the
    acting user's name was rendered as markdown. (The browser test of a real
    server is in ``test_served_dashboard.py``; here, the escape itself.)
13. Values reached the terminal raw in ``fieldtrust queue``: an OSC 52 clipboard
    write, a screen clear, NUL, a right-to-left override.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from fieldtrust.dashboard.layout import plain
from fieldtrust.ingest.extractions import ingest_table
from rel_store import MANAGER, extraction_rows

from fieldtrust import store
from fieldtrust.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]

#: GitHub-flavoured markdown's own links in plain text (remark-gfm's patterns), which
#: backslash escapes do not stop.
GFM_AUTOLINKS = (re.compile(r"(https?://|www(?=\.))[-.\w]+", re.IGNORECASE),
                 re.compile(r"[-.\w+]+@[-\w]+(?:\.[-\w]+)+"))


def _unescaped(markdown: str) -> str:
    """The text nodes markdown makes of ``markdown``: backslash escapes undone."""
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", markdown)


@pytest.mark.parametrize("text", [
    "https://evil.example/login", "www.evil.example", "WWW.EVIL.EXAMPLE", "ana@evil.example",
    "xmpp:ana@evil.example", "see http://x.y and www.z.w", "mailto:root@corp.example",
])
def test_plain_text_cannot_become_a_link(text: str) -> None:
    shown = _unescaped(plain(text))
    assert not any(p.search(shown) for p in GFM_AUTOLINKS), shown
    assert shown.replace("\u2060", "") == text  # and reads as written


#: What a hostile extraction log may put in a value: each acts on a terminal.
TERMINAL_ATTACKS = {
    "osc52": "\x1b]52;c;ZWNobyBwd25lZA==\x07",  # writes the clipboard
    "clear": "\x1b[2J\x1b[H",  # clears the screen
    "nul": "12\x0034",
    "rlo": "\u202e00.21",  # shows as 12.00
    "c1": "\x9b31m",  # a CSI in one byte
}
_RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _hostile_store(path: Path) -> None:
    con = store.connect(path)
    try:
        rows = extraction_rows(len(TERMINAL_ATTACKS) * 3).to_pylist()
        values = list(TERMINAL_ATTACKS.values())
        for number, row in enumerate(rows):
            row["value"] = values[number % len(values)]
            row["confidence"] = 0.3  # first in the queue
        import pyarrow as pa

        ingest_table(con, pa.Table.from_pylist(rows), source="hostile", fmt="test")
    finally:
        con.close()


def _terminal(db: Path, *args: str) -> Any:
    # color=True: click keeps escape sequences, as it does on a real terminal.
    return CliRunner().invoke(cli, ["--db", str(db), *args], color=True)


def test_values_reach_the_terminal_escaped(tmp_path: Path) -> None:
    db = tmp_path / "hostile.duckdb"
    _hostile_store(db)
    result = _terminal(db, "queue", "--limit", "30")
    assert result.exit_code == 0, result.output
    assert not _RAW.search(result.output), repr(result.output[:400])
    assert "<U+001B>]52;c;ZWNobyBwd25lZA==<U+0007>" in result.output
    assert "<U+202E>00.21" in result.output and "12<U+0000>34" in result.output
    # The table's columns still line up: one line per row, under the header.
    lines = result.output.splitlines()
    assert len(lines) == 2 + 15 and len({line.index("invoice") for line in lines[2:]
                                        if "invoice" in line}) == 1


def test_error_and_usage_messages_quote_hostile_text_escaped(populated: Path) -> None:
    # A blank comment: the library's message names the stratum as given.
    refused = _terminal(populated, "decide", "reject", "--doc-type", "\x1b]52;c;eA==\x07",
                        "--field", "total", "--as", MANAGER, "--comment", " ")
    assert refused.exit_code == 2
    assert "<U+001B>]52;c;eA==<U+0007>" in refused.stderr and not _RAW.search(refused.stderr)
    # Click names a missing path as given.
    usage = _terminal(populated, "ingest", "\x1b[2Jweek48.csv")
    assert usage.exit_code == 2
    assert "[2Jweek48.csv" in usage.stderr and not _RAW.search(usage.stderr)


def test_the_command_line_writes_through_one_escape() -> None:
    """A source scan: every line the CLI writes goes through fieldtrust.cli.terminal.echo."""
    offenders = [
        f"{path.name}:{number}"
        for path in sorted((ROOT / "fieldtrust" / "cli").glob("*.py"))
        if path.name != "terminal.py"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if re.search(r"\bclick\.(echo|secho)\(|\bprint\(|sys\.std(out|err)\.write\(", line)
    ]
    assert offenders == []
