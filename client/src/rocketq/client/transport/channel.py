"""One asyncio connection: the ``asyncio.Protocol`` hosting a sans-IO connection, and its ``Channel``.

Every TCP connection, accepted by :class:`rocketq.server.RemotingServer` or opened by
:class:`~rocketq.client.transport.aio.RemotingClient`, is one :class:`RemotingProtocol` (an
``asyncio.Protocol``, hosted the way uvicorn hosts h11) owning one
:class:`~rocketq.client.remoting.connection.RemotingConnection`.  This is the ONE asyncio
protocol implementation: the client and the server differ only in who creates the connection.
``data_received`` feeds the bytes to the connection and dispatches its events: responses complete
the future of the matching request, requests go to the processor registered for their code in
the :class:`Dispatcher` the connection shares with its siblings.

Theory of operation:

* Each request runs as its own task, so a slow processor (a long-polling pull) never blocks the
  connection.  Admission is bounded twice: a connection with ``max_inflight_per_connection``
  requests running stops reading (TCP pushes back on the peer) until one finishes, and when the
  ``max_queued_requests`` running over all connections are reached a new request is answered
  ``SYSTEM_BUSY`` ``[REJECTREQUEST]...`` at once, as RocketMQ does when its executor is full.
* Unregistered codes get ``REQUEST_CODE_NOT_SUPPORTED``, a raising processor ``SYSTEM_ERROR``
  with the exception text; oneway requests are never answered.  Responses use this side's
  configured serialize type; incoming frames are decoded by their own type byte.
* A malformed frame closes only its own connection (logged at WARNING with the peer address) and
  fails that connection's pending requests; every other connection carries on.
* :meth:`RemotingProtocol.start_draining` stops reading new requests while running ones may still
  answer; the server's graceful stop is built on it.
* Either side may send requests: :meth:`Channel.invoke` is how a server calls a connected client
  back, and a client's dispatcher holds processors for such calls.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import cast

from rocketq.client.errors import ClientError, ProtocolError, RocketQError
from rocketq.client.remoting.command import RPC_ONEWAY, RemotingCommand
from rocketq.client.remoting.connection import (
    RemotingConnection,
    RequestReceived,
    ResponseReceived,
    UnexpectedResponse,
)
from rocketq.client.remoting.frame import MAX_FRAME_LENGTH, SerializeType
from rocketq.client.transport.common import (
    busy_response,
    closed_error,
    format_addr,
    not_supported_response,
    prepare_response,
    system_error_response,
    timeout_error,
)

__all__ = ["Channel", "ChannelListener", "Dispatcher", "Processor", "RemotingProtocol"]

log = logging.getLogger("rocketq.transport")

Processor = Callable[[RemotingCommand, "Channel"], Awaitable[RemotingCommand | None]]
"""Handles one request: ``(request, channel it came on) -> response``, or None for no answer."""
ChannelListener = Callable[["Channel"], None]
"""Told about a connection being opened or closed."""


class Dispatcher:
    """Processors by request code and the admission limits shared by a set of connections."""

    def __init__(self, *, max_inflight_per_connection: int, max_queued_requests: int) -> None:
        if max_inflight_per_connection <= 0 or max_queued_requests <= 0:
            raise ClientError("max_inflight_per_connection and max_queued_requests must be > 0")
        self.processors: dict[int, Processor] = {}
        self.max_inflight_per_connection = max_inflight_per_connection
        self.max_queued_requests = max_queued_requests
        self.running = 0

    def register(self, code: int, processor: Processor) -> None:
        """Route requests with ``code`` to ``processor`` (replacing any earlier one)."""
        self.processors[int(code)] = processor


class Channel:
    """One connection, seen from the code that uses it (processors, the client pool)."""

    def __init__(self, protocol: RemotingProtocol) -> None:
        self._protocol = protocol

    @property
    def remote_address(self) -> str:
        """``"ip:port"`` of the peer."""
        return self._protocol.peer

    @property
    def local_address(self) -> str:
        return self._protocol.local

    @property
    def is_active(self) -> bool:
        return not self._protocol.closed

    async def invoke(
        self, cmd: RemotingCommand, timeout_ms: float, *, reported_timeout_ms: float | None = None
    ) -> RemotingCommand:
        """Send a request over this connection and wait for its response.

        ``reported_timeout_ms`` is the timeout named in a timeout error when the caller's budget
        was larger than what was left of it for this send (the connect took the rest).
        """
        return await self._protocol.invoke(cmd, timeout_ms, reported_timeout_ms)

    async def invoke_oneway(self, cmd: RemotingCommand) -> None:
        """Send a request that expects no response (the ONEWAY flag is set here)."""
        await self._protocol.invoke_oneway(cmd)

    def close(self) -> None:
        self._protocol.close()

    async def wait_closed(self) -> None:
        await self._protocol.closed_event.wait()

    def __repr__(self) -> str:
        return f"Channel({self.local_address} -> {self.remote_address}, active={self.is_active})"


class RemotingProtocol(asyncio.Protocol):
    """One TCP connection driving a RemotingConnection; see the module docstring."""

    def __init__(
        self,
        dispatcher: Dispatcher,
        serialize_type: SerializeType,
        *,
        max_frame_length: int = MAX_FRAME_LENGTH,
        on_open: Callable[[RemotingProtocol], None] | None = None,
        on_close: Callable[[RemotingProtocol], None] | None = None,
    ) -> None:
        self.connection = RemotingConnection(serialize_type, max_frame_length=max_frame_length)
        self.dispatcher = dispatcher
        self.channel = Channel(self)
        self.peer = "?"
        self.local = "?"
        self.closed = False
        self.closed_event = asyncio.Event()
        self.tasks: set[asyncio.Task[None]] = set()
        self._transport: asyncio.Transport | None = None
        self._pending: dict[int, asyncio.Future[RemotingCommand]] = {}
        self._inflight = 0
        self._reading_paused = False
        self._draining = False
        self._can_write = asyncio.Event()
        self._can_write.set()
        self._on_open = on_open
        self._on_close = on_close

    # -- asyncio.Protocol --------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)
        self.peer = _sockname(transport.get_extra_info("peername"))
        self.local = _sockname(transport.get_extra_info("sockname"))
        if self._on_open is not None:
            self._on_open(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._can_write.set()
        self.connection.fail_all()
        pending, self._pending = self._pending, {}
        why = f"connection closed ({exc})" if exc else "connection closed"
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(closed_error(self.peer, why))
        self.closed_event.set()
        if self._on_close is not None:
            self._on_close(self)

    def pause_writing(self) -> None:
        self._can_write.clear()

    def resume_writing(self) -> None:
        self._can_write.set()

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        try:
            events = self.connection.receive_data(data)
        except ProtocolError as exc:
            log.warning("closing connection from %s: malformed frame: %s", self.peer, exc)
            self.close()
            return
        for event in events:
            if isinstance(event, RequestReceived):
                self._on_request(event.command)
            elif isinstance(event, ResponseReceived):
                fut = self._pending.pop(event.command.opaque, None)
                if fut is not None and not fut.done():
                    fut.set_result(event.command)
            elif isinstance(event, UnexpectedResponse):
                log.debug("%s: response for unknown opaque %d (late?)", self.peer, event.command.opaque)

    def eof_received(self) -> bool | None:
        return None  # close our side too

    # -- requests from the peer --------------------------------------------------------------

    def _on_request(self, cmd: RemotingCommand) -> None:
        dispatcher = self.dispatcher
        processor = dispatcher.processors.get(cmd.code)
        if processor is None:
            log.debug("%s: request code %d not supported", self.peer, cmd.code)
            if not cmd.is_oneway:
                self._write(self.connection.send_response(not_supported_response(cmd)))
            return
        if dispatcher.running >= dispatcher.max_queued_requests or self._draining:
            if not cmd.is_oneway:
                self._write(self.connection.send_response(busy_response(cmd, dispatcher.running)))
            return
        dispatcher.running += 1
        self._inflight += 1
        if self._inflight >= dispatcher.max_inflight_per_connection and not self._reading_paused:
            self._set_reading(False)
        task = asyncio.get_running_loop().create_task(self._run(processor, cmd))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _run(self, processor: Processor, cmd: RemotingCommand) -> None:
        try:
            try:
                response = await processor(cmd, self.channel)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                # rocketq errors are bad input (a header, a body) and explain themselves
                trace = not isinstance(exc, RocketQError)
                log.warning("%s: processor for code %d raised: %r", self.peer, cmd.code, exc, exc_info=trace)
                response = system_error_response(cmd, exc)
            if response is None or cmd.is_oneway or self.closed:
                return
            data = self.connection.send_response(prepare_response(cmd, response))
            if not self._can_write.is_set():
                await self._can_write.wait()
            self._write(data)
        finally:
            self.dispatcher.running -= 1
            self._inflight -= 1
            if self._reading_paused and self._inflight < self.dispatcher.max_inflight_per_connection:
                self._set_reading(True)

    def _set_reading(self, on: bool) -> None:
        transport = self._transport
        if transport is None or self.closed or (on and self._draining):
            return
        if on:
            transport.resume_reading()
        else:
            transport.pause_reading()
        self._reading_paused = not on

    def _write(self, data: bytes) -> None:
        if self._transport is not None and not self.closed:
            self._transport.write(data)

    # -- requests to the peer ----------------------------------------------------------------

    async def invoke(
        self, cmd: RemotingCommand, timeout_ms: float, reported_timeout_ms: float | None = None
    ) -> RemotingCommand:
        if self.closed:
            raise closed_error(self.peer, "connection already closed")
        cmd.flag &= ~RPC_ONEWAY  # a request that expects an answer is not oneway
        data = self.connection.send_request(cmd)
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[RemotingCommand] = loop.create_future()
        self._pending[cmd.opaque] = fut
        # One timer on the response future itself: asyncio.wait_for would add a second future,
        # callbacks and a cancellation round trip to every request.
        timer = loop.call_later(timeout_ms / 1000, _expire, fut)
        try:
            if not self._can_write.is_set():
                await asyncio.wait_for(self._can_write.wait(), timeout_ms / 1000)
            self._write(data)
            return await fut
        except TimeoutError:
            raise timeout_error(self.peer, cmd, reported_timeout_ms or timeout_ms) from None
        finally:
            timer.cancel()
            if self._pending.pop(cmd.opaque, None) is not None:
                self.connection.cancel(cmd.opaque)

    async def invoke_oneway(self, cmd: RemotingCommand) -> None:
        if self.closed:
            raise closed_error(self.peer, "connection already closed")
        cmd.flag |= RPC_ONEWAY
        data = self.connection.send_request(cmd)
        if not self._can_write.is_set():
            await self._can_write.wait()
        self._write(data)

    # -- shutdown ----------------------------------------------------------------------------

    def start_draining(self) -> None:
        """Stop reading new requests; running ones may still answer."""
        self._draining = True
        if self._transport is not None and not self.closed:
            self._transport.pause_reading()
            self._reading_paused = True

    def close(self) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.close()

    def abort(self) -> None:
        if self._transport is not None:
            self._transport.abort()


def _expire(fut: asyncio.Future[RemotingCommand]) -> None:
    if not fut.done():
        fut.set_exception(TimeoutError())


def _sockname(name: object) -> str:
    if isinstance(name, tuple) and len(name) >= 2:
        return format_addr(str(name[0]), int(name[1]))
    return str(name)
