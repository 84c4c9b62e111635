"""What each version of a Delta table added and removed, read from its transaction log.

A Delta table is counted by its log, not by the files it holds now. Each
commit (``_delta_log/NNNNNNNNNNNNNNNNNNNN.json``, one action per line) adds
and removes data files, each action marked ``dataChange``:

* a file added with a data change holds new rows: it is counted;
* a file added without one (``OPTIMIZE``, Z-ordering: routine compaction)
  holds rows already counted in the files it replaced: it is recorded, so it
  is read by the draw and never counted;
* a counted file removed with a data change (a ``DELETE`` or ``UPDATE``
  rewriting it) takes its rows out of the counts; one removed without a data
  change changes nothing.

Counting the files the table held now instead counted a compacted table
again in full (issue 25: 30 rows in the table, 60 in the rollup). Delta
protocol: https://github.com/delta-io/delta/blob/master/PROTOCOL.md
("Add File and Remove File", "dataChange").
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from fieldtrust.errors import SourceError


@dataclass(frozen=True, order=True)
class LoggedFile:
    """A data file as a commit names it (the path as the log writes it)."""

    path: str
    size: int
    modified: float


@dataclass
class DeltaChanges:
    """The net effect of a run of versions on the counts.

    ``added`` and ``removed`` map a file to the version whose snapshot still
    holds it (to read it from); ``rewritten`` are compaction's files.
    """

    added: dict[LoggedFile, int] = field(default_factory=dict)
    removed: dict[LoggedFile, int] = field(default_factory=dict)
    rewritten: list[LoggedFile] = field(default_factory=list)


def delta_changes(
    table_uri: str, first: int, last: int, counted: set[str], *, source: str,
) -> DeltaChanges:
    """What versions ``first`` to ``last`` of the table changed, given the ``counted`` paths.

    A file added and removed again within the run is neither counted nor
    taken out. Raises :class:`SourceError` when the log no longer holds a
    version (the table's log retention removed it).
    """
    changes = DeltaChanges()
    added: dict[str, tuple[LoggedFile, int]] = {}
    kept = set(counted)  # files whose rows the counts hold, as of the version read
    for version in range(first, last + 1):
        for kind, action in _actions(table_uri, version, source):
            logged = _logged(action)
            if kind == "add" and not action.get("dataChange", True):
                changes.rewritten.append(logged)
                kept.add(logged.path)
            elif kind == "add" and logged.path not in kept:
                added[logged.path] = (logged, version)
            elif kind == "remove" and action.get("dataChange", True):
                if logged.path in added:
                    del added[logged.path]
                elif logged.path in kept:
                    kept.discard(logged.path)
                    changes.removed[logged] = version - 1
    changes.added = dict(added.values())
    return changes


def first_logged_version(table_uri: str, last: int, source: str) -> int:
    """The oldest version whose commit the log still holds (0 unless retention removed some)."""
    version = 0
    while version <= last and not _exists(table_uri, version):
        version += 1
    if version > last:
        raise SourceError(f"source {source}: the Delta log holds no commit files")
    return version


def _logged(action: dict[str, Any]) -> LoggedFile:
    size = action.get("size")
    modified = action.get("modificationTime") or action.get("deletionTimestamp") or 0
    return LoggedFile(str(action["path"]), int(size or 0), float(modified) / 1000)


def _actions(table_uri: str, version: int, source: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """The add and remove actions of one commit, in order."""
    filesystem, root = _filesystem(table_uri)
    name = f"{root}/_delta_log/{version:020d}.json"
    try:
        with filesystem.open_input_stream(name) as stream:
            text = stream.read().decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SourceError(
            f"source {source}: the Delta log no longer holds version {version}"
            f" ({type(exc).__name__}), which was not counted yet (the table keeps its log"
            " for delta.logRetentionDuration, 30 days by default): refresh more often than"
            " that, or count the table in a store of its own"
        ) from exc
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            action = json.loads(line)
        except ValueError as exc:
            raise SourceError(
                f"source {source}: line {number} of the Delta log's version {version} is not"
                " JSON; the table's log is damaged"
            ) from exc
        for kind in ("add", "remove"):
            if isinstance(action, dict) and isinstance(action.get(kind), dict) \
                    and "path" in action[kind]:
                yield kind, action[kind]


def _exists(table_uri: str, version: int) -> bool:
    import pyarrow.fs as pafs

    filesystem, root = _filesystem(table_uri)
    info = filesystem.get_file_info(f"{root}/_delta_log/{version:020d}.json")
    return bool(info.type == pafs.FileType.File)


def _filesystem(table_uri: str) -> tuple[Any, str]:
    import pyarrow.fs as pafs

    filesystem, root = pafs.FileSystem.from_uri(table_uri)
    return filesystem, root.rstrip("/")
