"""`fieldtrust serve` says who the dashboard acts as: --as, else the user setting."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest
from click.testing import CliRunner

from fieldtrust.cli import serve_cmds
from fieldtrust.cli.main import cli


@pytest.fixture
def store_file(review_store: duckdb.DuckDBPyConnection, db_path: Path) -> Path:
    review_store.close()
    return db_path


def _served(monkeypatch: pytest.MonkeyPatch, db: Path, *args: str,
            env: dict[str, str] | None = None) -> tuple[int, str, list[str] | None]:
    """Run `fieldtrust serve ARGS` up to the moment it would become the server."""
    started: dict[str, Any] = {}

    def become(path: str, argv: list[str], environment: dict[str, str]) -> None:
        started["argv"] = argv

    monkeypatch.setattr(serve_cmds.os, "execve", become)
    result = CliRunner().invoke(cli, ["--db", str(db), "serve", *args], env=env or {})
    return result.exit_code, result.stderr, started.get("argv")


def _acting_as(argv: list[str]) -> str | None:
    mode = argv[argv.index("--") + 1:]
    return mode[mode.index("--as") + 1] if "--as" in mode else None


def test_the_user_setting_is_who_the_dashboard_acts_as(
    store_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before, FIELDTRUST_USER=alice fieldtrust serve let nobody in: "Sign-in is not configured".
    code, err, argv = _served(monkeypatch, store_file, env={"FIELDTRUST_USER": "alice"})
    assert code == 0, err
    assert argv is not None and _acting_as(argv) == "alice"
    # --as wins over the setting; --demo ignores it (the picker chooses).
    _, _, argv = _served(monkeypatch, store_file, "--as", "bob", env={"FIELDTRUST_USER": "alice"})
    assert argv is not None and _acting_as(argv) == "bob"
    _, _, argv = _served(monkeypatch, store_file, "--demo", env={"FIELDTRUST_USER": "alice"})
    assert argv is not None and _acting_as(argv) is None and "--demo" in argv
    # Without either, nobody is named: the dashboard says how to sign in.
    _, _, argv = _served(monkeypatch, store_file)
    assert argv is not None and _acting_as(argv) is None and "--demo" not in argv


def test_a_user_setting_naming_someone_without_a_role_is_refused_before_serving(
    store_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, err, argv = _served(monkeypatch, store_file, env={"FIELDTRUST_USER": "ned"})
    assert (code, argv) == (2, None)
    assert "the user setting (FIELDTRUST_USER) names ned: ned holds no role in" in err
    assert "fieldtrust users grant ned ROLE --as ADMIN" in err
