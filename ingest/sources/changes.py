"""Counted lake files that changed or went away, and a person's acknowledgement of them.

A refresh never recounts a file it counted before (logs are append-only;
recounting a rewritten file would count its rows twice), so it reports the
file instead. Reported on every refresh, that warning soon hides the next
one. :func:`acknowledge_changes` records that someone has seen the change:
the file as it is now (or its absence), who and when. A refresh stays silent
about a file while it is exactly as acknowledged, and reports it again the
moment it changes once more. Acknowledging counts nothing and uncounts
nothing: to take a rewritten file's rows in, write them as a new file.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import duckdb
from fieldtrust.ingest.sources.engines import Source
from fieldtrust.store.access import require, user_name
from fieldtrust.store.connection import utc_now
from fieldtrust.store.retry import write_with_retry

from fieldtrust.errors import InputError

#: How a file is known: (size, modified time), or None for a file that is gone.
FileState = tuple[int, float] | None


@dataclass(frozen=True)
class FileChanges:
    """Counted files of a source that changed since counted, or are gone, and not acknowledged."""

    changed: list[str]
    missing: list[str]


def counted_files(con: duckdb.DuckDBPyConnection, source: str) -> dict[str, tuple[int, float]]:
    """Files of ``source`` already counted: path -> (size, modified time)."""
    rows = con.execute(
        "SELECT path, size, modified FROM source_files WHERE source = ?", [source]
    ).fetchall()
    return {path: (int(size), float(modified)) for path, size, modified in rows}


def acknowledged_files(con: duckdb.DuckDBPyConnection, source: str) -> dict[str, FileState]:
    """The newest acknowledgement of each file of ``source``: the state it was seen in."""
    rows = con.execute(
        "SELECT path, arg_max(size, acknowledged_at), arg_max(modified, acknowledged_at)"
        " FROM source_file_acknowledgements WHERE source = ? GROUP BY path",
        [source],
    ).fetchall()
    return {path: None if size is None else (int(size), float(modified))
            for path, size, modified in rows}


def file_changes(
    con: duckdb.DuckDBPyConnection, source: str, listed: dict[str, tuple[int, float]]
) -> FileChanges:
    """Counted files that differ from ``listed`` (path -> size, modified), unless acknowledged."""
    seen = acknowledged_files(con, source)
    changed: list[str] = []
    missing: list[str] = []
    for path, counted in sorted(counted_files(con, source).items()):
        now = listed.get(path)
        if now == counted or (path in seen and seen[path] == now):
            continue
        (missing if now is None else changed).append(path)
    return FileChanges(changed, missing)


def unacknowledged(
    con: duckdb.DuckDBPyConnection, source: str, paths: Sequence[str],
    now: dict[str, tuple[int, float]],
) -> list[str]:
    """``paths`` (counted files that changed or went away) but those acknowledged as they are
    ``now`` (path -> size, modified; a missing file is absent)."""
    seen = acknowledged_files(con, source)
    return [path for path in paths if not (path in seen and seen[path] == now.get(path))]


def acknowledge_changes(
    con: duckdb.DuckDBPyConnection, source: Source, actor: str, paths: Sequence[str]
) -> list[str]:
    """Record that ``actor`` has seen each changed or missing file in ``paths``; return them.

    Parameters
    ----------
    source
        The open source (its files are listed now).
    actor
        Who acknowledges; needs the ``acknowledge_source_change`` permission
        (qa_lead or admin).
    paths
        Paths relative to the source's root, as the refresh's warning names them.

    Raises
    ------
    InputError
        A path is not a counted file that changed or went away (naming the
        ones that are); nothing is written.
    PermissionDenied
        ``actor`` may not acknowledge; nothing is written.
    """
    actor = user_name(actor, what="acting user")
    name = source.config.name
    listed = source.files()
    if listed is None:
        raise InputError(f"{name} is a table without files: it has no counted files to acknowledge")
    now = {f.path: (f.size, f.modified) for f in listed}

    def work(tx: duckdb.DuckDBPyConnection) -> list[str]:
        require(tx, actor, "acknowledge_source_change")
        pending = file_changes(tx, name, now)
        open_paths = pending.changed + pending.missing
        for path in paths:
            if path not in open_paths:
                shown = ", ".join(open_paths) or "none"
                raise InputError(
                    f"{path} is not a counted file of {name} that changed or went away;"
                    f" those waiting to be acknowledged: {shown}"
                )
        at = utc_now()
        for path in dict.fromkeys(paths):
            size, modified = now.get(path, (None, None))
            tx.execute(
                "INSERT INTO source_file_acknowledgements VALUES (?, ?, ?, ?, ?, ?)",
                [name, path, size, modified, actor, at],
            )
        return list(dict.fromkeys(paths))

    return write_with_retry(con, work, what=f"acknowledging changed files of {name}")
