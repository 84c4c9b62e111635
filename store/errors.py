"""Errors raised by the store (access control and writes included), and the root every
fieldtrust error derives from."""

from __future__ import annotations


class FieldtrustError(Exception):
    """Root of every error fieldtrust raises on purpose.

    The CLI and the dashboard turn these into a one-line message; anything else
    is a bug and keeps its traceback.
    """


class InputError(FieldtrustError, ValueError):
    """An argument given to a fieldtrust function is outside what it accepts.

    The message names the argument, the value and what would do instead
    (``weeks must be at least 1, got 0``).
    """


class StoreError(FieldtrustError):
    """Something about the store file itself (path, version, lock)."""


class StoreLockedError(StoreError, RuntimeError):
    """Another process holds the DuckDB file and did not let go in time."""


class NotAStoreError(StoreError):
    """The file is a DuckDB database, but not a fieldtrust store; it was left unchanged."""


class NoSpaceError(StoreError):
    """The disk filled up during a write; the transaction was rolled back."""


#: Longest problem line (and source name) a message holds; longer ones are cut.
MAX_LINE_CHARS = 300


def cut(text: str, limit: int = MAX_LINE_CHARS) -> str:
    """``text`` cut to ``limit`` characters, marked with "..."."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


class ValidationError(FieldtrustError, ValueError):
    """Input rows failed validation; nothing was written.

    ``problems`` holds one line per problem (``row 17, column confidence: 1.2 is
    outside [0, 1]``), at most ``shown`` of them, each at most
    :data:`MAX_LINE_CHARS` long; ``total`` counts them all.
    """

    def __init__(self, source: str, problems: list[str], total: int | None = None) -> None:
        total = len(problems) if total is None else total
        source = cut(source)
        problems = [cut(" ".join(p.splitlines())) for p in problems[:20]]
        self.source = source
        self.problems = problems
        self.total = total
        shown = "\n".join(f"  {p}" for p in problems)
        more = self.total - len(problems)
        tail = f"\n  ... and {more} more" if more > 0 else ""
        noun = "problem" if self.total == 1 else "problems"
        super().__init__(
            f"{source}: rejected, {self.total} {noun}; nothing was written\n{shown}{tail}"
        )


class PermissionDenied(FieldtrustError, PermissionError):
    """The acting user's current role does not allow the action."""


class AccessError(FieldtrustError, ValueError):
    """A user name, role or action that cannot be used as given; nothing was written."""


class ConcurrentWriteError(FieldtrustError, RuntimeError):
    """Other writers kept changing the same rows; the write gave up after bounded retries."""
