"""The files of a Parquet lake: listed by their literal names, checked before they are counted.

Names are names, never patterns: ``p[1].parquet`` is that file, not
``p1.parquet`` (DuckDB and Hadoop read a path as a glob, so every path handed
to an engine is escaped first, :func:`duckdb_literal`, :func:`hadoop_literal`).
A folder is walked, not globbed, so ``lake[1]/`` is a folder too.

Before a refresh counts new files, :func:`check_parquet_files` reads each
one's footer (a few kilobytes): a file that is empty, not Parquet, a link to
nothing, holds a list or struct where a value belongs, or gives a column
another type than the lake's other files, is refused with its name, instead
of an engine's traceback halfway through the count.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import pyarrow as pa

from fieldtrust.errors import SourceError

#: Characters DuckDB and Hadoop read as glob syntax.
_GLOB = "*?["


def walk_parquet(folder: str) -> list[str]:
    """Every ``*.parquet`` file under ``folder`` (Hive partitions too), by its literal name."""
    found = []
    for parent, folders, names in os.walk(folder, followlinks=True):
        folders.sort()
        found += [os.path.join(parent, n) for n in names if n.endswith(".parquet")]
    return found


def duckdb_literal(path: str) -> str:
    """``path`` as a DuckDB glob matching only itself (``[`` becomes ``[[]``)."""
    return "".join(f"[{c}]" if c in _GLOB else c for c in path)


def hadoop_literal(path: str) -> str:
    """``path`` as a Hadoop glob matching only itself (a backslash before each glob character)."""
    return "".join(f"\\{c}" if c in _GLOB + "{}\\" else c for c in path)


def check_parquet_files(
    root: str, files: Sequence[str], *, source: str, columns: Mapping[str, str],
    reference: str | None = None,
) -> None:
    """Refuse, by name, a file of ``files`` (relative to ``root``) that cannot be counted.

    ``columns`` maps our column names to the source's. Each file's columns
    must have the types of ``reference`` (a file counted before), else of
    the first file checked.

    Raises
    ------
    SourceError
        The first file that is missing, empty, not Parquet, holds a nested
        column, or disagrees with the others on a column's type.
    """
    import pyarrow.parquet as pq

    seen: tuple[str, dict[str, pa.DataType]] | None = None
    for name in ([reference] if reference else []) + list(files):
        path = os.path.join(root, name)
        where = f"source {source}: file {name}"
        try:
            size = os.stat(path).st_size
            schema = pq.read_schema(path) if size else None
        except FileNotFoundError as exc:
            raise SourceError(
                f"{where} cannot be read: it is gone, or a link to nothing; run the command"
                " again once the lake is whole"
            ) from exc
        except OSError as exc:
            raise SourceError(f"{where} cannot be read ({exc.strerror or exc})") from exc
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise SourceError(f"{where} is not a Parquet file ({_first_line(exc)})") from exc
        if schema is None:
            raise SourceError(f"{where} is empty (0 bytes), not a Parquet file")
        types = {ours: schema.field(theirs).type for ours, theirs in columns.items()
                 if theirs in schema.names}
        for ours, kind in types.items():
            if _family(kind) == "nested":
                raise SourceError(
                    f"{where}: column {ours} is {_nested_name(kind)} ({kind}), not one value"
                    " per row"
                )
        if seen is None:
            seen = (name, types)
            continue
        for ours, kind in types.items():
            other = seen[1].get(ours)
            if other is not None and _family(kind) != _family(other):
                raise SourceError(
                    f"{where}: column {ours} is {kind} here and {other} in {seen[0]}; a lake's"
                    " files must agree on each column's type"
                )


def _family(kind: pa.DataType) -> str:
    """What an engine can read a column as, across files: text, number, time, boolean..."""
    if pa.types.is_dictionary(kind):
        return _family(kind.value_type)
    if pa.types.is_nested(kind):
        return "nested"
    for family, test in (
        ("text", lambda k: pa.types.is_string(k) or pa.types.is_large_string(k)
         or pa.types.is_string_view(k)),
        ("number", lambda k: pa.types.is_integer(k) or pa.types.is_floating(k)
         or pa.types.is_decimal(k)),
        ("time", lambda k: pa.types.is_timestamp(k) or pa.types.is_date(k)),
        ("boolean", pa.types.is_boolean),
    ):
        if test(kind):
            return family
    return str(kind)


def _nested_name(kind: pa.DataType) -> str:
    if pa.types.is_struct(kind):
        return "a struct"
    if pa.types.is_map(kind):
        return "a map"
    return "a list" if "list" in str(kind) else "nested"


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return (lines[0] if lines else type(exc).__name__)[:200]
