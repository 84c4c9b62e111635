"""Commands of this area (being written; registers nothing yet)."""

from __future__ import annotations

import click


def register(group: click.Group) -> None:
    """Add this module's commands to ``group``."""
