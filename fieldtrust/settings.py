"""One settings object: defaults, then a TOML file, then the environment, then flags.

Each field has a default and a help line; ``fieldtrust settings`` prints them
and ``docs/settings.md`` documents them (a test keeps the two in step).
Secrets such as ``ANTHROPIC_API_KEY`` are never settings: they come from the
environment (or Streamlit's ``st.secrets``) only.

The settings of the bar (``target``, ``confidence``, ``weeks``... every name
of :data:`fieldtrust.store.bar.SETTINGS`) are read the same ways but are not
fields here: the store's policy holds their values, and what the file, the
environment or a flag says of them is an *ask*, kept with where it came from
in :attr:`Settings.criteria` and laid over the policy by
:func:`fieldtrust.store.bar.resolve_bar`. Their defaults and help lines are
the bar's, declared once.

A run resolves its settings once: the CLI when it starts, the dashboard
from what ``fieldtrust serve`` resolved and handed over
(:func:`serve_environment`, read back by :func:`served_settings`).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from fieldtrust.errors import InputError
from fieldtrust.store.bar import SETTINGS as BAR_SETTINGS
from fieldtrust.store.bar import Ask, Criteria, setting_problem, setting_type
from fieldtrust.store.files import read_capped
from fieldtrust.store.hosts import setting_hosts

ENV_PREFIX = "FIELDTRUST_"
CONFIG_ENV = "FIELDTRUST_CONFIG"
DEFAULT_CONFIG_FILE = "fieldtrust.toml"
#: The settings ``fieldtrust serve`` resolved, as JSON, for the server it starts.
SERVED_ENV = "FIELDTRUST_SERVED_SETTINGS"


def _setting(default: Any, help: str) -> Any:
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True)
class Settings:
    db: str = _setting("fieldtrust.duckdb", "Path of the DuckDB store.")
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
    signing_key_file: str = _setting(
        "", "Private key file decisions, policy settings and policy exports are signed with"
        " (`fieldtrust keys create PATH`); outside the store's folder, readable only by"
        " those who decide."
    )
    trusted_key_files: str = _setting(
        "", "Public key files (comma-separated) signatures are checked with (empty: the"
        " signing key's own public half)."
    )
    allowed_hosts: str = _setting(
        "", "Host names the dashboard answers besides its address's own (comma-separated,"
        " name or name:port): the name colleagues or a reverse proxy reach it by."
    )
    #: The bar settings asked for (TOML, environment, flags), each with where from.
    criteria: Criteria = field(default=Criteria(), metadata={"bar": True})

    def __post_init__(self) -> None:
        for f in _plain_fields():
            problem = _problem(f.name, getattr(self, f.name))
            if problem:
                raise InputError(f"setting {f.name}: {_shown(getattr(self, f.name))} {problem}")

    def with_flags(self, **flags: object) -> Settings:
        """These settings with a command's flags laid over them; flags given as ``None`` (not
        used on the command line) change nothing. A flag named for a bar setting
        (``--target``, ``--weeks``) is an ask, from that flag.

        Each flag is named as typed (``--weeks: 0 must be between 1 and 520 weeks``) when
        its value is refused.
        """
        given = {name: value for name, value in flags.items() if value is not None}
        for name, value in given.items():
            problem = _problem(name, value)
            if problem:
                raise InputError(f"--{name.replace('_', '-')}: {_shown(value)} {problem}")
        asks = tuple(Ask(name, value, "--" + name.replace("_", "-"))  # type: ignore[arg-type]
                     for name, value in given.items() if name in BAR_SETTINGS)
        plain = {name: value for name, value in given.items() if name not in BAR_SETTINGS}
        if asks:
            plain["criteria"] = Criteria(asks).over(self.criteria)
        return dataclasses.replace(self, **plain) if plain else self  # type: ignore[arg-type]

    @classmethod
    def help_lines(cls) -> dict[str, str]:
        """The help line of every setting that is not the bar's (those are the bar's)."""
        return {f.name: str(f.metadata["help"]) for f in _plain_fields()}

    def to_json(self) -> str:
        """These settings as JSON text (what ``fieldtrust serve`` hands the server)."""
        values: dict[str, Any] = {f.name: getattr(self, f.name) for f in _plain_fields()}
        values["criteria"] = self.criteria.to_list()
        return json.dumps(values, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Settings:
        """Read :meth:`to_json`'s text back; an :class:`InputError` when it is not that."""
        try:
            values = json.loads(text)
            values["criteria"] = Criteria.from_list(values["criteria"])
            return cls(**values)
        except (ValueError, KeyError, TypeError) as exc:
            raise InputError(
                f"{SERVED_ENV} does not hold settings fieldtrust wrote ({exc}); start the"
                " dashboard with `fieldtrust serve`"
            ) from exc


