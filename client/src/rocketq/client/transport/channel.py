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
  Requests decoded from one read beyond the in-flight cap wait in a per-connection backlog (at
  most one read's worth, since reading is paused) and start as running ones finish.
* With :class:`ConnectionLimits` (servers; see docs/security.md "Hostile clients and memory
  limits") memory per connection is bounded against peers that send without reading: the
  transport's write buffer gets the high/low water marks, and while the unsent bytes are above
  the high mark no further request is started and the connection is not read (Netty's
  ``writeBufferHighWaterMark`` flow control); reading resumes below the low mark.  Bytes held for
  an incomplete frame are capped per connection and summed over the dispatcher's connections; a
  connection over either cap is aborted with a WARNING, and its buffer is released at once.  A
  client connection (no limits) never stops reading because of its own unsent bytes: that could
  deadlock two peers that both wait for the other to read.
* A request whose header is malformed but whose opaque is usable (``code`` beyond int32, a
  non-object ``extFields``...) is answered ``SYSTEM_ERROR`` naming the problem; a header without
  a usable opaque closes the connection (there is nothing to answer).  A response that cannot be
  encoded (a frame over 16 MiB) becomes a ``SYSTEM_ERROR`` answer instead of a lost request.
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
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import cast

from rocketq.client.errors import ClientError, ProtocolError, RocketQError
from rocketq.client.remoting.codes import ResponseCode
from rocketq.client.remoting.command import RPC_ONEWAY, RPC_RESPONSE, RemotingCommand
from rocketq.client.remoting.connection import (
    MalformedRequest,
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

__all__ = [
    "Channel",
    "ChannelListener",
    "ConnectionLimits",
    "Dispatcher",
    "Processor",
    "RemotingProtocol",
    "TlsRemotingProtocol",
]

log = logging.getLogger("rocketq.transport")

Processor = Callable[[RemotingCommand, "Channel"], Awaitable[RemotingCommand | None]]
"""Handles one request: ``(request, channel it came on) -> response``, or None for no answer."""
ChannelListener = Callable[["Channel"], None]
"""Told about a connection being opened or closed."""


DEFAULT_WRITE_BUFFER_HIGH_WATER_MARK = 4 * 1024 * 1024
DEFAULT_WRITE_BUFFER_LOW_WATER_MARK = 1024 * 1024
DEFAULT_MAX_PENDING_FRAME_BYTES = MAX_FRAME_LENGTH + 4
DEFAULT_MAX_PENDING_FRAME_BYTES_TOTAL = 256 * 1024 * 1024
#: an incomplete frame at least this large, dropped when its connection closes, leaves freed
#: memory in the C heap worth giving back (RemotingProtocol.held_memory, rocketq.server.memory)
HELD_FRAME_BYTES = 1024 * 1024


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """Memory bounds of a server's connections against peers that send without reading.

    ``write_buffer_high_water_mark`` / ``low``: unsent response bytes at which a connection stops
    / resumes reading and starting requests (broker.conf ``writeBufferHighWaterMark`` /
    ``writeBufferLowWaterMark``).  ``max_pending_frame_bytes``: bytes one connection may hold
    for an incomplete frame; ``max_pending_frame_bytes_total``: the same summed over all
    connections of the server.  A connection over either is closed.
    """

    write_buffer_high_water_mark: int = DEFAULT_WRITE_BUFFER_HIGH_WATER_MARK
    write_buffer_low_water_mark: int = DEFAULT_WRITE_BUFFER_LOW_WATER_MARK
    max_pending_frame_bytes: int = DEFAULT_MAX_PENDING_FRAME_BYTES
    max_pending_frame_bytes_total: int = DEFAULT_MAX_PENDING_FRAME_BYTES_TOTAL

    def __post_init__(self) -> None:
        if not 0 <= self.write_buffer_low_water_mark <= self.write_buffer_high_water_mark:
            raise ClientError(
                f"write buffer water marks must satisfy 0 <= low <= high, got low"
                f" {self.write_buffer_low_water_mark} and high {self.write_buffer_high_water_mark}"
            )
        if self.max_pending_frame_bytes <= 0 or self.max_pending_frame_bytes_total <= 0:
            raise ClientError("max_pending_frame_bytes and max_pending_frame_bytes_total must be > 0")


class Dispatcher:
    """Processors by request code and the admission limits shared by a set of connections."""

    def __init__(
        self,
        *,
        max_inflight_per_connection: int,
        max_queued_requests: int,
        limits: ConnectionLimits | None = None,
    ) -> None:
        if max_inflight_per_connection <= 0 or max_queued_requests <= 0:
            raise ClientError("max_inflight_per_connection and max_queued_requests must be > 0")
        self.processors: dict[int, Processor] = {}
        self.max_inflight_per_connection = max_inflight_per_connection
        self.max_queued_requests = max_queued_requests
        self.limits = limits
        self.running = 0
        self.pending_frame_bytes = 0
        """Bytes held for incomplete frames over all connections (counted with ``limits`` only)."""

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
        self._backlog: deque[RemotingCommand | MalformedRequest] = deque()
        self._pending_frame_bytes = 0
        self._malformed_logged = False
        self._reading_paused = False
        self._draining = False
        #: the peer once left unsent responses over the write-buffer high-water mark
        self.backpressured = False
        #: the peer left an incomplete frame of at least HELD_FRAME_BYTES (dropped on close)
        self._held_large_frame = False
        self._can_write = asyncio.Event()
        self._can_write.set()
        self._on_open = on_open
        self._on_close = on_close

    @property
    def held_memory(self) -> bool:
        """The peer made us hold memory that its close frees (rocketq.server.memory): unsent
        responses over the high-water mark, or an incomplete frame of HELD_FRAME_BYTES or more."""
        return self.backpressured or self._held_large_frame

    # -- asyncio.Protocol --------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)
        self.peer = _sockname(transport.get_extra_info("peername"))
        self.local = _sockname(transport.get_extra_info("sockname"))
        limits = self.dispatcher.limits
        if limits is not None:
            self._transport.set_write_buffer_limits(
                high=limits.write_buffer_high_water_mark, low=limits.write_buffer_low_water_mark
            )
        if self._on_open is not None:
            self._on_open(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._can_write.set()
        self._backlog.clear()
        self._release_frame_bytes()
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
        self.backpressured = True
        self._can_write.clear()
        if self.dispatcher.limits is not None:
            self._update_reading()

    def resume_writing(self) -> None:
        self._can_write.set()
        self._pump()

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        try:
            events = self.connection.receive_data(data)
        except ProtocolError as exc:
            log.warning("closing connection from %s: malformed frame: %s", self.peer, exc)
            self._release_frame_bytes()
            self.close()
            return
        if self.dispatcher.limits is not None and not self._account_frame_bytes():
            return
        for event in events:
            if isinstance(event, RequestReceived):
                self._backlog.append(event.command)
            elif isinstance(event, MalformedRequest):
                self._backlog.append(event)
            elif isinstance(event, ResponseReceived):
                fut = self._pending.pop(event.command.opaque, None)
                if fut is not None and not fut.done():
                    fut.set_result(event.command)
            elif isinstance(event, UnexpectedResponse):
                log.debug("%s: response for unknown opaque %d (late?)", self.peer, event.command.opaque)
        if self._backlog:
            self._pump()

    def _account_frame_bytes(self) -> bool:
        """Count this connection's bytes held for an incomplete frame; abort it if over a cap."""
        limits = self.dispatcher.limits
        assert limits is not None
        held = self.connection.buffered
        self.dispatcher.pending_frame_bytes += held - self._pending_frame_bytes
        self._pending_frame_bytes = held
        if held == 0:
            return True
        if held > limits.max_pending_frame_bytes:
            why = (
                f"{held} bytes of an incomplete frame exceed the per-connection cap"
                f" {limits.max_pending_frame_bytes}"
            )
        elif self.dispatcher.pending_frame_bytes > limits.max_pending_frame_bytes_total:
            why = (
                f"incomplete frames of all connections hold {self.dispatcher.pending_frame_bytes} bytes,"
                f" over the total cap {limits.max_pending_frame_bytes_total} (this one {held})"
            )
        else:
            return True
        log.warning("closing connection from %s: %s", self.peer, why)
        self._release_frame_bytes()
        self.abort()
        return False

    def _release_frame_bytes(self) -> None:
        if self._pending_frame_bytes >= HELD_FRAME_BYTES:
            self._held_large_frame = True
        self.dispatcher.pending_frame_bytes -= self._pending_frame_bytes
        self._pending_frame_bytes = 0
        self.connection.release()

    def eof_received(self) -> bool | None:
        return None  # close our side too

    # -- requests from the peer --------------------------------------------------------------

    def _pump(self) -> None:
        """Start backlogged requests while the in-flight cap and the write buffer allow."""
        limit = self.dispatcher.max_inflight_per_connection
        gated = self.dispatcher.limits is not None
        backlog = self._backlog
        while backlog and self._inflight < limit and not self.closed:
            if gated and not self._can_write.is_set():
                break
            item = backlog.popleft()
            if isinstance(item, MalformedRequest):
                self._on_malformed(item)
            else:
                self._on_request(item)
        self._update_reading()

    def _update_reading(self) -> None:
        """Read only while requests can start: no backlog, under the caps, writes draining."""
        stop = bool(self._backlog) or self._inflight >= self.dispatcher.max_inflight_per_connection
        if self.dispatcher.limits is not None and not self._can_write.is_set():
            stop = True
        if stop != self._reading_paused:
            self._set_reading(not stop)

    def _on_malformed(self, bad: MalformedRequest) -> None:
        level = logging.DEBUG if self._malformed_logged else logging.WARNING
        self._malformed_logged = True
        opaque = bad.command.opaque
        log.log(level, "%s: malformed request header (opaque %d): %s", self.peer, opaque, bad.reason)
        if not bad.command.is_oneway:
            answer = RemotingCommand(
                code=ResponseCode.SYSTEM_ERROR,
                opaque=opaque,
                flag=RPC_RESPONSE,
                remark=f"malformed request header: {bad.reason}"[:1000],
            )
            self._write(self.connection.send_response(answer))

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
            try:
                data = self.connection.send_response(prepare_response(cmd, response))
            except ProtocolError as exc:  # e.g. a body over the 16 MiB frame limit
                log.warning("%s: response to code %d cannot be encoded: %s", self.peer, cmd.code, exc)
                data = self.connection.send_response(system_error_response(cmd, exc))
            if not self._can_write.is_set():
                await self._can_write.wait()
            self._write(data)
        finally:
            self.dispatcher.running -= 1
            self._inflight -= 1
            self._pump()

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


#: bytes one read of a TLS connection may deliver (asyncio's own read size)
TLS_READ_BUFFER_SIZE = 256 * 1024


class TlsRemotingProtocol(RemotingProtocol, asyncio.BufferedProtocol):
    """:class:`RemotingProtocol` for TLS connections: a *buffered* protocol.

    asyncio's TLS transport hands a plain ``Protocol`` the decrypted bytes of each 16 KiB record
    in a fresh 256 KiB ``bytes`` object (shrunk afterwards), then joins them into one more copy;
    a buffered protocol has it decrypt record after record straight into one reusable buffer,
    handed on as one ``bytes`` per read (the frame decoder slices frames out of it without
    copying again); docs/performance.md "ACL and TLS" has the figures.  Plaintext
    connections keep the plain ``Protocol``:
    there ``recv`` into a new object is cheaper than ``recv_into`` plus the copy.
    """

    _read_view: memoryview | None = None  # allocated on the first read, dropped on close

    def get_buffer(self, sizehint: int) -> memoryview:
        view = self._read_view
        if view is None:
            view = self._read_view = memoryview(bytearray(TLS_READ_BUFFER_SIZE))
        return view

    def buffer_updated(self, nbytes: int) -> None:
        view = self._read_view
        if view is not None:
            self.data_received(view[:nbytes].tobytes())

    def connection_lost(self, exc: Exception | None) -> None:
        self._read_view = None
        super().connection_lost(exc)


def _expire(fut: asyncio.Future[RemotingCommand]) -> None:
    if not fut.done():
        fut.set_exception(TimeoutError())


def _sockname(name: object) -> str:
    if isinstance(name, tuple) and len(name) >= 2:
        return format_addr(str(name[0]), int(name[1]))
    return str(name)
