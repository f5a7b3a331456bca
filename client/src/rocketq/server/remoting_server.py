"""``RemotingServer``: listen on a TCP port, serve remoting requests with the registered processors.

Every accepted connection is a :class:`~rocketq.client.transport.channel.RemotingProtocol`, the
same asyncio protocol the client uses (one protocol implementation, see that module for admission,
back-pressure and error answers); this module adds only what a server does: listening, knowing
its live channels, telling listeners about them, and stopping.  With a ``tls_mode`` other than
``disabled`` the listening is done by :class:`rocketq.server.tls.TlsAcceptor` (TLS, or TLS and
plaintext on one port).

Theory of operation of ``stop(grace_s)``: stop accepting, make every connection stop reading
(``start_draining``), let the running requests finish and answer for up to ``grace_s`` seconds,
then cancel what is left and close every connection; ``grace_s=0`` is the forced stop (connections
are aborted, running requests are not answered).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Callable

from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.frame import MAX_FRAME_LENGTH, SerializeType
from rocketq.client.transport.channel import (
    Channel,
    ChannelListener,
    ConnectionLimits,
    Dispatcher,
    Processor,
    RemotingProtocol,
    TlsRemotingProtocol,
)
from rocketq.client.transport.common import format_addr
from rocketq.client.transport.tls import TlsMode
from rocketq.server.memory import MemoryTrimmer
from rocketq.server.tls import TlsAcceptor

__all__ = ["RemotingServer", "RequestCheck"]

RequestCheck = Callable[[RemotingCommand, Channel], RemotingCommand | None]
"""Runs before a request's processor: None lets it through, a response refuses it (ACL)."""

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
        limits: ConnectionLimits | None = None,
        tls_mode: TlsMode = TlsMode.DISABLED,
        ssl_context: ssl.SSLContext | None = None,
        request_check: RequestCheck | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.serialize_type = serialize_type
        self._dispatcher = Dispatcher(
            max_inflight_per_connection=max_inflight_per_connection,
            max_queued_requests=max_queued_requests,
            limits=limits or ConnectionLimits(),  # memory bounds against hostile peers (channel.py)
        )
        self._max_frame_length = max_frame_length
        self._on_channel_open = on_channel_open
        self._on_channel_close = on_channel_close
        self._request_check = request_check  # runs before every processor (ACL: rocketq.server.acl)
        self._server: asyncio.Server | None = None
        self._protocols: set[RemotingProtocol] = set()
        self.trimmer = MemoryTrimmer()  # (rocketq.server.memory)
        # TLS (rocketq.server.tls): permissive/enforcing modes run their own accept loop
        self._tls: TlsAcceptor | None = None
        if tls_mode is not TlsMode.DISABLED:
            if ssl_context is None:
                raise ValueError(f"tls_mode {tls_mode.value} needs an ssl_context")
            self._tls = TlsAcceptor(
                tls_mode,
                ssl_context,
                self._make_protocol,
                serialize_type,
                tls_protocol_factory=self._make_tls_protocol,
            )

    def register(self, code: int, processor: Processor) -> None:
        """Route requests with ``code`` to ``processor`` (replacing any earlier one)."""
        checked = processor if self._request_check is None else self._checked(processor)
        self._dispatcher.register(code, checked)

    def _checked(self, processor: Processor) -> Processor:
        """``processor`` behind the request check: a refused request gets the check's answer."""
        check = self._request_check
        assert check is not None

        async def checked(cmd: RemotingCommand, channel: Channel) -> RemotingCommand | None:
            refusal = check(cmd, channel)
            return refusal if refusal is not None else await processor(cmd, channel)

        return checked

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
        if protocol.held_memory:  # unread responses or a large incomplete frame: give the memory back
            self.trimmer.request()
        if self._on_channel_close is not None:
            try:
                self._on_channel_close(protocol.channel)
            except Exception:
                log.exception("channel close listener failed for %s", protocol.peer)

    def _make_protocol(self, kind: type[RemotingProtocol] = RemotingProtocol) -> RemotingProtocol:
        return kind(
            self._dispatcher,
            self.serialize_type,
            max_frame_length=self._max_frame_length,
            on_open=self._opened,
            on_close=self._closed,
        )

    def _make_tls_protocol(self) -> RemotingProtocol:
        return self._make_protocol(TlsRemotingProtocol)  # reads decrypt into one reused buffer

    async def start(self) -> tuple[str, int]:
        """Listen; returns the bound ``(host, port)`` (the real port when 0 was asked for)."""
        if self._tls is not None:
            self.host, self.port = await self._tls.start(self.host, self.port)
            return self.host, self.port
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(self._make_protocol, self.host, self.port, reuse_address=True)
        sockname = self._server.sockets[0].getsockname()
        self.host, self.port = str(sockname[0]), int(sockname[1])
        return self.host, self.port

    async def stop(self, grace_s: float = 5.0) -> None:
        """Stop accepting; let running requests finish for up to ``grace_s``; close everything."""
        if self._server is not None:
            self._server.close()
        if self._tls is not None:
            await self._tls.stop()
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
        self.trimmer.cancel()
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None
