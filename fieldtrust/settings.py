"""One settings object: defaults, then a TOML file, then the environment, then flags.

Each field has a default and a help line; ``fieldtrust settings`` prints them
and ``docs/settings.md`` documents them (a test keeps the two in step).
Secrets such as ``ANTHROPIC_API_KEY`` are never settings: they come from the
environment (or Streamlit's ``st.secrets``) only.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from fieldtrust.errors import InputError
from fieldtrust.store.scope import MAX_WEEKS

ENV_PREFIX = "FIELDTRUST_"
CONFIG_ENV = "FIELDTRUST_CONFIG"
DEFAULT_CONFIG_FILE = "fieldtrust.toml"



def _setting(default: Any, help: str) -> Any:
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True)
class Settings:
    db: str = _setting("fieldtrust.duckdb", "Path of the DuckDB store.")
    target: float = _setting(0.95, "Accuracy an automated stratum must reach.")
    confidence: float = _setting(
        0.95, "Statistical confidence (1 - delta) of certified thresholds and alerts."
    )
    weeks: int = _setting(8, "Weeks of labels the calibration report looks at.")
    stability_weeks: int = _setting(
        4, "Recent weeks with labels in which a candidate must hold its accuracy."
    )
    n_min: int = _setting(100, "Labels needed above a threshold before it is tested.")
    seed: int = _setting(20261130, "Seed of the audit sample's permanent random numbers.")
    model: str = _setting("claude-sonnet-4-6", "Claude model used by `fieldtrust extract`.")
    port: int = _setting(8501, "Port of the dashboard server.")
    documents_root: str = _setting(
        "", "Folder document uris are read under (empty: the store file's folder); nothing"
        " outside it is opened."
    )
    documents_remote_hosts: str = _setting(
        "", "Comma-separated hosts whose http(s) documents the dashboard may fetch; other"
        " remote documents are shown as links only."
    )
    source: str = _setting(
        "store",
        "Where extractions are read: store (ingested rows), parquet, delta or spark"
        " (docs/scale.md).",
    )
    source_path: str = _setting(
        "", "Parquet folder or glob, Delta table folder, or for spark Parquet files or table:NAME."
    )
    source_spark: str = _setting(
        "local[2]", "Spark master for source spark: local[N], or Spark Connect sc://host:port."
    )
    columns: str = _setting(
        "", "Your column names, as ours=theirs,... (the TOML table [columns]): read by ingest"
        " and a lake source alike."
    )
    source_columns: str = _setting(
        "", "A lake source's column names over those of columns, as ours=theirs,... (the TOML"
        " table [source.columns])."
    )
    label_studio_pages_url: str = _setting(
        "", "URL prefix of the pages folder `sample --format label-studio` writes, as the"
        " annotators' browsers reach it (empty: Label Studio's local files, its document root"
        " the folder holding the pages folder)."
    )
    earliest_time: str = _setting(
        "2000-01-01", "Earliest extraction or label time accepted at ingest (ISO date, UTC)."
    )
    future_days: float = _setting(
        1.0, "How far past now (in days) an extraction time may lie at ingest."
    )
    user: str = _setting(
        "", "Who you are: the acting user of commands run without --as (empty: none)."
    )


    def __post_init__(self) -> None:
        for f in fields(self):
            problem = _problem(f.name, getattr(self, f.name))
            if problem:
                raise InputError(f"setting {f.name}: {problem}")

    def with_flags(self, **flags: object) -> Settings:
        """These settings with a command's flags laid over them; flags given as ``None`` (not
        used on the command line) change nothing.

        Each flag is named as typed (``--weeks: 0 must be at least 1``) when its value is
        refused.
        """
        given = {name: value for name, value in flags.items() if value is not None}
        for name, value in given.items():
            problem = _problem(name, value)
            if problem:
                raise InputError(f"--{name.replace('_', '-')}: {problem}")
        return dataclasses.replace(self, **given) if given else self  # type: ignore[arg-type]

    @classmethod
    def help_lines(cls) -> dict[str, str]:
        return {f.name: str(f.metadata["help"]) for f in fields(cls)}


def _problem(name: str, value: Any) -> str | None:
    """What is wrong with ``value`` for setting ``name``, or None when it is usable."""
    if name in ("target", "confidence") and not 0 < value < 1:
        return f"{value} must be strictly between 0 and 1"
    if name in ("weeks", "stability_weeks") and not 1 <= value <= MAX_WEEKS:
        return f"{value} must be between 1 and {MAX_WEEKS} weeks"
    if name == "n_min" and value < 1:
        return f"{value} must be at least 1"
    if name == "seed" and not 0 <= value < 2**32:
        # The recalibration folds hand it to scikit-learn, which takes 32 bits.
        return f"{value} must be a whole number from 0 to {2**32 - 1}"
    if name == "port" and not 0 < value < 65536:
        return f"{value} is not a TCP port"
    if name == "earliest_time":
        try:
            dt.date.fromisoformat(value)
        except ValueError:
            return f"{value[:40]!r} is not an ISO date (like 2000-01-01)"
    if name == "future_days" and not 0 <= value <= 3650:
        return f"{value} must be between 0 and 3650"
    return None


def _coerce(name: str, raw: object, kind: type) -> object:
    try:
        return kind(raw)
    except (TypeError, ValueError) as exc:
        raise InputError(f"setting {name}: {raw!r} is not a valid {kind.__name__}") from exc


def load_settings(
    overrides: Mapping[str, object] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    config_file: str | os.PathLike[str] | None = None,
) -> Settings:
    """Resolve settings: defaults < TOML file < ``FIELDTRUST_*`` environment < ``overrides``.

    ``overrides`` holding ``None`` values (flags not given) are ignored.
    """
    env = os.environ if environ is None else environ
    types = {f.name: type(f.default) for f in fields(Settings)}
    values: dict[str, object] = {}

    path = Path(config_file or env.get(CONFIG_ENV, DEFAULT_CONFIG_FILE))
    if path.is_file():
        with path.open("rb") as handle:
            table = tomllib.load(handle)
        table = dict(table.get("fieldtrust", table))
        if isinstance(table.get("source"), dict):
            table.update(_source_table(path, table.pop("source")))
        if isinstance(table.get("columns"), dict):
            table["columns"] = ",".join(f"{k}={v}" for k, v in sorted(table["columns"].items()))
        for name, raw in table.items():
            if name not in types:
                raise InputError(f"{path}: unknown setting {name!r}; known: {', '.join(types)}")
            values[name] = _coerce(name, raw, types[name])
    for name, kind in types.items():
        raw = env.get(ENV_PREFIX + name.upper())
        if raw is not None:
            values[name] = _coerce(name, raw, kind)
    for name, raw in (overrides or {}).items():
        if raw is not None:
            values[name] = _coerce(name, raw, types[name])
    return dataclasses.replace(Settings(), **values)  # type: ignore[arg-type]


_SOURCE_KEYS = {"kind": "source", "path": "source_path", "spark": "source_spark"}


def _source_table(path: Path, table: Mapping[str, Any]) -> dict[str, object]:
    """The ``[source]`` table (kind, path, spark, ``[source.columns]``) as flat settings."""
    values: dict[str, object] = {}
    for key, raw in table.items():
        if key == "columns":
            if not isinstance(raw, dict):
                raise ValueError(f"{path}: [source.columns] must be a table of ours = theirs")
            values["source_columns"] = ",".join(f"{k}={v}" for k, v in sorted(raw.items()))
        elif key in _SOURCE_KEYS:
            values[_SOURCE_KEYS[key]] = raw
        else:
            raise ValueError(
                f"{path}: unknown key {key!r} in [source]; known: kind, path, spark, columns"
            )
    return values
