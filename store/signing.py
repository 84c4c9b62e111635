"""Signatures of what reaches production: decisions, policy settings and the policy file.

The history chain (:mod:`fieldtrust.store.chain`) shows a row was changed, but
not who wrote it: anyone who can write the store file can append a row and
its chain entry through :func:`~fieldtrust.store.chain.chain_rows`, and an
approval written that way passed ``verify``. So the rows that decide what
production automates are also signed, with an Ed25519 key kept outside the
store file:

* the *signing key* (a private key file, setting ``signing_key_file`` or
  ``FIELDTRUST_SIGNING_KEY_FILE``) is held by whoever records decisions: the
  dashboard's server and the managers' and admins' command line. Every chain
  entry of a table in :data:`SIGNED_TABLES` is signed when it is appended, in
  the writer's own transaction; without the key the write is refused.
* the *trusted keys* (public key files, setting ``trusted_key_files``; by
  default the signing key's own public half) are what ``verify``, ``policy
  export`` and production check signatures with. A public key cannot sign,
  so the people who only check (an auditor, the production pipeline) can
  hold it without being able to forge.

A signature covers ``seq`` and ``row_hash`` of its chain entry
(:func:`entry_message`), and the hash covers every entry before it, so a
signed approval cannot be moved to another place in the history, another
store, or a rewritten chain. Entries written before the store had signing
(before migration 0035, :func:`signing_started`) are not signed; an admin
holding the key vouches for them once, after checking them
(:mod:`fieldtrust.store.vouching`), with one signature over the last of them.

Which keys the library uses: those :func:`using` installed for the current
context. The library reads no settings and no environment; the CLI and the
dashboard install the settings' keys (``signing_key_file``,
``trusted_key_files``) for each command and each write, and a script does
the same::

    with signing.using("/etc/fieldtrust/signing.key"):
        approve(con, "mona", "invoice", "total", "certified 4 weeks running")
"""

from __future__ import annotations

import base64
import contextlib
import contextvars
import datetime as dt
import hashlib
import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from fieldtrust.errors import InputError, SigningError

if TYPE_CHECKING:  # imported where used: every command imports this module, few sign
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

#: Chained tables whose every entry must be signed: what production automates, and the bar.
SIGNED_TABLES: tuple[str, ...] = ("decisions", "policy_settings")

#: The environment variable of the ``signing_key_file`` setting.
KEY_ENV = "FIELDTRUST_SIGNING_KEY_FILE"
#: Largest key file read (a PEM key is a few hundred bytes).
_MAX_KEY_BYTES = 16 * 1024
ALGORITHM = "ed25519"


@dataclass(frozen=True)
class SigningKey:
    """A private Ed25519 key and the id of its public half."""

    private: Ed25519PrivateKey
    path: str

    @property
    def key_id(self) -> str:
        return key_id(self.private.public_key())

    def sign(self, message: bytes) -> str:
        """The signature of ``message``, base64."""
        return base64.b64encode(self.private.sign(message)).decode("ascii")


@dataclass(frozen=True)
class TrustedKeys:
    """The public keys signatures are checked with, by key id."""

    keys: Mapping[str, Ed25519PublicKey]

    def __bool__(self) -> bool:
        return bool(self.keys)

    def check(self, key: str, message: bytes, signature: str) -> str | None:
        """Why ``signature`` by key ``key`` over ``message`` does not hold, or None when it does."""
        from cryptography.exceptions import InvalidSignature

        public = self.keys.get(key)
        if public is None:
            return (f"by key {str(key)[:20]}, which is not a trusted key here"
                    " (setting trusted_key_files)")
        try:
            public.verify(base64.b64decode(signature, validate=True), message)
        except (InvalidSignature, ValueError):
            return f"by key {key}, and the signature does not match what it signs"
        return None


def key_id(public: Ed25519PublicKey) -> str:
    """The first 16 hex digits of sha256 over the raw public key: how signatures name a key."""
    from cryptography.hazmat.primitives import serialization

    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:16]


# --- key files ------------------------------------------------------------------------------


