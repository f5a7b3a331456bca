"""asyncio client transport: ``RemotingClient``, one lazily opened connection per address.

Each connection is a :class:`~rocketq.client.transport.channel.RemotingProtocol`, the one asyncio
protocol implementation the client shares with :class:`rocketq.server.RemotingServer`; requests
are multiplexed over it by opaque.  A connection that breaks is forgotten and the next request to
that address opens a new one; :meth:`RemotingClient.register` installs processors for the requests
a server sends back (transaction check-backs, consumer-change notifications).  ``Channel``,
``Processor`` and ``ChannelListener`` are re-exported from :mod:`rocketq.client.transport.channel`.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable

from rocketq.client.errors import RemotingError
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.frame import MAX_FRAME_LENGTH, SerializeType
from rocketq.client.transport.channel import (
    Channel,
    ChannelListener,
    Dispatcher,
    Processor,
    RemotingProtocol,
    TlsRemotingProtocol,
)
from rocketq.client.transport.common import (
    DEFAULT_CONNECT_TIMEOUT_MS,
    connect_error,
    parse_addr,
    timeout_error,
)

__all__ = ["Channel", "ChannelListener", "Processor", "RemotingClient"]


class RemotingClient:
    """asyncio client: one lazily created connection per address, requests multiplexed by opaque."""

    def __init__(
        self,
        *,
        serialize_type: SerializeType = SerializeType.JSON,
        connect_timeout_ms: float = DEFAULT_CONNECT_TIMEOUT_MS,
        max_inflight_per_connection: int = 64,
        max_queued_requests: int = 10_000,
        max_frame_length: int = MAX_FRAME_LENGTH,
        ssl_context: ssl.SSLContext | None = None,
        rpc_hook: Callable[[RemotingCommand], None] | None = None,
    ) -> None:
        self.serialize_type = serialize_type
        # called on every request before it is sent (ACL signing: rocketq.client.remoting.acl)
        self.rpc_hook = rpc_hook
        self.connect_timeout_ms = connect_timeout_ms
        self.ssl_context = ssl_context  # TLS on every connection (rocketq.client.transport.tls)
        self._dispatcher = Dispatcher(
            max_inflight_per_connection=max_inflight_per_connection, max_queued_requests=max_queued_requests
        )
        self._max_frame_length = max_frame_length
        self._conns: dict[str, RemotingProtocol] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._closed = False

    def register(self, code: int, processor: Processor) -> None:
        """Handle requests with ``code`` that servers send us (broker -> client callbacks)."""
        self._dispatcher.register(code, processor)

    async def get_channel(self, addr: str, timeout_ms: float | None = None) -> Channel:
        """The live connection to ``addr``, connecting if there is none."""
        if self._closed:
            raise RemotingError("the remoting client is closed")
        proto = self._conns.get(addr)
        if proto is not None and not proto.closed:
            return proto.channel
        lock = self._locks.setdefault(addr, asyncio.Lock())
        async with lock:
            proto = self._conns.get(addr)
            if proto is not None and not proto.closed:
                return proto.channel
            proto = await self._connect(addr, timeout_ms)
            self._conns[addr] = proto
            return proto.channel

    async def _connect(self, addr: str, timeout_ms: float | None) -> RemotingProtocol:
        host, port = parse_addr(addr)
        limit_ms = self.connect_timeout_ms if timeout_ms is None else min(timeout_ms, self.connect_timeout_ms)
        loop = asyncio.get_running_loop()

        def forget(p: RemotingProtocol) -> None:
            if self._conns.get(addr) is p:
                del self._conns[addr]

        kind = RemotingProtocol if self.ssl_context is None else TlsRemotingProtocol

        def factory() -> RemotingProtocol:
            return kind(
                self._dispatcher,
                self.serialize_type,
                max_frame_length=self._max_frame_length,
                on_close=forget,
            )

        try:
            connecting = loop.create_connection(factory, host, port, ssl=self.ssl_context)
            _, proto = await asyncio.wait_for(connecting, limit_ms / 1000)
        except TimeoutError:
            raise connect_error(addr, f"timed out after {limit_ms:g} ms") from None
        except OSError as exc:
            raise connect_error(addr, exc) from exc
        return proto

    async def invoke(self, addr: str, cmd: RemotingCommand, timeout_ms: float) -> RemotingCommand:
        """Send a request to ``addr`` and wait up to ``timeout_ms`` (connecting included)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        channel = await self.get_channel(addr, timeout_ms)
        if self.rpc_hook is not None:
            self.rpc_hook(cmd)
        remaining_ms = (deadline - loop.time()) * 1000
        if remaining_ms <= 0:
            raise timeout_error(addr, cmd, timeout_ms)
        try:
            return await channel.invoke(cmd, remaining_ms, reported_timeout_ms=timeout_ms)
        except RemotingError as exc:
            if not channel.is_active:
                self._drop(addr, channel)
            if type(exc) is RemotingError:
                raise RemotingError(f"{exc} (request code {cmd.code} to {addr})") from exc
            raise

    async def invoke_oneway(self, addr: str, cmd: RemotingCommand) -> None:
        channel = await self.get_channel(addr)
        if self.rpc_hook is not None:
            self.rpc_hook(cmd)
        await channel.invoke_oneway(cmd)

    def _drop(self, addr: str, channel: Channel) -> None:
        proto = self._conns.get(addr)
        if proto is not None and proto.channel is channel:
            del self._conns[addr]
            proto.close()

    async def close_channel(self, addr: str) -> None:
        proto = self._conns.pop(addr, None)
        if proto is not None:
            proto.close()
            await proto.closed_event.wait()

    async def close(self) -> None:
        """Close every connection; pending requests fail with RemotingError."""
        self._closed = True
        protos = list(self._conns.values())
        self._conns.clear()
        for p in protos:
            p.close()
        for p in protos:
            await p.closed_event.wait()
        tasks = [t for p in protos for t in p.tasks]
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
