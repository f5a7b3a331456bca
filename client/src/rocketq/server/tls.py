"""TLS on a server's remoting port: the accept loop of ``permissive`` and ``enforcing`` modes.

``disabled`` mode needs nothing here (``loop.create_server`` without ssl).  In the two TLS modes
the server runs :class:`TlsAcceptor`, its own accept loop, because it must look at a
connection's first byte before deciding how to serve it, and asyncio cannot hand bytes it has
already read to a TLS layer started later.  Theory of operation: each accepted socket waits (up
to ``sniff_timeout_s``) until it is readable, its first byte is *peeked* (``MSG_PEEK``, left in
the socket), and the socket is handed to ``loop.connect_accepted_socket`` — with the server's
SSL context when the byte is a TLS handshake record (0x16), plain otherwise.  A plaintext
connection is served normally in ``permissive`` mode; in ``enforcing`` mode it gets
:class:`PlaintextRefusal`, which answers its first request with ``SYSTEM_ERROR`` and a remark
saying TLS is required, then closes: a plaintext client sees a clear error instead of a reset
or a hang.  The per-message path is the same asyncio transport as without TLS.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from collections.abc import Callable
from typing import cast

from rocketq.client.errors import ProtocolError
from rocketq.client.remoting.codes import ResponseCode
from rocketq.client.remoting.connection import RemotingConnection, RequestReceived
from rocketq.client.remoting.frame import SerializeType
from rocketq.client.transport.tls import TLS_HANDSHAKE_RECORD, TlsMode

__all__ = ["PLAINTEXT_REFUSED_REMARK", "PlaintextRefusal", "TlsAcceptor"]

log = logging.getLogger("rocketq.server.tls")

PLAINTEXT_REFUSED_REMARK = (
    "this server requires TLS (tls.server.mode=enforcing): connect with TLS"
    " (ClientConfig use_tls=True, mqadmin --tls, connector option tls=true)"
)

_SSL_HANDSHAKE_TIMEOUT_S = 10.0


class PlaintextRefusal(asyncio.Protocol):
    """Answers the first request of a plaintext connection to an enforcing server, then closes."""

    def __init__(self, serialize_type: SerializeType) -> None:
        self._conn = RemotingConnection(serialize_type)
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses; both have the same methods
        self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        assert self._transport is not None
        try:
            events = self._conn.receive_data(data)
        except ProtocolError:
            self._transport.abort()
            return
        for event in events:
            if isinstance(event, RequestReceived):
                request = event.command
                if not request.is_oneway:
                    response = request.make_response(ResponseCode.SYSTEM_ERROR, PLAINTEXT_REFUSED_REMARK)
                    self._transport.write(self._conn.send_response(response))
                self._transport.close()
                return


class TlsAcceptor:
    """Accept loop of a server in ``permissive`` or ``enforcing`` mode (see the module docstring)."""

    def __init__(
        self,
        mode: TlsMode,
        ssl_context: ssl.SSLContext,
        protocol_factory: Callable[[], asyncio.Protocol],
        serialize_type: SerializeType,
        *,
        sniff_timeout_s: float = 30.0,
        tls_protocol_factory: Callable[[], asyncio.BaseProtocol] | None = None,
    ) -> None:
        if mode is TlsMode.DISABLED:
            raise ValueError("TlsAcceptor serves the permissive and enforcing modes only")
        self.mode = mode
        self._ctx = ssl_context
        self._factory = protocol_factory
        # TLS connections may get their own protocol (RemotingServer: a buffered one)
        self._tls_factory = tls_protocol_factory or protocol_factory
        self._serialize_type = serialize_type
        self._sniff_timeout_s = sniff_timeout_s
        self._sock: socket.socket | None = None
        self._task: asyncio.Task[None] | None = None
        self._pending: set[asyncio.Task[None]] = set()

    async def start(self, host: str, port: int) -> tuple[str, int]:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.create_server((host, port), family=family, backlog=1024)
        sock.setblocking(False)
        self._sock = sock
        self._task = asyncio.get_running_loop().create_task(self._accept_loop(sock))
        name = sock.getsockname()
        return str(name[0]), int(name[1])

    async def _accept_loop(self, listener: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn, _ = await loop.sock_accept(listener)
            except OSError as exc:
                if listener.fileno() < 0:
                    return
                log.warning("accept failed: %s", exc)
                await asyncio.sleep(0.1)
                continue
            task = loop.create_task(self._serve(conn))
            self._pending.add(task)
            task.add_done_callback(self._pending.discard)

    async def _serve(self, conn: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        conn.setblocking(False)
        try:
            first = await asyncio.wait_for(_peek_first_byte(loop, conn), self._sniff_timeout_s)
            if not first:
                conn.close()
                return
            if first[0] == TLS_HANDSHAKE_RECORD:
                await loop.connect_accepted_socket(
                    self._tls_factory, conn, ssl=self._ctx, ssl_handshake_timeout=_SSL_HANDSHAKE_TIMEOUT_S
                )
            elif self.mode is TlsMode.PERMISSIVE:
                await loop.connect_accepted_socket(self._factory, conn)
            else:
                serialize_type = self._serialize_type
                await loop.connect_accepted_socket(lambda: PlaintextRefusal(serialize_type), conn)
        except (OSError, TimeoutError) as exc:
            log.debug("connection dropped before it was served: %s", exc)
            with contextlib.suppress(OSError):
                conn.close()

    async def stop(self) -> None:
        if self._sock is not None:
            self._sock.close()
        for task in [self._task, *self._pending]:
            if task is not None:
                task.cancel()
        tasks = [t for t in [self._task, *self._pending] if t is not None]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        self._task = None


async def _peek_first_byte(loop: asyncio.AbstractEventLoop, conn: socket.socket) -> bytes:
    readable: asyncio.Future[None] = loop.create_future()
    fd = conn.fileno()

    def ready() -> None:
        if not readable.done():
            readable.set_result(None)

    loop.add_reader(fd, ready)
    try:
        await readable
    finally:
        loop.remove_reader(fd)
    return conn.recv(1, socket.MSG_PEEK)