def create_key(path: str | os.PathLike[str]) -> SigningKey:
    """Write a new private key to ``path`` (mode 0600) and its public half to ``path.pub``.

    Raises
    ------
    SigningError
        ``path`` or ``path.pub`` exists already (a key is never overwritten), or
        the folder cannot be written.
    """
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    target = Path(path)
    public_path = target.with_name(target.name + ".pub")
    private = Ed25519PrivateKey.generate()
    pem = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    public_pem = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    for where in (target, public_path):
        if where.exists() or where.is_symlink():
            raise SigningError(f"{where} exists already: a key is never overwritten; pick"
                               " another path, or remove the old key if it is no longer used")
    try:
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        descriptor = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(pem)
        public_path.write_bytes(public_pem)
    except OSError as exc:
        raise SigningError(f"cannot write the key {target}: {exc.strerror or exc}") from exc
    return SigningKey(private, str(target))


def load_signing_key(path: str | os.PathLike[str]) -> SigningKey:
    """The private key in the PEM file ``path``.

    Raises
    ------
    SigningError
        The file is missing, unreadable, or not an unencrypted Ed25519 private key.
    """
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    try:
        loaded: Any = serialization.load_pem_private_key(_key_bytes(path, "signing key"),
                                                         password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        loaded = None
    if not isinstance(loaded, Ed25519PrivateKey):
        raise SigningError(f"signing key {path}: not an unencrypted Ed25519 private key (PEM);"
                           " make one with `fieldtrust keys create PATH`")
    return SigningKey(loaded, str(path))


def load_public_key(path: str | os.PathLike[str]) -> Ed25519PublicKey:
    """The public key in the PEM file ``path`` (a private key file gives its public half)."""
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    data = _key_bytes(path, "trusted key")
    loaded: Any = None
    try:
        if b"PRIVATE KEY" in data:
            loaded = serialization.load_pem_private_key(data, password=None).public_key()
        else:
            loaded = serialization.load_pem_public_key(data)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        loaded = None
    if not isinstance(loaded, Ed25519PublicKey):
        raise SigningError(f"trusted key {path}: not an Ed25519 public key (PEM), like the .pub"
                           " file `fieldtrust keys create` writes")
    return loaded


def _key_bytes(path: str | os.PathLike[str], what: str) -> bytes:
    # Imported here: store.files needs store.connection, which needs this module.
    from fieldtrust.store.files import read_capped

    try:
        return read_capped(path, what=what, limit=_MAX_KEY_BYTES)
    except InputError as exc:
        raise SigningError(str(exc)) from exc


# --- which keys this process uses ------------------------------------------------------------

_SIGNING_PATH: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "fieldtrust_signing_key", default=None)
_TRUSTED_PATHS: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "fieldtrust_trusted_keys", default=None)


@contextlib.contextmanager
def using(signing_key: str | None, trusted_keys: str | None = None) -> Iterator[None]:
    """Sign with the key file ``signing_key`` and trust ``trusted_keys`` (comma-separated public
    key files; empty: the signing key's own) inside the block; no ``signing_key``: no key."""
    signing_token = _SIGNING_PATH.set(signing_key or None)
    trusted_token = _TRUSTED_PATHS.set(trusted_keys or None)
    try:
        yield
    finally:
        _TRUSTED_PATHS.reset(trusted_token)
        _SIGNING_PATH.reset(signing_token)


def signing_key_path() -> str | None:
    """The signing key file :func:`using` installed, if any."""
    return _SIGNING_PATH.get()


def current_signer() -> SigningKey:
    """The key decisions are signed with now.

    Raises
    ------
    SigningError
        No key is configured, or its file cannot be used.
    """
    path = signing_key_path()
    if path is None:
        raise SigningError(
            "decisions and policy settings are signed, and no signing key is configured: set"
            f" signing_key_file in fieldtrust.toml or {KEY_ENV} to the key file (create one with"
            " `fieldtrust keys create PATH`; docs/governance.md, \"Signed decisions\")"
        )
    return load_signing_key(path)


