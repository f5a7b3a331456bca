"""Writing HA frames straight from the CommitLog's views with ``socket.sendmsg``.

The master pushes replicated bytes as zero-copy views of the mapped segments.  Python 3.11's
transports join the buffers of a ``writelines`` into one new bytes object before the send: a copy
of every replicated byte, made on the event loop, which the broker's puts wait for.  The
:class:`FrameWriter` sends the views with one ``sendmsg`` on a duplicate of the connection's
socket whenever the transport has nothing buffered, and hands what the socket did not take to the
transport, which keeps the order.
"""

from __future__ import annotations

import asyncio
import os
import socket

__all__ = ["FrameWriter", "unsent"]

#: The most buffers one ``sendmsg`` takes (IOV_MAX on Linux and the BSDs; a burst has a few dozen)
_IOV_MAX = 1024


class FrameWriter:
    """Writes one connection's frames, with ``sendmsg`` when the transport has nothing buffered.

    TLS connections, and any transport without a socket of its own, write through the transport.
    """

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self.sock: socket.socket | None = None
        raw = writer.get_extra_info("socket")
        if (
            raw is not None
            and writer.get_extra_info("ssl_object") is None
            and hasattr(socket.socket, "sendmsg")
        ):
            # a duplicate descriptor of the same connection (non-blocking, as the transport set it):
            # asyncio's socket wrapper offers no sendmsg.  Closed by close(), before the transport.
            self.sock = socket.socket(fileno=os.dup(raw.fileno()))

    def write(self, parts: list[bytes | memoryview]) -> None:
        sock = self.sock
        if sock is not None and not self.writer.transport.get_write_buffer_size():
            try:
                sent = sock.sendmsg(parts[:_IOV_MAX])
            except (BlockingIOError, InterruptedError):
                sent = 0
            parts = unsent(parts, sent)
            if not parts:
                return
        self.writer.writelines(parts)

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


def unsent(parts: list[bytes | memoryview], sent: int) -> list[bytes | memoryview]:
    """What is left of ``parts`` after the first ``sent`` bytes went out."""
    for i, part in enumerate(parts):
        size = len(part) if isinstance(part, bytes) else part.nbytes
        if sent < size:
            return [memoryview(part).cast("B")[sent:], *parts[i + 1 :]] if sent else parts[i:]
        sent -= size
    return []