def _plain_fields() -> tuple[dataclasses.Field[Any], ...]:
    return tuple(f for f in fields(Settings) if "help" in f.metadata)


def _problem(name: str, value: Any) -> str | None:
    """What is wrong with ``value`` for setting ``name`` (after the value), or None."""
    if name in BAR_SETTINGS:
        return setting_problem(name, value)
    if name == "seed" and not 0 <= value < 2**32:
        # The recalibration folds hand it to scikit-learn, which takes 32 bits.
        return f"must be a whole number from 0 to {2**32 - 1}"
    if name == "port" and not 0 < value < 65536:
        return "is not a TCP port"
    if name == "earliest_time":
        try:
            dt.date.fromisoformat(value)
        except ValueError:
            return "is not an ISO date (like 2000-01-01)"
    if name == "future_days" and not 0 <= value <= 3650:
        return "must be between 0 and 3650"
    if name == "allowed_hosts":
        try:
            setting_hosts(value)
        except ValueError as exc:
            return f"names {exc}"
    return None


def _shown(value: object) -> str:
    """A value as a message quotes it: numbers as they are, text quoted and cut."""
    return repr(value[:40]) if isinstance(value, str) else str(value)


def _coerce(name: str, raw: object, kind: type) -> object:
    """``raw`` as a value of ``kind``; a number is never rounded or read from a boolean,
    and a text setting takes text (``db = 5`` is no file name)."""
    inexact = isinstance(raw, float) and kind is int and not raw.is_integer()
    if (isinstance(raw, bool) and kind is not bool) or inexact:
        raise InputError(f"setting {name}: {raw!r} is not a valid {kind.__name__}")
    if kind is str and not isinstance(raw, str | dt.date):  # a TOML date is a date
        raise InputError(f"setting {name}: {raw!r} is not text (write it in quotes)")
    try:
        return kind(raw)
    except (TypeError, ValueError) as exc:
        raise InputError(f"setting {name}: {raw!r} is not a valid {kind.__name__}") from exc


def _kinds() -> dict[str, type]:
    """Every setting name a file, the environment or a flag may give, with its type."""
    kinds = {f.name: type(f.default) for f in _plain_fields()}
    kinds.update({name: setting_type(name) for name in BAR_SETTINGS})
    return kinds


