"""Docs keep up with the code: every command and every setting is documented."""

from __future__ import annotations

from pathlib import Path

import pytest
from fieldtrust.store.bar import SETTINGS as BAR_SETTINGS
from fieldtrust.store.bar import setting_default, setting_help

from fieldtrust.cli.reference import command_paths, render
from fieldtrust.settings import Settings

DOCS = Path(__file__).resolve().parents[1] / "docs"
README = Path(__file__).resolve().parents[1] / "README.md"


@pytest.mark.parametrize("command", command_paths())
def test_every_command_is_in_the_cli_reference(command: str) -> None:
    reference = (DOCS / "cli.md").read_text()
    assert f"## `{command}`" in reference, (
        f"{command} is not documented: run python -m fieldtrust.cli.reference > docs/cli.md"
    )


def test_cli_reference_matches_the_help() -> None:
    assert (DOCS / "cli.md").read_text() == render(), (
        "docs/cli.md is stale: run python -m fieldtrust.cli.reference > docs/cli.md"
    )


@pytest.mark.parametrize("name", list(Settings.help_lines()))
def test_every_setting_is_documented(name: str) -> None:
    settings_doc = (DOCS / "settings.md").read_text()
    default = getattr(Settings(), name)
    assert f"| `{name}` | `{default}` |" in settings_doc


@pytest.mark.parametrize("name", BAR_SETTINGS)
def test_every_setting_of_the_bar_is_documented_with_its_default_and_help(name: str) -> None:
    settings_doc = (DOCS / "settings.md").read_text()
    row = f"| `{name}` | `{setting_default(name)}` | {setting_help(name)} |"
    assert row in settings_doc, f"docs/settings.md lacks the row {row}"


@pytest.mark.parametrize("command", [c for c in command_paths() if c != "fieldtrust"])
def test_every_command_help_has_an_example(command: str) -> None:
    reference = (DOCS / "cli.md").read_text()
    section = reference.split(f"## `{command}`", 1)[1].split("\n## ", 1)[0]
    assert "Example" in section, f"{command} --help has no example"


def test_readme_opens_with_the_clone_and_the_two_commands() -> None:
    lines = [line for line in README.read_text().splitlines() if line.strip()]
    block = lines[lines.index("```bash") + 1 : lines.index("```bash") + 5]
    assert block[0].startswith("git clone ") and block[1].startswith("cd fieldtrust")
    assert "fieldtrust serve --demo" in block[2]
    assert "pytest" in block[3]
