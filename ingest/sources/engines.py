"""Open a source and run the source queries on its own engine.

DuckDB reads a Parquet lake in place (``read_parquet`` with Hive partitions)
and a Delta table as the Arrow dataset the ``deltalake`` package gives it;
Spark (pyspark: a local session, or Spark Connect at ``sc://host:port``)
reads Parquet files or a catalog table. Either way the engine defines two
relations, ``source_raw`` (the source's columns under our names, with
``file_`` and ``row_``) and ``source_rows`` (typed as the store keeps them,
with ``bad_``, true on a row an ingest rule rejects, and ``uncounted_``, true
on one a rule on what it is counted by rejects), and runs the texts of
:mod:`fieldtrust.ingest.sources.queries`.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import duckdb
import pyarrow as pa
from fieldtrust.ingest.extractions import REQUIRED_COLUMNS, extraction_rules, typed_select
from fieldtrust.ingest.rules import Rule, TimeWindow
from fieldtrust.ingest.sources.checks import any_fails, counting_rules
from fieldtrust.ingest.sources.config import SOURCE_COLUMNS, TABLE_PREFIX, SourceConfig
from fieldtrust.ingest.sources.dialect import for_dialect
from fieldtrust.ingest.sources.lake_files import (
    check_parquet_files,
    duckdb_literal,
    hadoop_literal,
    walk_parquet,
)
from fieldtrust.store.sql import quote_ident

from fieldtrust.errors import SourceError, ValidationError


@dataclass(frozen=True, order=True)
class SourceFile:
    """One data file of a source, as listed now (path relative to the source root)."""

    path: str
    size: int
    modified: float


#: What the store knows of the files it counted: path -> (size, modified time).
Counted = Mapping[str, tuple[int, float]]


@dataclass(frozen=True)
class Listing:
    """What a refresh has to do, from the source's files and what the store counted.

    ``new`` files are counted; ``removed`` ones (a Delta version took them out
    with a data change) are taken out of the counts; ``rewritten`` ones
    (compaction) hold rows counted before and are only recorded. ``changed``
    and ``missing`` name counted files that changed or went away, reported
    and never counted again. ``version`` is the Delta version listed.
    """

    new: list[SourceFile]
    changed: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    removed: list[SourceFile] = field(default_factory=list)
    rewritten: list[SourceFile] = field(default_factory=list)
    version: int | None = None


class Source:
    """An open source. Use :func:`open_source`; close it when done."""

    dialect = "duckdb"

    def __init__(self, config: SourceConfig) -> None:
        self.config = config
        #: The accepted extraction times (settings ``earliest_time``, ``future_days``);
        #: set by :func:`open_source`.
        self.window: TimeWindow | None = None
        self.rules: list[Rule] = []
        self.dtypes: dict[str, str] = {}

    # --- what subclasses provide ------------------------------------------------
    def files(self) -> list[SourceFile] | None:
        """The data files now (None: a table without files, read by watermark)."""
        raise NotImplementedError

    def _raw(self, files: Sequence[str] | None) -> dict[str, str]:
        """Define ``source_raw`` over ``files``; return its columns' DuckDB types."""
        raise NotImplementedError

    def _execute(self, sql: str, params: dict[str, Any]) -> pa.Table:
        raise NotImplementedError

    def register(self, name: str, table: pa.Table) -> None:
        """Make a small Arrow table (a draw's allocation) a relation of the engine."""
        raise NotImplementedError

    def close(self) -> None:
        """Release the engine (a shared Spark session stays up)."""

    def __enter__(self) -> Source:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- shared -----------------------------------------------------------------
    def listing(self, counted: Counted, version: int | None) -> Listing | None:
        """What is new since the files ``counted`` (None: a table read by watermark).

        ``version`` is the Delta version counted last (None for other sources).
        """
        listed = self.files()
        if listed is None:
            return None
        now = {f.path: f for f in listed}
        changed, missing = [], []
        for path, (size, modified) in sorted(counted.items()):
            if path not in now:
                missing.append(path)
            elif (now[path].size, now[path].modified) != (size, modified):
                changed.append(path)
        return Listing([f for f in listed if f.path not in counted], changed, missing)

    def check(self, files: Sequence[str]) -> None:
        """Refuse, by name, a file of ``files`` a refresh could not count (see lake_files)."""

    def select(self, files: Sequence[str] | None) -> None:
        """Point ``source_raw`` and ``source_rows`` at ``files`` (None: every row)."""
        dtypes = self._raw(files)
        missing = [c for c in REQUIRED_COLUMNS if c not in dtypes]
        if missing:
            mapped = [f"{c} (read as {self.config.source_name(c)!r})" for c in missing]
            raise ValidationError(
                self.config.name,
                [f"missing required column{'s' if len(missing) > 1 else ''} {', '.join(mapped)};"
                 " map a column of yours with [source.columns]"],
            )
        self.dtypes = dtypes
        self.rules = extraction_rules(dtypes, self.window)
        self._view(
            "source_rows",
            f"SELECT {typed_select(dtypes)}, {any_fails(self.rules)} AS bad_,"
            f" {any_fails(counting_rules(self.rules))} AS uncounted_ FROM source_raw",
        )

    def query(self, sql: str, params: dict[str, Any] | None = None) -> pa.Table:
        """Run one source query (DuckDB text) on the engine; the result as Arrow."""
        return self._execute(for_dialect(sql, self.dialect), params or {})

    def _view(self, name: str, select_sql: str) -> None:
        self._execute(
            f"CREATE OR REPLACE TEMP VIEW {name} AS {for_dialect(select_sql, self.dialect)}", {}
        )

    def _mapped(self, found: Sequence[str]) -> list[tuple[str, str]]:
        """(ours, theirs) for every extraction column the source has."""
        present = set(found)
        return [
            (ours, self.config.source_name(ours))
            for ours in SOURCE_COLUMNS
            if self.config.source_name(ours) in present
        ]

    def root(self) -> str:
        path = self.config.path
        return path if not glob.has_magic(path) else path[: _magic_start(path)]


