"""Files beside the store: small inputs read with a bound, outputs written whole and safely.

Every output a command writes (a policy export, a sample file, Label Studio
tasks and their labelling config, a labels export) goes through
:func:`write_output`:

* never over a DuckDB database or its write-ahead log (``STORE.wal``), the
  open store included, reached by any name or link: an export written over
  the store lost every label and decision;
* never over a file fieldtrust did not write, unless asked (``force``, the
  commands' ``--force``): each output says how to recognise one of its own
  files (``is_ours``), so a nightly ``policy export --out policy.json``
  replaces yesterday's file without being told;
* never onto a folder, a device or a pipe (renaming onto ``/dev/null``
  would replace the device);
* written to a temporary file in the target's folder and renamed into
  place, so a full disk or a crash leaves the earlier file whole.

Inputs a person names (a policy, design or settings file) are read by
:func:`read_capped`, which stops at a size no such file reaches:
``verify --policy /dev/zero`` read until the kernel killed it.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import duckdb
from fieldtrust.store.connection import is_no_space, no_space_error

from fieldtrust.errors import InputError

#: Largest policy, design or settings file read; real ones are a few kilobytes.
MAX_INPUT_BYTES = 1 << 20

#: Where DuckDB's file header keeps its magic bytes.
_DUCKDB_MAGIC = (8, b"DUCK")

#: How much of an existing file :func:`file_head` reads by default.
HEAD_BYTES = 4096

#: ``writer(path)`` fills the temporary file at ``path`` (a DuckDB COPY, say).
Writer = Callable[[Path], None]


def read_capped(path: str | os.PathLike[str], *, what: str,
                limit: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of ``path``, refused past ``limit`` bytes (``what`` names the file in messages).

    Raises
    ------
    InputError
        The file cannot be read, or is larger than ``limit``.
    """
    try:
        with open(path, "rb") as handle:
            data = handle.read(limit + 1)
    except FileNotFoundError as exc:
        raise InputError(f"{what} {path} does not exist") from exc
    except OSError as exc:
        raise InputError(f"{what} {path}: cannot be read ({_reason(exc)})") from exc
    if len(data) > limit:
        raise InputError(
            f"{what} {path}: larger than {limit:,} bytes, which no {what} is; is it the"
            " right file?"
        )
    return data


def store_files(con: duckdb.DuckDBPyConnection) -> list[Path]:
    """The files of every database ``con`` has open, and their write-ahead logs."""
    rows = con.execute("SELECT path FROM duckdb_databases() WHERE path IS NOT NULL").fetchall()
    files = []
    for (path,) in rows:
        files += [Path(path), Path(str(path) + ".wal")]
    return files


@dataclass(frozen=True)
class OutputKind:
    """One kind of output: its name in messages, and how to tell a file of it fieldtrust wrote.

    ``is_ours(path)`` reads what it needs of the existing regular file at
    ``path`` (:func:`file_head`); only such a file is replaced without ``force``.
    """

    what: str
    is_ours: Callable[[Path], bool]


def check_output(
    path: str | os.PathLike[str],
    kind: OutputKind,
    *,
    force: bool = False,
    protect: Iterable[str | os.PathLike[str]] = (),
) -> Path:
    """Refuse ``path`` as an output of ``kind`` now, before any work; the file it names.

    A command that draws or computes before it writes checks first, so a
    refused output leaves the store as it was. :func:`write_output` checks again.

    Raises
    ------
    InputError
        The path is a store or its log, a folder, a device or a pipe, a file
        fieldtrust did not write (without ``force``), or has no folder.
    """
    shown = str(path)
    target = Path(os.path.realpath(path))
    _existing_mode(shown, target, kind, force=force)
    _refuse_stores(shown, target, protect)
    if not target.parent.is_dir():
        raise InputError(
            f"cannot write {shown}: there is no folder {target.parent}; nothing was written"
        )
    return target


