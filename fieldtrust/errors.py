"""The errors fieldtrust raises on purpose: one vocabulary for every package.

Every class derives from :class:`FieldtrustError`. The CLI turns one into a
line on stderr and exit code 2 (``fieldtrust.cli.main``), the dashboard into
a message on the page (``fieldtrust.dashboard.boundary``); anything else is a
bug and keeps its traceback. Each class also derives from the builtin a
caller would expect (``ValueError`` for input, ``PermissionError`` for a
role), so ``except ValueError`` keeps working.

Which class to raise:

* :class:`InputError`: an argument, option, setting or file fieldtrust cannot
  use as given (``weeks must be at least 1, got 0``). :class:`FieldError` when
  the fault is one named field or column; :class:`ValidationError` when rows
  of a file failed (``row 17, column confidence: 1.2 is outside [0, 1]``);
  :class:`DocumentError` when a document cannot be read, sent or shown.
* :class:`Refused`: the input is fine but the store's state does not allow
  the act (not an automation candidate, nothing to revoke, someone else's
  label is already there).
* :class:`PermissionDenied`: the acting user's role does not allow the act.
* :class:`StoreError`: the store file itself (missing, locked, not a store,
  disk full, history altered, writers kept colliding).
* :class:`SigningError`: no signing key, an unusable key file, or a
  signature that does not hold (a forged decision, an edited policy file).
* :class:`SourceError`: a lake or Spark source cannot be read.
* :class:`ExtractionError`: the extractor cannot run (no API key, the API).

This module imports nothing of fieldtrust: every layer may use it.
"""

from __future__ import annotations


class FieldtrustError(Exception):
    """Root of every error fieldtrust raises on purpose; the message is for people."""


class InputError(FieldtrustError, ValueError):
    """An argument, option, setting or file that cannot be used as given.

    The message names the input, the value and what would do instead.
    """


class FieldError(InputError):
    """One named field (a verdict's column, a design key) cannot be used; ``column`` names it.

    File imports report it as ``row N, column COLUMN: ...``.
    """

    def __init__(self, column: str, message: str) -> None:
        super().__init__(message)
        self.column = column


#: Longest problem line (and source name) a message holds; longer ones are cut.
MAX_LINE_CHARS = 300


def cut(text: str, limit: int = MAX_LINE_CHARS) -> str:
    """``text`` cut to ``limit`` characters, marked with "..."."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


class ValidationError(InputError):
    """Input rows failed validation; nothing was written.

    ``problems`` holds one line per problem (``row 17, column confidence: 1.2 is
    outside [0, 1]``), at most 20 of them, each at most :data:`MAX_LINE_CHARS`
    long; ``total`` counts them all.
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


class DocumentError(InputError):
    """A document cannot be read, sent to the model or shown (type, size, place); not opened."""


class Refused(FieldtrustError, ValueError):
    """The store's state does not allow the act as asked; nothing was written.

    The message says why and what would make it possible (``invoice/tax is
    not an automation candidate (too few labels ...)``).
    """


class PermissionDenied(FieldtrustError, PermissionError):
    """The acting user's current role does not allow the act."""


class StoreError(FieldtrustError):
    """The store file itself: missing, damaged, altered, or writers kept colliding."""


class StoreLockedError(StoreError, RuntimeError):
    """Another process holds the DuckDB file and did not let go in time."""


class NotAStoreError(StoreError):
    """The file is a DuckDB database, but not a fieldtrust store; it was left unchanged."""


class NoSpaceError(StoreError):
    """The disk filled up during a write; the transaction was rolled back."""


class SigningError(FieldtrustError):
    """A signing key is missing or unusable, or a signature does not hold; nothing was written."""


class SourceError(FieldtrustError):
    """An extraction source cannot be read (missing path, Spark unreachable, Java missing...)."""


class ExtractionError(FieldtrustError):
    """The extractor cannot run: no API key, or the API refused the run."""
