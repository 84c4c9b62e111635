"""Ingest rules of a value's location: ``document_uri``, ``page`` and ``bbox``, in SQL.

The columns and what they mean: :mod:`fieldtrust.store.locations`. Each rule
here is the SQL twin of a check there (:func:`~fieldtrust.store.locations.uri_problem`),
so a file is refused at ingest for what the viewer would refuse to open.
"""

from __future__ import annotations

from fieldtrust.ingest.rules import Rule, missing_sql, raw_sql, text_sql
from fieldtrust.store.locations import LOCATION_COLUMNS, LOCATION_STORED_COLUMNS

__all__ = ["BBOX_HINT", "LOCATION_COLUMNS", "LOCATION_STORED_COLUMNS", "bbox_sql",
           "location_rules", "location_select", "page_sql"]

BBOX_HINT = "four numbers x0,y0,x1,y1 (fractions of the page, origin top left)"


def _uri_rules(dtype: str) -> list[Rule]:
    """SQL twins of :func:`uri_problem`, one rule per reason."""
    uri = text_sql("document_uri", dtype)
    given = f"NOT {missing_sql('document_uri', dtype)}"
    scheme = f"lower(regexp_extract({uri}, '^([A-Za-z][A-Za-z0-9+.-]*):', 1))"
    # Not url_decode(): it fails on escapes that are no UTF-8 ('%a2'). Only
    # these three escapes can spell '..' or a separator.
    decoded = (f"replace(replace(replace(lower({uri}), '%2e', '.'), '%2f', '/'),"
               f" '%5c', '\\')")
    climbs = rf"regexp_matches({decoded}, '(^|[/\\])\.\.([/\\]|$)')"
    raw = raw_sql("document_uri", dtype)
    prefix = "'{value}' "
    return [
        Rule("document_uri", prefix + "holds a control character",
             f"{given} AND regexp_matches({uri}, '[\\x00-\\x1f\\x7f]')", raw),
        Rule("document_uri", prefix + "is an absolute path; write it relative to the documents"
             " root, or as a file: uri",
             f"{given} AND {scheme} = '' AND (starts_with({uri}, '/') OR starts_with({uri}, '\\'))",
             raw),
        Rule("document_uri", prefix + "has the scheme {extra}:, but a document uri is a relative"
             " path, a file: uri or an http(s) uri",
             f"{given} AND {scheme} NOT IN ('', 'file', 'http', 'https')", raw, scheme),
        Rule("document_uri", prefix + "is an http(s) uri without a host",
             f"{given} AND {scheme} IN ('http', 'https')"
             f" AND NOT regexp_matches({uri}, '^[A-Za-z]+://[^/?#:@]+')", raw),
        Rule("document_uri", prefix + "is a file: uri on another machine; only file:///... on"
             " this one is read",
             f"{given} AND {scheme} = 'file' AND starts_with(lower({uri}), 'file://')"
             f" AND NOT (starts_with(lower({uri}), 'file:///')"
             f" OR starts_with(lower({uri}), 'file://localhost/'))", raw),
        Rule("document_uri", prefix + "climbs out of the documents root with '..'",
             f"{given} AND {scheme} IN ('', 'file') AND {climbs}", raw),
    ]


# --- page and bbox --------------------------------------------------------------------


def page_sql(dtype: str | None) -> str:
    """The page as INTEGER, NULL when absent or not a whole number of at least 1."""
    if dtype is None:
        return "CAST(NULL AS INTEGER)"
    text = text_sql("page", dtype)
    return (f"CASE WHEN regexp_full_match({text}, '[0-9]{{1,9}}(\\.0*)?')"
            f" THEN CAST(TRY_CAST({text} AS DOUBLE) AS INTEGER) END")


def bbox_sql(dtype: str | None) -> str:
    """The bbox as a list of four DOUBLE (NULL parts where unreadable), NULL when absent."""
    if dtype is None:
        return "CAST(NULL AS DOUBLE[])"
    text = text_sql("bbox", dtype)
    parts = f"string_split(regexp_replace({text}, '^\\[|\\]$', '', 'g'), ',')"
    return f"list_transform({parts}, lambda p: TRY_CAST(trim(p) AS DOUBLE))"


def _page_rules(dtypes: dict[str, str]) -> list[Rule]:
    if "page" not in dtypes:
        return []
    dtype = dtypes["page"]
    given = f"NOT {missing_sql('page', dtype)}"
    text = text_sql("page", dtype)
    raw = raw_sql("page", dtype)
    whole = f"regexp_full_match({text}, '[0-9]+(\\.0*)?')"
    return [
        Rule("page", "'{value}' is not a page number (a whole number, 1 for the first page)",
             f"{given} AND NOT {whole}", raw),
        Rule("page", "{value} is not a page number: pages count from 1",
             f"{given} AND {whole} AND TRY_CAST({text} AS DOUBLE) < 1", raw),
        Rule("page", "{value} is not a page number: too large",
             f"{given} AND {whole} AND TRY_CAST({text} AS DOUBLE) > 999999999", raw),
    ]


def _bbox_rules(dtypes: dict[str, str]) -> list[Rule]:
    if "bbox" not in dtypes:
        return []
    dtype = dtypes["bbox"]
    given = f"NOT {missing_sql('bbox', dtype)}"
    box = bbox_sql(dtype)
    raw = raw_sql("bbox", dtype)
    # array_length, not len or list_count: the forms sqlglot writes for Spark too.
    readable = (f"(array_length({box}) = 4"
                f" AND array_length(list_filter({box}, lambda v: isfinite(v))) = 4)")
    inside = (f"({box}[1] >= 0 AND {box}[1] < {box}[3] AND {box}[3] <= 1"
              f" AND {box}[2] >= 0 AND {box}[2] < {box}[4] AND {box}[4] <= 1)")
    page_missing = missing_sql("page", dtypes["page"]) if "page" in dtypes else "true"
    return [
        Rule("bbox", "'{value}' is not a bbox: write " + BBOX_HINT,
             f"{given} AND NOT coalesce({readable}, false)", raw),
        Rule("bbox", "'{value}' does not fit the page: need 0 <= x0 < x1 <= 1 and"
             " 0 <= y0 < y1 <= 1 (origin top left)",
             f"{given} AND coalesce({readable}, false) AND NOT {inside}", raw),
        Rule("bbox", "'{value}' has no page: a bbox needs the page it is on (column page)",
             f"{given} AND {page_missing}", raw),
    ]


def location_rules(dtypes: dict[str, str]) -> list[Rule]:
    """Ingest rules of ``document_uri``, ``page`` and ``bbox`` (only those present)."""
    rules = _uri_rules(dtypes["document_uri"]) if "document_uri" in dtypes else []
    return [*rules, *_page_rules(dtypes), *_bbox_rules(dtypes)]


def location_select(dtypes: dict[str, str]) -> list[str]:
    """SQL giving :data:`LOCATION_STORED_COLUMNS` of valid staged rows, in that order."""
    uri = text_sql("document_uri", dtypes["document_uri"]) if "document_uri" in dtypes \
        else "CAST(NULL AS VARCHAR)"
    box = bbox_sql(dtypes.get("bbox"))
    return [uri, page_sql(dtypes.get("page")), *(f"{box}[{i}]" for i in range(1, 5))]