def write_output(
    path: str | os.PathLike[str],
    content: bytes | str | Writer,
    kind: OutputKind,
    *,
    force: bool = False,
    protect: Iterable[str | os.PathLike[str]] = (),
) -> Path:
    """Write ``content`` to ``path`` through a temporary file renamed into place; the file.

    Parameters
    ----------
    path
        The output. A link is followed: the file it points at is replaced.
    content
        Text (UTF-8), bytes, or a function that writes the temporary file.
    kind
        What the output is (:class:`OutputKind`).
    force
        Replace any regular file (never a store, its log, a folder or a device).
    protect
        Files never written over (the open store: :func:`store_files`).

    Raises
    ------
    InputError
        As :func:`check_output`, or the file cannot be written; nothing was written.
    NoSpaceError
        The disk is full; the earlier file, if any, is unchanged.
    """
    shown = str(path)
    protect = list(protect)
    target = check_output(path, kind, force=force, protect=protect)
    mode = _existing_mode(shown, target, kind, force=force)
    try:
        handle, temporary = tempfile.mkstemp(
            dir=target.parent, prefix=f".{target.name}.", suffix=".tmp"
        )
    except OSError as exc:
        raise _write_error(shown, exc) from exc
    written = Path(temporary)
    try:
        with os.fdopen(handle, "wb") as out:
            if isinstance(content, str | bytes):
                out.write(content.encode("utf-8") if isinstance(content, str) else content)
        if callable(content):
            content(written)
        with open(written, "rb+") as out:
            os.fsync(out.fileno())
        os.chmod(written, mode)
        os.replace(written, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            written.unlink()
        if isinstance(exc, OSError | duckdb.IOException):
            raise _write_error(shown, exc) from exc
        raise
    return target


def _refuse_stores(shown: str, target: Path, protect: Iterable[str | os.PathLike[str]]) -> None:
    """Refuse a DuckDB database or write-ahead log as an output, by any name or link."""
    guarded = {Path(os.path.realpath(p)) for p in protect}
    # A log that does not exist yet is refused too: DuckDB would replay the output.
    log_of = target.with_name(target.name.removesuffix(".wal"))
    is_log = target.name.endswith(".wal") and (log_of in guarded or _is_duckdb(log_of))
    if is_log or target in guarded or _is_duckdb(target):
        kind = "the write-ahead log of a DuckDB store" if is_log else "a DuckDB store"
        linked = f" (through the link to {target})" if Path(shown).is_symlink() else ""
        raise InputError(
            f"cannot write {shown}: it is {kind}{linked}, which no output may replace;"
            " pick another file; nothing was written"
        )


def _existing_mode(shown: str, target: Path, kind: OutputKind, *, force: bool) -> int:
    """The permission bits the output gets; refuses what an output must not replace."""
    try:
        found = os.stat(target)
    except FileNotFoundError:
        return 0o666 & ~_umask()
    except OSError as exc:
        raise _write_error(shown, exc) from exc
    if not stat.S_ISREG(found.st_mode):
        shape = "a folder" if stat.S_ISDIR(found.st_mode) else "not a regular file"
        raise InputError(f"cannot write {shown}: it is {shape}; pick a file; nothing was written")
    if not force and not _is_duckdb(target) and not kind.is_ours(target):
        raise InputError(
            f"{shown} already exists and is not a {kind.what} fieldtrust wrote: pass --force to"
            " replace it, or pick another file; nothing was written"
        )
    return stat.S_IMODE(found.st_mode)


def _umask() -> int:
    """The process's umask, read without setting it (os.umask would, for every thread)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    return 0o022


def file_head(path: str | os.PathLike[str], size: int = HEAD_BYTES) -> bytes:
    """The first ``size`` bytes of a regular file, else empty (a pipe is never opened)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return b""
        with open(path, "rb") as handle:
            return handle.read(size)
    except OSError:
        return b""


def _is_duckdb(path: Path) -> bool:
    offset, magic = _DUCKDB_MAGIC
    return file_head(path)[offset:offset + len(magic)] == magic


def _write_error(shown: str, exc: BaseException) -> Exception:
    if is_no_space(exc):
        return no_space_error(shown, exc)
    if isinstance(exc, OSError):
        return InputError(f"cannot write {shown}: {_reason(exc)}; nothing was written")
    first = (str(exc).splitlines() or [type(exc).__name__])[0][:200]
    return InputError(f"cannot write {shown}: {first}; nothing was written")


def _reason(exc: OSError) -> str:
    return exc.strerror.lower() if exc.strerror else type(exc).__name__
