"""A store connection that profiles every query it runs, to see what each read scans.

DuckDB's profiler reports, per query, every table scan with the rows it read
and the filters pushed into it. :class:`Profiled` wraps a real connection,
lets the library run as usual, and after each query keeps the scans of
``extractions`` in :attr:`Profiled.scans`. A scan that reads rows of
``extractions`` without a pushed-down filter on given ids (a lookup by id)
is a scan of all extractions (or of all in a week or stratum), which a page
run must never make.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import duckdb

_FETCHES = frozenset({
    "fetchall", "fetchone", "fetchmany", "fetchdf", "df", "arrow", "to_arrow_table",
    "fetch_arrow_table", "fetchnumpy", "pl", "fetch_df", "fetch_record_batch",
})


@dataclass(frozen=True)
class Scan:
    """One table scan of ``extractions`` by one query."""

    sql: str
    rows_scanned: int
    filters: str

    @property
    def by_id(self) -> bool:
        """A lookup of given extraction ids (a filter on the id pushed into it), or no read."""
        return self.rows_scanned == 0 or "extraction_id = '" in self.filters or (
            "extraction_id IN (" in self.filters)


class _Result:
    """A relation or pending result: profiled when its rows are fetched."""

    def __init__(self, owner: Profiled, inner: Any, sql: str) -> None:
        self._owner, self._inner, self._sql = owner, inner, sql

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name not in _FETCHES or not callable(attr):
            return attr

        def fetch(*args: Any, **kwargs: Any) -> Any:
            value = attr(*args, **kwargs)
            self._owner.collect(self._sql)
            return self if value is self._inner else value

        return fetch


class Profiled:
    """``con`` with DuckDB's profiler on; :attr:`scans` lists its scans of extractions."""

    def __init__(self, con: duckdb.DuckDBPyConnection, scans: list[Scan] | None = None) -> None:
        self._con = con
        self.scans: list[Scan] = [] if scans is None else scans
        con.execute("SET enable_profiling = 'no_output'")
        con.execute("SET profiling_mode = 'detailed'")

    def execute(self, sql: str, parameters: Any = None) -> Any:
        result = self._con.execute(sql) if parameters is None else self._con.execute(
            sql, parameters)
        return _Result(self, result, sql)  # profiled once its rows are read

    def sql(self, sql: str, **kwargs: Any) -> Any:
        return _Result(self, self._con.sql(sql, **kwargs), sql)

    query = sql

    def cursor(self) -> Profiled:
        return Profiled(self._con.cursor(), self.scans)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._con, name)

    def collect(self, sql: str) -> None:
        """Keep the scans of extractions in the profile of the query just run."""
        profile = json.loads(self._con.get_profiling_information(format="json"))
        for node in _nodes(profile.get("operator", [])):
            info = node.get("extra_info", {})
            if node.get("type") == "TABLE_SCAN" and str(info.get("Table", "")).endswith(
                ".extractions"
            ):
                self.scans.append(Scan(sql, int(node.get("rows_scanned", 0)),
                                       str(info.get("Filters", ""))))


def _nodes(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    found = []
    for node in nodes:
        found.append(node)
        found.extend(_nodes(node.get("children", [])))
    return found
