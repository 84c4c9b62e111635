"""Extraction sources: the embedded store, a Parquet or Delta lake, or Spark.

Only counts and the sampled rows come home from a lake: see docs/scale.md.
"""

from fieldtrust.ingest.sources.config import KINDS, SourceConfig, parse_columns
from fieldtrust.ingest.sources.engines import Source, SourceFile, open_configured, open_source
from fieldtrust.ingest.sources.refresh import RefreshResult, refresh_source, source_summary

__all__ = [
    "KINDS",
    "RefreshResult",
    "Source",
    "SourceConfig",
    "SourceFile",
    "open_configured",
    "open_source",
    "parse_columns",
    "refresh_source",
    "source_summary",
]