def load_settings(
    overrides: Mapping[str, object] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    config_file: str | os.PathLike[str] | None = None,
) -> Settings:
    """Resolve settings: defaults < TOML file < ``FIELDTRUST_*`` environment < ``overrides``.

    ``overrides`` holding ``None`` values (flags not given) are ignored. A bar
    setting given anywhere becomes an ask of :attr:`Settings.criteria`, named
    by where it came from (the file's path, the variable, the flag).
    """
    env = os.environ if environ is None else environ
    kinds = _kinds()
    given: dict[str, tuple[object, str]] = {}

    path = Path(config_file or env.get(CONFIG_ENV, DEFAULT_CONFIG_FILE))
    if path.is_file():
        for name, raw in _file_settings(path).items():
            if name not in kinds:
                raise InputError(f"{path}: unknown setting {name!r}; known: {', '.join(kinds)}")
            given[name] = (_coerce(name, raw, kinds[name]), str(path))
    for name, kind in kinds.items():
        variable = ENV_PREFIX + name.upper()
        raw = env.get(variable)
        if raw is not None:
            given[name] = (_coerce(name, raw, kind), variable)
    for name, raw in (overrides or {}).items():
        if raw is not None:
            given[name] = (_coerce(name, raw, kinds[name]), "--" + name.replace("_", "-"))
    for name, (value, source) in given.items():
        problem = _problem(name, value)
        if problem:
            raise InputError(f"setting {name} (from {source}): {_shown(value)} {problem}")
    plain = {name: value for name, (value, _) in given.items() if name not in BAR_SETTINGS}
    asks = tuple(Ask(name, value, source)  # type: ignore[arg-type]  # checked numbers
                 for name, (value, source) in given.items() if name in BAR_SETTINGS)
    return dataclasses.replace(Settings(), **plain, criteria=Criteria(asks))  # type: ignore[arg-type]


def _file_settings(path: Path) -> dict[str, Any]:
    """The settings a TOML file gives, flat: top level, ``[fieldtrust]`` and ``[source]``.

    A name given twice (at the top level and in ``[fieldtrust]``) is an error, as is
    a file that is not TOML.
    """
    try:
        # Read with a bound: a settings file is a few lines, never a device or a dump.
        document = tomllib.loads(read_capped(path, what="settings file").decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text ({exc.reason})") from exc
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{path}: not a TOML file ({exc})") from exc
    except RecursionError as exc:
        raise InputError(f"{path}: nested too deeply to be settings") from exc
    table = {name: raw for name, raw in document.items() if name != "fieldtrust"}
    inner = document.get("fieldtrust", {})
    if not isinstance(inner, dict):
        raise InputError(f"{path}: fieldtrust must be a table ([fieldtrust]), not {inner!r}")
    for name, raw in inner.items():
        if name in table:
            raise InputError(
                f"{path}: setting {name!r} is given twice, at the top level and in"
                " [fieldtrust]; keep one"
            )
        table[name] = raw
    source = table.pop("source", None)
    if isinstance(source, dict):
        table.update(_source_table(path, source))
    elif source is not None:
        table["source"] = source
    if isinstance(table.get("columns"), dict):  # [columns]: your name for each of ours
        table["columns"] = ",".join(f"{k}={v}" for k, v in sorted(table["columns"].items()))
    return table


_SOURCE_KEYS = {"kind": "source", "path": "source_path", "spark": "source_spark"}


def _source_table(path: Path, table: Mapping[str, Any]) -> dict[str, object]:
    """The ``[source]`` table (kind, path, spark, ``[source.columns]``) as flat settings."""
    values: dict[str, object] = {}
    for key, raw in table.items():
        if key == "columns":
            if not isinstance(raw, dict):
                raise InputError(f"{path}: [source.columns] must be a table of ours = theirs")
            values["source_columns"] = ",".join(f"{k}={v}" for k, v in sorted(raw.items()))
        elif key in _SOURCE_KEYS:
            values[_SOURCE_KEYS[key]] = raw
        else:
            raise InputError(
                f"{path}: unknown key {key!r} in [source]; known: kind, path, spark, columns"
            )
    return values


def serve_environment(settings: Settings) -> dict[str, str]:
    """The environment that hands ``settings`` to the server ``fieldtrust serve`` starts."""
    return {SERVED_ENV: settings.to_json()}


def served_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """The settings of the dashboard server: what ``fieldtrust serve`` resolved and handed over.

    A server started otherwise (``streamlit run`` in development) resolves
    them here, from the TOML file and the environment, as the CLI would.
    """
    env = os.environ if environ is None else environ
    handed = env.get(SERVED_ENV)
    return Settings.from_json(handed) if handed else load_settings(environ=env)
