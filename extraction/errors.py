"""Errors the extraction package raises on purpose.

Per-document problems never raise: they come back as a
:class:`fieldtrust.extraction.results.Failure`. These errors are for what stops a run
before it starts (no API key, an unusable manifest) and for a file that
cannot be turned into a request.
"""

from __future__ import annotations

from fieldtrust.store.errors import FieldtrustError


class ExtractionError(FieldtrustError):
    """Root of the extraction package's errors."""


class MissingApiKeyError(ExtractionError, RuntimeError):
    """``ANTHROPIC_API_KEY`` is not set."""


class DocumentError(ExtractionError, ValueError):
    """A file cannot be sent to the model (type, size, encoding)."""


class ManifestError(ExtractionError, ValueError):
    """A batch manifest file is unreadable or belongs to a different run."""


class ExtractionConfigError(ExtractionError, ValueError):
    """An option of the run (document type, limits) is unusable."""
