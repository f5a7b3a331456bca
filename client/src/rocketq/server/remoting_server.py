"""``RemotingServer``: listen on a TCP port, serve remoting requests with the registered processors.

Every accepted connection is a :class:`~rocketq.client.transport.channel.RemotingProtocol`, the
same asyncio protocol the client uses (one protocol implementation, see that module for admission,
back-pressure and error answers); this module adds only what a server does: listening, knowing
its live channels, telling listeners about them, and stopping.

Theory of operation of ``stop(grace_s)``: stop accepting, make every connection stop reading
(``start_draining``), let the running requests finish and answer for up to ``grace_s`` seconds,
then cancel what is left and close every connection; ``grace_s=0`` is the forced stop (connections
are aborted, running requests are not answered).
"""

from __future__ import annotations

import asyncio
import logging

from rocketq.client.remoting.frame import MAX_FRAME_LENGTH, SerializeType
from rocketq.client.transport.channel import (
    Channel,
    ChannelListener,
    Dispatcher,
    Processor,
    RemotingProtocol,
)
from rocketq.client.transport.common import format_addr

__all__ = ["RemotingServer"]

log = logging.getLogger("rocketq.server")


class RemotingServer:
    """An asyncio remoting server; register processors, then ``await start()``."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        serialize_type: SerializeType = SerializeType.JSON,
        max_inflight_per_connection: int = 64,
        max_queued_requests: int = 10_000,
        max_frame_length: int = MAX_FRAME_LENGTH,
        on_channel_open: ChannelListener | None = None,
        on_channel_close: ChannelListener | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.serialize_type = serialize_type
        self._dispatcher = Dispatcher(
            max_inflight_per_connection=max_inflight_per_connection, max_queued_requests=max_queued_requests
        )
        self._max_frame_length = max_frame_length
        self._on_channel_open = on_channel_open
        self._on_channel_close = on_channel_close
        self._server: asyncio.Server | None = None
        self._protocols: set[RemotingProtocol] = set()

    def register(self, code: int, processor: Processor) -> None:
        """Route requests with ``code`` to ``processor`` (replacing any earlier one)."""
        self._dispatcher.register(code, processor)

    @property
    def address(self) -> str:
        return format_addr(self.host, self.port)

    @property
    def channels(self) -> list[Channel]:
        return [p.channel for p in self._protocols if not p.closed]

    @property
    def running_requests(self) -> int:
        return self._dispatcher.running

    def _opened(self, protocol: RemotingProtocol) -> None:
        self._protocols.add(protocol)
        log.debug("accepted connection from %s", protocol.peer)
        if self._on_channel_open is not None:
            self._on_channel_open(protocol.channel)

    def _closed(self, protocol: RemotingProtocol) -> None:
        self._protocols.discard(protocol)
        log.debug("connection from %s closed", protocol.peer)
        if self._on_channel_close is not None:
            try:
                self._on_channel_close(protocol.channel)
            except Exception:
                log.exception("channel close listener failed for %s", protocol.peer)

    def _make_protocol(self) -> RemotingProtocol:
        return RemotingProtocol(
            self._dispatcher,
            self.serialize_type,
            max_frame_length=self._max_frame_length,
            on_open=self._opened,
            on_close=self._closed,
        )

    async def start(self) -> tuple[str, int]:
        """Listen; returns the bound ``(host, port)`` (the real port when 0 was asked for)."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(self._make_protocol, self.host, self.port, reuse_address=True)
        sockname = self._server.sockets[0].getsockname()
        self.host, self.port = str(sockname[0]), int(sockname[1])
        return self.host, self.port

    async def stop(self, grace_s: float = 5.0) -> None:
        """Stop accepting; let running requests finish for up to ``grace_s``; close everything."""
        if self._server is not None:
            self._server.close()
        protocols = list(self._protocols)
        for p in protocols:
            p.start_draining()
        tasks = [t for p in protocols for t in p.tasks]
        if tasks and grace_s > 0:
            await asyncio.wait(tasks, timeout=grace_s)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        for p in protocols:
            if grace_s > 0:
                p.close()
            else:
                p.abort()
        if protocols:
            waiters = [asyncio.ensure_future(p.closed_event.wait()) for p in protocols]
            _, late = await asyncio.wait(waiters, timeout=2.0)
            for waiter in late:
                waiter.cancel()
        for p in list(self._protocols):  # accepted while we were stopping
            p.abort()
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None
