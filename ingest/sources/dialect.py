"""Each source query is written once, in DuckDB SQL; Spark runs its sqlglot translation.

sqlglot (rather than Ibis) keeps the one text a reader can run in a DuckDB
shell, and the ingest rules (:mod:`fieldtrust.ingest.rules`) are already
DuckDB SQL: translating them keeps ingest and a lake source on the same
rules and messages. Where sqlglot has no Spark form for a DuckDB function
(``isfinite``), :func:`to_spark` rewrites it.
"""

from __future__ import annotations

from functools import lru_cache

import sqlglot
from sqlglot import exp


def _spark_isfinite(node: exp.Expr) -> exp.Expr:
    if isinstance(node, exp.Anonymous) and node.name.lower() == "isfinite":
        (arg,) = node.expressions
        # Spark orders NaN above +Infinity and has no isfinite(): both tests are needed.
        return sqlglot.parse_one(
            f"(NOT isnan({arg.sql('spark')}) AND abs({arg.sql('spark')})"
            " < CAST('Infinity' AS DOUBLE))",
            read="spark",
        )
    return node


def _spark_full_match(node: exp.Expr) -> exp.Expr:
    if isinstance(node, exp.RegexpFullMatch):
        # The location rules' page test; Spark's RLIKE finds, so the pattern is anchored.
        subject, pattern = node.this, node.expression
        anchored = exp.Concat(expressions=[exp.Literal.string("^(?:"), pattern,
                                           exp.Literal.string(")$")])
        return exp.RegexpLike(this=subject, expression=anchored)
    return node


@lru_cache(maxsize=256)
def to_spark(sql: str) -> str:
    """``sql`` (DuckDB, parameters ``$name``) as Spark SQL (parameters ``:name``)."""
    tree = sqlglot.parse_one(sql, read="duckdb")
    return tree.transform(_spark_isfinite).transform(_spark_full_match).sql("spark")


def for_dialect(sql: str, dialect: str) -> str:
    """``sql`` as the engine ``dialect`` (``duckdb`` or ``spark``) reads it."""
    return sql if dialect == "duckdb" else to_spark(sql)