def trusted_keys() -> TrustedKeys:
    """The keys signatures are checked with: the trusted key files :func:`using` installed,
    else the signing key's own public half; may be empty."""
    paths = _TRUSTED_PATHS.get()
    keys: dict[str, Ed25519PublicKey] = {}
    if paths:
        for path in (p.strip() for p in paths.split(",")):
            if path:
                public = load_public_key(path)
                keys[key_id(public)] = public
        return TrustedKeys(keys)
    signing = signing_key_path()
    if signing is not None:
        public = load_signing_key(signing).private.public_key()
        keys[key_id(public)] = public
    return TrustedKeys(keys)


# --- signatures of chain entries ---------------------------------------------------------------


def entry_message(kind: str, seq: int, row_hash: str) -> bytes:
    """What a signature of chain entry ``seq`` covers: its hash, and so every entry before it.

    ``kind`` is ``entry`` (the row of that entry) or ``vouch`` (every entry up to it).
    """
    return f"fieldtrust history signature v1\n{kind}\n{seq}\n{row_hash}".encode()


def sign_entries(
    con: duckdb.DuckDBPyConnection, entries: list[tuple[int, str]], signer: SigningKey
) -> None:
    """Record ``signer``'s signature of each chain entry ``(seq, row_hash)``; in the writer's
    transaction."""
    if not entries:
        return
    now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    con.execute(
        "INSERT INTO history_signatures (seq, kind, key_id, signature, signed_at)"
        " SELECT unnest(?::BIGINT[]), 'entry', ?, unnest(?::VARCHAR[]), ?",
        [[seq for seq, _ in entries], signer.key_id,
         [signer.sign(entry_message("entry", seq, row_hash)) for seq, row_hash in entries], now],
    )


@dataclass(frozen=True)
class Signature:
    """One row of ``history_signatures``."""

    seq: int
    kind: str
    key_id: str
    signature: str
    signed_by: str | None
    comment: str | None
    signed_at: dt.datetime


def signatures(con: duckdb.DuckDBPyConnection) -> list[Signature]:
    """Every recorded signature, in chain order."""
    rows = con.execute(
        "SELECT seq, kind, key_id, signature, signed_by, comment, signed_at"
        " FROM history_signatures ORDER BY seq, kind"
    ).fetchall()
    return [Signature(int(r[0]), *r[1:]) for r in rows]


def signing_started(con: duckdb.DuckDBPyConnection) -> int:
    """The chain's head when the store began signing: entries up to it were written unsigned."""
    rows = con.execute("SELECT max(seq) FROM signing_started").fetchall()
    return int(rows[0][0] or 0)


# --- the policy file -----------------------------------------------------------------------------


def canonical_json(payload: Mapping[str, Any]) -> bytes:
    """``payload`` as the bytes a policy signature covers: sorted keys, compact, UTF-8."""
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode()


def policy_message(payload: Mapping[str, Any]) -> bytes:
    """What a policy file's signature covers: every key of the file but ``signature``."""
    unsigned = {k: v for k, v in payload.items() if k != "signature"}
    return b"fieldtrust policy signature v1\n" + canonical_json(unsigned)


def sign_policy(payload: Mapping[str, Any], signer: SigningKey) -> dict[str, Any]:
    """``payload`` with its ``signature``: ``{"algorithm", "key_id", "value"}``."""
    signed = {k: v for k, v in payload.items() if k != "signature"}
    signed["signature"] = {"algorithm": ALGORITHM, "key_id": signer.key_id,
                           "value": signer.sign(policy_message(signed))}
    return signed


def policy_signature_problem(payload: Mapping[str, Any], trusted: TrustedKeys) -> str | None:
    """Why ``payload`` (a parsed policy file) is not signed by a trusted key, or None."""
    signature = payload.get("signature")
    if not isinstance(signature, dict) or not isinstance(signature.get("value"), str) \
            or not isinstance(signature.get("key_id"), str):
        return "is not signed (export it again with this fieldtrust: `fieldtrust policy export`)"
    if signature.get("algorithm") != ALGORITHM:
        return f"is signed with {str(signature.get('algorithm'))[:20]!r}, not {ALGORITHM}"
    if not trusted:
        return ("cannot be checked: no trusted key is configured (setting trusted_key_files, or"
                " signing_key_file)")
    why = trusted.check(signature["key_id"], policy_message(payload), signature["value"])
    return None if why is None else f"is signed {why}"
