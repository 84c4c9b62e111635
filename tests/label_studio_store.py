"""Stores for the Label Studio tests, built through the CLI as quinn (admin and qa_lead).

The tests with a real Label Studio server and the fast ones without it start
from the same kind of store: extraction rows with their documents, written to
a CSV, ingested by ``fieldtrust ingest``, with reviewers granted by name.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from fieldtrust.cli.main import cli


def run(db: Path, *args: str) -> tuple[int, str]:
    """Run ``fieldtrust ARGS --db DB`` as quinn; the exit code and the output."""
    result = CliRunner().invoke(cli, [*args, "--db", str(db)], env={"FIELDTRUST_USER": "quinn"})
    return result.exit_code, result.output


def ingested_store(folder: Path, rows: list[dict[str, Any]], *reviewers: str) -> Path:
    """A store in ``folder`` holding ``rows`` (ingested from a CSV), with ``reviewers`` granted."""
    db = folder / "store.duckdb"
    source = folder / "extractions.csv"
    with source.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    for args in (["init", "--admin", "quinn"], ["ingest", str(source), "--quiet"],
                 ["users", "grant", "quinn", "qa_lead"],
                 *(["users", "grant", name, "reviewer"] for name in reviewers)):
        code, out = run(db, *args)
        assert code == 0, out
    return db
