"""Reading a small file a person names (a key, a policy file): never more than a cap.

``/dev/zero`` or a log given by mistake must end in a message, not in a read
that fills the memory.
"""

from __future__ import annotations

import os


def read_capped(path: str | os.PathLike[str], limit: int, what: str) -> bytes:
    """The bytes of ``path``, at most ``limit`` of them.

    Raises
    ------
    OSError
        It cannot be read; the message names ``what`` and ``path``.
    ValueError
        It holds more than ``limit`` bytes (said in KB or MB).
    """
    try:
        with open(path, "rb") as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        raise OSError(f"{what} {path}: cannot read it ({exc.strerror or exc})") from exc
    if len(data) > limit:
        size = f"{limit // 2**20} MB" if limit >= 2**20 else f"{limit // 1024} KB"
        raise ValueError(f"{what} {path}: over {size}, not a {what} fieldtrust writes")
    return data
