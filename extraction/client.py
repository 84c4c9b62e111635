"""The Anthropic client: built from ``ANTHROPIC_API_KEY`` only, retries left to the SDK.

The SDK retries 408, 409, 429 and 5xx (529 overloaded included) with
exponential backoff and honours ``retry-after`` headers; fieldtrust does not
add a second retry layer on top. The key is read from the environment and
handed to the client, nowhere else: it is never a setting, never logged,
never stored, and :func:`redact` strips it from any text fieldtrust keeps.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import anthropic

from fieldtrust.errors import ExtractionError

API_KEY_ENV = "ANTHROPIC_API_KEY"

#: Attempts the SDK makes beyond the first on a transient error.
DEFAULT_MAX_RETRIES = 4

#: Seconds before one request is abandoned (a large PDF can take a while).
DEFAULT_TIMEOUT = 600.0


def api_key_from_env(environ: Mapping[str, str] | None = None) -> str:
    """The API key from ``ANTHROPIC_API_KEY``.

    Raises
    ------
    ExtractionError
        The variable is unset or blank.
    """
    env = os.environ if environ is None else environ
    key = env.get(API_KEY_ENV, "").strip()
    if not key:
        raise ExtractionError(
            f"{API_KEY_ENV} is not set; export your Anthropic API key in that variable"
            " (fieldtrust reads it from the environment only)"
        )
    return key


def make_client(
    api_key: str, *, max_retries: int = DEFAULT_MAX_RETRIES, timeout: float = DEFAULT_TIMEOUT
) -> anthropic.Anthropic:
    """A client for ``api_key`` that retries transient errors itself."""
    return anthropic.Anthropic(api_key=api_key, max_retries=max_retries, timeout=timeout)


def redact(text: str, client: anthropic.Anthropic) -> str:
    """``text`` with the client's API key, if it appears, replaced by ``[redacted]``."""
    key = client.api_key
    if key and key in text:
        return text.replace(key, "[redacted]")
    return text
