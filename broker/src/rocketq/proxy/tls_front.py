"""TLS and plaintext on the one gRPC port, as RocketMQ's proxy serves them.

grpcio listens either in plaintext or in TLS on a port; it cannot look at a connection's first
byte.  So with ``tls.server.mode`` ``permissive`` (both) or ``enforcing`` (TLS only) the proxy's
port belongs to rocketq's :class:`~rocketq.server.tls.TlsAcceptor`, the accept loop the remoting
servers use: it peeks each connection's first byte and starts TLS when it is a handshake record
(0x16).  Every accepted connection is then relayed, byte for byte, to the gRPC server listening in
plaintext on a loopback port of its own; TLS connections are decrypted first.  Each side stops
reading while the other side's write buffer is full, so the relay holds no more than a buffer.
The TLS context offers ALPN ``h2``, which gRPC clients require.  In ``enforcing`` mode a
plaintext connection is closed at its first bytes.

The gRPC server sees the relay's loopback address as every call's peer; :meth:`TlsFront.real_peer`
maps it back to the client's address (the ACL's white lists use it).  The relay costs a copy of
every byte through the event loop: without TLS settings the gRPC server owns the port directly.
"""

from __future__ import annotations

import asyncio
import logging
from typing import cast

from rocketq.client.remoting.frame import SerializeType
from rocketq.client.transport.tls import TlsConfig, TlsMode
from rocketq.server.tls import TlsAcceptor

__all__ = ["TlsFront"]

log = logging.getLogger("rocketq.proxy")


class _Backend(asyncio.Protocol):
    """The relay's connection to the gRPC server: what it answers goes back to the client."""

    def __init__(self, front: _Relay) -> None:
        self.front = front

    def data_received(self, data: bytes) -> None:
        if self.front.transport is not None:
            self.front.transport.write(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.front.transport is not None:
            self.front.transport.close()

    # flow control: the gRPC server does not take more, so stop reading from the client
    def pause_writing(self) -> None:
        if self.front.transport is not None:
            self.front.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.front.transport is not None:
            self.front.transport.resume_reading()


class _Relay(asyncio.Protocol):
    """One client connection (decrypted when TLS), copied to a new connection to the gRPC server."""

    def __init__(self, owner: TlsFront) -> None:
        self.owner = owner
        self.transport: asyncio.Transport | None = None
        self.backend: asyncio.Transport | None = None
        self.pending: list[bytes] = []
        self.task: asyncio.Task[None] | None = None
        self.local_port = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses; both have the same methods
        self.transport = cast(asyncio.Transport, transport)
        self.transport.pause_reading()  # until the connection to the gRPC server is open
        self.task = asyncio.get_running_loop().create_task(self._open_backend())

    async def _open_backend(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            backend, _ = await loop.create_connection(
                lambda: _Backend(self), "127.0.0.1", self.owner.backend_port
            )
        except OSError as exc:
            log.warning("the gRPC server did not take a relayed connection: %s", exc)
            if self.transport is not None:
                self.transport.close()
            return
        self.local_port = int(backend.get_extra_info("sockname")[1])
        peer = self.transport.get_extra_info("peername") if self.transport is not None else None
        if peer:
            self.owner.peers[self.local_port] = f"{peer[0]}:{peer[1]}"
        self.backend = backend
        for chunk in self.pending:
            backend.write(chunk)
        self.pending.clear()
        if self.transport is not None and not self.transport.is_closing():
            self.transport.resume_reading()

    def data_received(self, data: bytes) -> None:
        if self.backend is not None:
            self.backend.write(data)
        else:
            self.pending.append(data)

    def eof_received(self) -> bool | None:
        if self.backend is not None and self.backend.can_write_eof():
            self.backend.write_eof()
        return None

    # flow control: the client does not take more, so stop reading from the gRPC server
    def pause_writing(self) -> None:
        if self.backend is not None:
            self.backend.pause_reading()

    def resume_writing(self) -> None:
        if self.backend is not None:
            self.backend.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self.owner.peers.pop(self.local_port, None)
        if self.backend is not None:
            self.backend.close()
        elif self.task is not None:
            self.task.cancel()


class _Refusal(asyncio.Protocol):
    """A plaintext connection to an ``enforcing`` port: closed at its first bytes."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        peer = transport.get_extra_info("peername")
        log.info("plaintext connection from %s refused (tls.server.mode=enforcing)", peer)
        transport.close()


class TlsFront:
    """``await start(host, port)`` on the public port, relaying to ``backend_port``."""

    def __init__(self, tls: TlsConfig, backend_port: int = 0) -> None:
        context = tls.server_context()
        if context is None:
            raise ValueError("TlsFront needs tls.server.mode permissive or enforcing")
        context.set_alpn_protocols(["h2"])
        self.backend_port = backend_port
        #: loopback port of a relayed connection -> the client's ``ip:port``
        self.peers: dict[int, str] = {}
        plain = (lambda: _Relay(self)) if tls.mode is TlsMode.PERMISSIVE else _Refusal
        self._acceptor = TlsAcceptor(
            tls.mode,
            context,
            plain,
            SerializeType.JSON,
            tls_protocol_factory=lambda: _Relay(self),
        )
        if tls.mode is TlsMode.ENFORCING:
            # TlsAcceptor's own plaintext refusal answers remoting frames; gRPC clients get a close
            self._acceptor.mode = TlsMode.PERMISSIVE

    async def start(self, host: str, port: int) -> int:
        return (await self._acceptor.start(host, port))[1]

    async def stop(self) -> None:
        await self._acceptor.stop()

    def real_peer(self, grpc_peer: str) -> str:
        """gRPC's ``ipv4:127.0.0.1:<relay port>`` -> ``ipv4:<client ip>:<port>`` (unchanged if unknown)."""
        port = grpc_peer.rpartition(":")[2]
        client = self.peers.get(int(port)) if port.isdigit() else None
        return f"ipv4:{client}" if client is not None else grpc_peer
