"""One settings object: defaults, then a TOML file, then the environment, then flags.

Each field has a default and a help line; ``fieldtrust settings`` prints them
and ``docs/settings.md`` documents them (a test keeps the two in step).
Secrets such as ``ANTHROPIC_API_KEY`` are never settings: they come from the
environment (or Streamlit's ``st.secrets``) only.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

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
    user: str = _setting(
        "", "Who you are: the acting user of commands run without --as (empty: none)."
    )

    def __post_init__(self) -> None:
        for name in ("target", "confidence"):
            value = getattr(self, name)
            if not 0 < value < 1:
                raise ValueError(f"setting {name}: {value} must be strictly between 0 and 1")
        for name in ("weeks", "stability_weeks", "n_min"):
            if getattr(self, name) < 1:
                raise ValueError(f"setting {name}: {getattr(self, name)} must be at least 1")
        if not 0 < self.port < 65536:
            raise ValueError(f"setting port: {self.port} is not a TCP port")

    @classmethod
    def help_lines(cls) -> dict[str, str]:
        return {f.name: str(f.metadata["help"]) for f in fields(cls)}


def _coerce(name: str, raw: object, kind: type) -> object:
    try:
        return kind(raw)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"setting {name}: {raw!r} is not a valid {kind.__name__}") from exc


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
        for name, raw in table.get("fieldtrust", table).items():
            if name not in types:
                raise ValueError(f"{path}: unknown setting {name!r}; known: {', '.join(types)}")
            values[name] = _coerce(name, raw, types[name])
    for name, kind in types.items():
        raw = env.get(ENV_PREFIX + name.upper())
        if raw is not None:
            values[name] = _coerce(name, raw, kind)
    for name, raw in (overrides or {}).items():
        if raw is not None:
            values[name] = _coerce(name, raw, types[name])
    return dataclasses.replace(Settings(), **values)  # type: ignore[arg-type]