def _magic_start(path: str) -> int:
    for index, char in enumerate(path):
        if char in "*?[":
            return path.rfind(os.sep, 0, index) + 1
    return len(path)


def parquet_files(config: SourceConfig) -> list[SourceFile]:
    """Parquet files of a folder (recursively, Hive style) or glob, sorted by path.

    A path that exists is taken as written (a folder ``lake[1]`` is a folder,
    not a pattern); only a path that does not exist is read as a glob.
    """
    path = config.path
    if os.path.isdir(path):
        found, root = walk_parquet(path), path
    elif os.path.isfile(path):
        found, root = [path], os.path.dirname(path)
    elif glob.has_magic(path):
        found = glob.glob(path, recursive=True)
        root = path[: _magic_start(path)]
    else:
        raise SourceError(f"source path {path} does not exist")
    files = []
    for name in sorted(found):
        if any(part.startswith(("_", ".")) for part in Path(name).relative_to(root or ".").parts):
            continue  # _delta_log, _SUCCESS, hidden files
        try:
            stat = os.stat(name)
        except OSError:  # a link to nothing: listed as empty, refused by name when checked
            stat = os.lstat(name)
        files.append(SourceFile(os.path.relpath(name, root or "."), stat.st_size, stat.st_mtime))
    return files


def _engine() -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB that reads the lake, in UTC as the store is."""
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    # DuckDB draws a progress bar on stdout for a query slower than two seconds,
    # which would corrupt `fieldtrust refresh --json` on a large lake.
    con.execute("SET enable_progress_bar = false")
    return con


class DuckDBParquet(Source):
    """A Parquet lake read in place by DuckDB."""

    def __init__(self, config: SourceConfig) -> None:
        super().__init__(config)
        self.con = _engine()
        self._root = os.path.abspath(
            config.path if os.path.isdir(config.path) else self.root()
        )
        self._listed: list[SourceFile] = []

    def files(self) -> list[SourceFile] | None:
        self._listed = parquet_files(self.config)
        return self._listed

    def check(self, files: Sequence[str]) -> None:
        wanted = set(files)
        # One file outside the selection (counted before) is what the new ones must match.
        reference = next((f.path for f in self._listed if f.path not in wanted), None)
        columns = {ours: self.config.source_name(ours) for ours in SOURCE_COLUMNS}
        check_parquet_files(self._root, files, source=self.config.name, columns=columns,
                            reference=reference)

    def _raw(self, files: Sequence[str] | None) -> dict[str, str]:
        if files is None:
            files = [f.path for f in parquet_files(self.config)]
        # Literal names: DuckDB reads every path as a glob (p[1].parquet would be p1.parquet).
        paths = [duckdb_literal(os.path.join(self._root, f)) for f in files]
        try:
            relation = self.con.read_parquet(
                paths, hive_partitioning=True, filename=True, file_row_number=True,
                union_by_name=True,
            )
            relation.create_view("source_file_rows")
            return self._raw_from("source_file_rows", self._root)
        except duckdb.Error as exc:
            raise self._read_error(exc) from exc

    def _read_error(self, exc: duckdb.Error) -> SourceError:
        """The engine's error as the source's: a lake file, never the store, is at fault."""
        text = str(exc)
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        first = re.sub(r"^[A-Za-z ]+Error: ", "", lines[0] if lines else type(exc).__name__)
        named = re.search(r'"([^"]+)"', text) or re.search(r"'([^']+\.parquet)'", text)
        name = named.group(1) if named else ""
        if name.startswith(self._root):
            name = os.path.relpath(name, self._root)
        where = f"source {self.config.name}"
        if isinstance(exc, duckdb.IOException) and (
            "No files found" in text or "No such file" in text
        ):
            return SourceError(
                f"{where}: file {name or '?'} is gone (removed after it was listed); run the"
                " command again"
            )
        return SourceError(f"{where}: cannot be read ({first[:300]})")

    def _raw_from(self, relation: str, root: str | None) -> dict[str, str]:
        columns = dict(
            self.con.execute(
                "SELECT column_name, column_type FROM (DESCRIBE " + relation + ")"
            ).fetchall()
        )
        mapped = self._mapped(list(columns))
        if root is None:
            where = "CAST(NULL AS VARCHAR) AS file_, CAST(NULL AS BIGINT) AS row_"
        else:
            # Files are named relative to the source root, as the store records them.
            prefix = len(os.path.join(root, ""))
            where = f"substr(filename, {prefix + 1}) AS file_, file_row_number + 1 AS row_"
        select = ", ".join(
            f"{quote_ident(theirs)} AS {quote_ident(ours)}" for ours, theirs in mapped
        )
        self.con.execute(
            f"CREATE OR REPLACE TEMP VIEW source_raw AS SELECT {select}, {where} FROM {relation}"
        )
        return {ours: columns[theirs] for ours, theirs in mapped}

    def _execute(self, sql: str, params: dict[str, Any]) -> pa.Table:
        try:
            relation = self.con.sql(sql, params=params or None)
            return pa.table({}) if relation is None else relation.to_arrow_table()
        except duckdb.Error as exc:
            raise self._read_error(exc) from exc

    def register(self, name: str, table: pa.Table) -> None:
        self.con.register(name, table)

    def close(self) -> None:
        self.con.close()


class DuckDBDelta(DuckDBParquet):
    """A Delta table, listed by ``deltalake`` and read by DuckDB as an Arrow dataset."""

    def __init__(self, config: SourceConfig) -> None:
        Source.__init__(self, config)
        try:
            from deltalake import DeltaTable
        except ImportError as exc:  # pragma: no cover - a dependency
            raise SourceError("source delta needs the deltalake package") from exc
        try:
            self.table = DeltaTable(config.path)
        except Exception as exc:  # deltalake raises its own TableNotFoundError
            raise SourceError(f"source path {config.path} is not a Delta table ({exc})") from exc
        self.con = _engine()
        self._root = config.path
        self._listed = []
        #: Files a refresh reads that the newest version no longer holds, by their
        #: unquoted path: the version whose snapshot still does (see :meth:`listing`).
        self._older: dict[str, int] = {}

    def files(self) -> list[SourceFile] | None:
        return self._snapshot()

    def _snapshot(self) -> list[SourceFile]:
        """The files of the newest version (which :meth:`listing` reads versions up to)."""
        self.table.update_incremental()  # the newest version: files added since it was opened
        self._older = {}
        actions = self.table.get_add_actions(flatten=True)
        actions = pa.table(actions) if not isinstance(actions, pa.Table) else actions
        paths = actions.column("path").to_pylist()
        sizes = actions.column("size_bytes").to_pylist()
        times = actions.column("modification_time").to_pylist()
        return sorted(
            SourceFile(p, int(s), t.timestamp() if hasattr(t, "timestamp") else float(t) / 1000)
            for p, s, t in zip(paths, sizes, times, strict=True)
        )

    def listing(self, counted: Counted, version: int | None) -> Listing | None:
        """What the versions after ``version`` added and removed (module delta_log).

        A table never refreshed is counted from its newest version's files; a
        store that counted it before versions were recorded has the whole
        log read, its counted files taken as counted.
        """
        from fieldtrust.ingest.sources.delta_log import delta_changes, first_logged_version

        listed = self._snapshot()
        newest = self.table.version()
        if version is None and not counted:
            return Listing(listed, version=newest)
        now = {f.path: f for f in listed}
        changed = [p for p, (size, _) in sorted(counted.items())
                   if p in now and now[p].size != size]
        first = version + 1 if version is not None else first_logged_version(
            self.table.table_uri, newest, self.config.name)
        if first > newest:
            return Listing([], changed, version=newest)
        changes = delta_changes(self.table.table_uri, first, newest, set(counted),
                                source=self.config.name)
        reads = [*changes.added.items(), *changes.removed.items()]
        self._older = {unquote(f.path): v for f, v in reads if f.path not in now}

        def as_file(logged: Any) -> SourceFile:
            return SourceFile(logged.path, logged.size, logged.modified)

        return Listing(
            sorted(as_file(f) for f in changes.added), changed,
            removed=sorted(as_file(f) for f in changes.removed),
            rewritten=sorted(as_file(f) for f in changes.rewritten if f.path not in counted),
            version=newest,
        )

    def check(self, files: Sequence[str]) -> None:
        """Nothing to check: Delta's writers hold every file to the table's schema."""

    def _raw(self, files: Sequence[str] | None) -> dict[str, str]:
        import pyarrow.dataset as ds

        dataset = self.table.to_pyarrow_dataset()
        if files is not None:
            # Fragments are named relative to the table, as its add actions are (which
            # quote their paths as URIs).
            wanted = {os.path.normpath(unquote(f)) for f in files}
            fragments = [f for f in dataset.get_fragments() if self._relative(f.path) in wanted]
            found = {self._relative(f.path) for f in fragments}
            by_version: dict[int, set[str]] = {}
            for path in sorted(wanted - found):
                if path in self._older:
                    by_version.setdefault(self._older[path], set()).add(path)
            for version, paths in sorted(by_version.items()):
                fragments += self._fragments_of(version, paths, dataset)
            dataset = ds.FileSystemDataset(
                fragments, dataset.schema, dataset.format, dataset.filesystem
            )
        self.con.register("source_delta_rows", dataset)
        return self._raw_from("source_delta_rows", None)

    def _relative(self, path: str) -> str:
        return os.path.normpath(os.path.relpath(path, self._root) if os.path.isabs(path)
                                else path)

    def _fragments_of(self, version: int, paths: set[str], current: Any) -> list[Any]:
        """The fragments of ``paths`` as version ``version`` held them (with its partitions)."""
        from deltalake import DeltaTable

        older = DeltaTable(self.config.path, version=version).to_pyarrow_dataset()
        return [
            current.format.make_fragment(f.path, current.filesystem,
                                         partition_expression=f.partition_expression)
            for f in older.get_fragments() if self._relative(f.path) in paths
        ]


_SPARK_TYPES = {
    "string": "VARCHAR", "double": "DOUBLE", "float": "FLOAT", "boolean": "BOOLEAN",
    "timestamp": "TIMESTAMP", "timestamp_ntz": "TIMESTAMP", "date": "DATE",
    "int": "INTEGER", "bigint": "BIGINT", "smallint": "SMALLINT", "tinyint": "TINYINT",
}

_ARROW_TO_SPARK = {
    pa.string(): "STRING", pa.large_string(): "STRING", pa.int64(): "BIGINT",
    pa.int32(): "INT", pa.float64(): "DOUBLE", pa.bool_(): "BOOLEAN",
}


def spark_session(master: str) -> Any:
    """A Spark session for ``master`` (``local[N]`` or ``sc://host:port``), shared per process.

    Local sessions bind the driver to 127.0.0.1 with the web UI off and run in
    UTC, as DuckDB's store connections do.
    """
    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:
        raise SourceError("source spark needs pyspark (pip install pyspark)") from exc
    try:
        if master.startswith("sc://"):
            try:
                builder = SparkSession.builder.remote(master)
            except (ImportError, SystemExit) as exc:  # pyspark exits when grpc is missing
                raise SourceError(
                    f"source spark: Spark Connect ({master}) needs pyspark's connect extra"
                    " (pip install 'pyspark[connect]')"
                ) from exc
        else:
            if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
                raise SourceError(
                    "source spark: local Spark needs Java 17 (apt-get install"
                    " openjdk-17-jre-headless), or use Spark Connect (source_spark = 'sc://host:port')"
                )
            builder = (
                SparkSession.builder.master(master)
                .config("spark.ui.enabled", "false")
                .config("spark.driver.host", "127.0.0.1")
                .config("spark.driver.bindAddress", "127.0.0.1")
                .config("spark.sql.shuffle.partitions", "4")
                .config("spark.ui.showConsoleProgress", "false")
            )
        try:
            session = builder.config("spark.sql.session.timeZone", "UTC").getOrCreate()
        except SystemExit as exc:  # pyspark's connect client exits when grpc is missing
            raise SourceError(
                f"source spark: Spark Connect ({master}) needs pyspark's connect extra"
                " (pip install 'pyspark[connect]')"
            ) from exc
        if not master.startswith("sc://"):
            session.sparkContext.setLogLevel("ERROR")
        return session
    except SourceError:
        raise
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SourceError(f"source spark: cannot reach Spark at {master} ({first})") from exc


class SparkSource(Source):
    """Parquet files or a catalog table, read by Spark."""

    dialect = "spark"

    def __init__(self, config: SourceConfig) -> None:
        super().__init__(config)
        self.spark = spark_session(config.spark)
        self.is_table = config.path.startswith(TABLE_PREFIX)

    def files(self) -> list[SourceFile] | None:
        return None if self.is_table else parquet_files(self.config)

    def _raw(self, files: Sequence[str] | None) -> dict[str, str]:
        try:
            return self._spark_raw(files)
        except SourceError:
            raise
        except Exception as exc:  # pyspark's AnalysisException and the JVM's errors
            raise self._read_error(exc) from exc

    def _read_error(self, exc: Exception) -> SourceError:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        where = f"source {self.config.name}"
        if self.is_table and "TABLE_OR_VIEW_NOT_FOUND" in first:
            table = self.config.path[len(TABLE_PREFIX):]
            return SourceError(f"{where}: there is no table {table} in Spark's catalog")
        return SourceError(f"{where}: cannot be read ({first[:300]})")

    def _spark_raw(self, files: Sequence[str] | None) -> dict[str, str]:
        from pyspark.sql import functions as F

        if self.is_table:
            frame = self.spark.table(self.config.path[len(TABLE_PREFIX):])
            extra = [F.lit(None).cast("string").alias("file_"), F.lit(None).cast("bigint")
                     .alias("row_")]
        else:
            root = self.config.path if os.path.isdir(self.config.path) else self.root()
            if files is None:
                files = [f.path for f in parquet_files(self.config)]
            # Literal names: Hadoop reads every path as a glob.
            paths = [hadoop_literal(os.path.abspath(os.path.join(root, f))) for f in files]
            frame = self.spark.read.option("basePath", os.path.abspath(root)).parquet(*paths)
            prefix = len("file:" + os.path.join(os.path.abspath(root), ""))
            # Spark names files file:/abs/path, quoted as a URI (lake%5B1%5D for lake[1]);
            # the store knows them relative to the root. (A literal + is no space.)
            path = "url_decode(replace(_metadata.file_path, '+', '%2B'))"
            extra = [
                F.expr(f"substr({path}, {prefix + 1})").alias("file_"),
                (F.col("_metadata.row_index") + 1).alias("row_"),
            ]
        types = {f.name: f.dataType.simpleString() for f in frame.schema.fields}
        mapped = self._mapped(list(types))
        frame.select(
            *[F.col(f"`{theirs}`").alias(ours) for ours, theirs in mapped], *extra
        ).createOrReplaceTempView("source_raw")
        return {ours: _SPARK_TYPES.get(types[theirs], types[theirs].upper())
                for ours, theirs in mapped}

    def _execute(self, sql: str, params: dict[str, Any]) -> pa.Table:
        try:
            frame = self.spark.sql(sql, args=params or None)
        except Exception as exc:
            first = str(exc).strip().splitlines()[0]
            raise SourceError(f"source spark: query failed ({first})") from exc
        if sql.lstrip().upper().startswith("CREATE"):
            return pa.table({})
        return frame.toArrow()

    def register(self, name: str, table: pa.Table) -> None:
        schema = ", ".join(
            f"`{f.name}` {_ARROW_TO_SPARK.get(f.type, 'STRING')}" for f in table.schema
        )
        frame = self.spark.createDataFrame(table.to_pylist() or [], schema=schema)
        frame.createOrReplaceTempView(name)


def open_source(config: SourceConfig, *, window: TimeWindow | None = None) -> Source:
    """Open the non-store source ``config`` names.

    ``window`` bounds the extraction times its rows may hold, as at ingest
    (default :class:`~fieldtrust.ingest.rules.TimeWindow`; the CLI passes the
    settings ``earliest_time`` and ``future_days``): a refresh refuses a row
    outside it, and the draw and the queue leave such rows out.

    Raises
    ------
    SourceError
        The path is missing, Spark is unreachable or Java is missing.
    """
    engines: dict[str, type[Source]] = {
        "parquet": DuckDBParquet, "delta": DuckDBDelta, "spark": SparkSource,
    }
    if config.kind not in engines:
        raise SourceError("the store source has no engine to open: its rows are in the store")
    if config.kind == "parquet":
        parquet_files(config)  # a missing path is said now, not at the first query
    source = engines[config.kind](config)
    source.window = window
    return source


def open_configured(config: SourceConfig, *, window: TimeWindow | None = None) -> Source | None:
    """The lake source ``config`` names, opened (as :func:`open_source`); None for ``store``.

    What the draw and the review queue are given: None means the rows are
    the store's own.
    """
    return None if config.is_store else open_source(config, window=window)
