"""The manifest of a batch run: which documents went into which batch, and where each stands.

A JSON file written after every change of state (to a temporary file, then
renamed over the old one, so an interruption never leaves half a manifest).
Running ``fieldtrust extract --batch`` again with the same manifest resumes:
finished documents are never resubmitted, batches still running are polled,
and documents waiting for a retry are sent in a new batch.

Layout (``version`` 1)::

    {"version": 1, "run_id": ..., "doc_type": ..., "model": ..., "created_at": ...,
     "documents": {doc_id: {"path", "index", "state", "batch_id", "custom_id",
                            "resubmits", "conversation", "outcome"}},
     "batches": {batch_id: {"state", "created_at", "custom_ids": {custom_id: doc_id}}}}

Document states: ``pending`` (a request is due), ``submitted`` (inside
``batch_id``), ``done`` (result stored; ``outcome`` says ok, flagged or the
failure). Batch states: ``in_progress``, ``collected``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from fieldtrust.store.connection import utc_now
from fieldtrust.store.files import OutputKind, file_head, write_output

from fieldtrust.errors import InputError

VERSION = 1


def new_manifest(*, run_id: str, doc_type: str, model: str) -> dict[str, Any]:
    """An empty manifest for a new run."""
    return {
        "version": VERSION,
        "run_id": run_id,
        "doc_type": doc_type,
        "model": model,
        "created_at": utc_now().isoformat(),
        "documents": {},
        "batches": {},
    }


def load_manifest(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a manifest written by :func:`save_manifest`.

    Raises
    ------
    InputError
        The file is not JSON, or not a manifest of this version.
    """
    file = Path(path)
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(
            f"{file}: not a readable manifest ({exc}); use another --manifest"
        ) from exc
    if not isinstance(data, dict) or data.get("version") != VERSION:
        raise InputError(
            f"{file}: not a version {VERSION} extraction manifest; use another --manifest"
        )
    for key in ("run_id", "doc_type", "model", "documents", "batches"):
        if key not in data:
            raise InputError(f"{file}: manifest lacks {key!r}; it was edited or is truncated")
    return data


def save_manifest(path: str | os.PathLike[str], manifest: dict[str, Any]) -> None:
    """Write ``manifest`` atomically (``store.files.write_output``: a temporary file, then
    a rename), over an earlier manifest only, never over a store or its log."""
    write_output(path, json.dumps(manifest, indent=1, ensure_ascii=False), MANIFEST_FILE)


def _is_manifest(path: Path) -> bool:
    # By its first bytes, as save_manifest writes them: a manifest is saved after every
    # change of state, and reading all of a large one each time would double the cost.
    return file_head(path, 64).startswith(b'{\n "version": %d,\n "run_id": ' % VERSION)

#: A batch run's manifest, as :func:`save_manifest` writes it.
MANIFEST_FILE = OutputKind("batch manifest", _is_manifest)


def check_matches(
    manifest: dict[str, Any], path: str | os.PathLike[str], *, doc_type: str, model: str
) -> None:
    """Refuse to resume a manifest made for another document type or model."""
    for key, wanted in (("doc_type", doc_type), ("model", model)):
        if manifest[key] != wanted:
            raise InputError(
                f"{path}: this manifest's run used {key} {manifest[key]!r}, not {wanted!r};"
                f" resume with --{key.replace('_', '-')} {manifest[key]} or use another --manifest"
            )


def documents_in(manifest: dict[str, Any], state: str) -> list[str]:
    """doc_ids in ``state``, in the order they were added."""
    docs = manifest["documents"]
    chosen = [d for d, e in docs.items() if e["state"] == state]
    return sorted(chosen, key=lambda d: int(docs[d]["index"]))


def batches_in_progress(manifest: dict[str, Any]) -> list[str]:
    """Ids of batches submitted and not yet collected."""
    return [b for b, e in manifest["batches"].items() if e["state"] == "in_progress"]
