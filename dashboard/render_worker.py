"""``python -m fieldtrust.dashboard.render_worker MEMORY``: renders pages for the dashboard's
server, in a process whose memory the kernel caps.

The checks of :mod:`fieldtrust.store.documents` refuse a page or an image
whose size alone is too big; what they cannot foresee (a PDF whose content,
fonts or images make its renderer allocate without bound) must not take the
server down with it. So the server renders here: the worker imports the
renderers first, then limits its own address space to what it holds plus
``MEMORY`` bytes (``RLIMIT_AS``), and a render that needs more fails in this
process (a ``MemoryError``, or the process dies), never in the server.

It reads requests on stdin and answers on stdout, each a frame (a 4-byte
big-endian length, then the bytes): a JSON header, then the document's bytes;
the answer is a JSON header, then the PNG (empty for a notice). Nothing is
unpickled on either side: the worker reads hostile documents.
"""

from __future__ import annotations

import json
import resource
import struct
import sys
from typing import IO, Any

_LENGTH = struct.Struct(">I")


def write_frame(stream: IO[bytes], payload: bytes) -> None:
    """Write one frame: its length, then ``payload``."""
    stream.write(_LENGTH.pack(len(payload)))
    stream.write(payload)


def read_frame(stream: IO[bytes]) -> bytes | None:
    """Read one frame (blocking); None at the end of the stream."""
    head = stream.read(_LENGTH.size)
    if len(head) < _LENGTH.size:
        return None
    (length,) = _LENGTH.unpack(head)
    payload = stream.read(length)
    return payload if len(payload) == length else None


def limit_memory(extra: int) -> None:
    """Cap this process's address space at what it has mapped now plus ``extra`` bytes."""
    with open("/proc/self/statm") as statm:
        mapped = int(statm.read().split()[0]) * resource.getpagesize()
    resource.setrlimit(resource.RLIMIT_AS, (mapped + extra, mapped + extra))


def _pixels(value: object) -> int | None:
    """A size in pixels from the request: the rows a page is cut to, or the width it is shown
    at (None: the whole page, its own width)."""
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def answer(request: dict[str, Any], data: bytes, memory: int) -> tuple[dict[str, Any], bytes]:
    """Render one request: the answer's header and PNG bytes."""
    from fieldtrust.dashboard import render

    bbox = request.get("bbox")
    source = render.Source(None, data, str(request.get("uri") or ""))
    try:
        result = render.render_page(source, int(request["page"]),
                                    tuple(bbox) if bbox is not None else None,
                                    bool(request.get("zoom")),
                                    _pixels(request.get("window")),
                                    _pixels(request.get("width")))
    except MemoryError:
        result = render.over_memory(source.uri, memory)
    except Exception as exc:  # a decoder's own failure on a hostile file: the worker goes on
        result = render.Notice(f"The document cannot be shown ({type(exc).__name__}).",
                               source.uri)
    if isinstance(result, render.Notice):
        return {"notice": result.message}, b""
    return ({"width": result.width, "height": result.height, "page": result.page,
             "pages": result.pages, "box": result.box}, result.png)


def main() -> None:
    memory = int(sys.argv[1])
    from fieldtrust.dashboard import render  # the renderers are loaded before the cap

    render.prepare_decoders()
    limit_memory(memory)
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while True:
        header = read_frame(stdin)
        data = read_frame(stdin) if header is not None else None
        if header is None or data is None:
            return  # the server went away
        reply, png = answer(json.loads(header), data, memory)
        write_frame(stdout, json.dumps(reply).encode())
        write_frame(stdout, png)
        stdout.flush()


if __name__ == "__main__":
    main()
