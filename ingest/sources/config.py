"""Where extractions are read from: the store itself, a Parquet or Delta lake, or Spark."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from fieldtrust.ingest.extractions import EXTRACTION_COLUMNS
from fieldtrust.store.locations import LOCATION_COLUMNS

from fieldtrust.errors import SourceError

#: Source kinds. ``store``: the embedded ``extractions`` table (rows are ingested).
KINDS = ("store", "parquet", "delta", "spark")

#: Columns a source row may have: the ingest columns (docs/ingest.md), the
#: document's location (document_uri, page, bbox) included, as in a file.
SOURCE_COLUMNS = (*EXTRACTION_COLUMNS, *LOCATION_COLUMNS)

#: ``spark`` paths starting with this name a catalog table instead of Parquet files.
TABLE_PREFIX = "table:"


class SourceSettings(Protocol):
    """The settings a :class:`SourceConfig` is read from (``fieldtrust.settings.Settings``)."""

    @property
    def source(self) -> str: ...

    @property
    def source_path(self) -> str: ...

    @property
    def source_spark(self) -> str: ...

    @property
    def columns(self) -> str: ...

    @property
    def source_columns(self) -> str: ...


@dataclass(frozen=True)
class SourceConfig:
    """An extraction source, from the settings ``source``, ``source_path``, ``source_spark``
    and ``columns`` (with ``source_columns`` over it).

    ``columns`` maps our column names to the source's, as ``(ours, theirs)``
    pairs; a column not mapped is read under its own name.
    """

    kind: str = "store"
    path: str = ""
    spark: str = "local[2]"
    columns: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise SourceError(f"source {self.kind!r} is not one of {', '.join(KINDS)}")
        for ours, theirs in self.columns:
            if ours not in SOURCE_COLUMNS:
                raise SourceError(
                    f"source column mapping: {ours!r} is not an extraction column"
                    f" (known: {', '.join(SOURCE_COLUMNS)})"
                )
            if not theirs:
                raise SourceError(f"source column mapping: {ours!r} maps to an empty name")
        if self.kind != "store" and not self.path:
            raise SourceError(f"source {self.kind} needs source_path (a folder, glob or table)")

    @classmethod
    def from_settings(cls, settings: SourceSettings) -> SourceConfig:
        """The source the settings name (``source``, ``source_path``...), read through
        ``columns`` with ``source_columns`` over it: one mapping for ingest and a lake
        source, so the same log reads the same way wherever it lives."""
        mapping = dict(parse_columns(settings.columns))
        mapping.update(parse_columns(settings.source_columns))
        return cls(settings.source, settings.source_path, settings.source_spark,
                   tuple(sorted(mapping.items())))

    @property
    def is_store(self) -> bool:
        return self.kind == "store"

    @property
    def name(self) -> str:
        """How the source is named in the store and in messages: ``parquet:lake/``."""
        return "store" if self.is_store else f"{self.kind}:{self.path}"

    def source_name(self, ours: str) -> str:
        """The source's name of our column ``ours``."""
        return dict(self.columns).get(ours, ours)


def parse_columns(raw: str | Mapping[str, str] | None) -> tuple[tuple[str, str], ...]:
    """A column mapping from a TOML table or ``ours=theirs,ours=theirs`` text."""
    if not raw:
        return ()
    if isinstance(raw, Mapping):
        return tuple(sorted((str(k), str(v)) for k, v in raw.items()))
    pairs = []
    for part in str(raw).split(","):
        ours, sep, theirs = part.partition("=")
        if not sep:
            raise SourceError(f"source_columns: {part.strip()!r} is not ours=theirs")
        pairs.append((ours.strip(), theirs.strip()))
    return tuple(sorted(pairs))
