"""HAService: the master's side of replication (RocketMQ's ``HAService`` + ``HAConnection``).

Theory of operation.  An asyncio server on ``haListenPort`` accepts one connection per slave.  A
connection runs two tasks on the broker's event loop.  The reader decodes the slave's offset
reports (:class:`~.protocol.ReportDecoder`) and drops the connection when the slave is silent for
``haHousekeepingInterval`` or sends garbage.  The writer waits for the first report, picks where
to start — the reported offset; the master's min offset for an empty slave (Java 4.x starts an
empty slave at the master's *last* segment; rocketq replicates all retained data); the master's
max offset for a slave that claims more than the master has (logged: the slave truncates or
refuses, docs/replication.md) — then pushes CommitLog bytes from zero-copy views of the segments
in transfers of at most ``haTransferBatchSize``, never across a segment end (as many as there is
data for, up to :data:`BURST_BYTES`, in one ``sendmsg`` straight from the views: see
:class:`~.frame_writer.FrameWriter`), and a size-0 heartbeat after
``haSendHeartbeatInterval`` of silence (and at once after the first report, so a slave learns
where the master stands without waiting).  In controller mode the writer also sends a confirm frame
(protocol.py) whenever the master's confirm offset advanced since the last one it sent.

Acknowledgements.  A report counts as an ack only if it does not exceed what this connection has
sent when it arrives: a divergent slave's claim of a longer log acknowledges nothing.  SYNC_MASTER
sends wait with :meth:`HAService.when_replicated`; :meth:`HAService.is_slave_ok` is Java's
``isSlaveOK``: some connected slave is within ``haMaxGapNotInSync`` bytes.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import heapq
import itertools
import logging
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from rocketq.broker.ha.frame_writer import FrameWriter
from rocketq.broker.ha.protocol import HAProtocolError, ReportDecoder, encode_confirm, encode_transfer_header
from rocketq.broker.store.message_store import MessageStore
from rocketq.broker.store.status import PutMessageStatus
from rocketq.client.remoting.frame import SerializeType
from rocketq.client.remoting.ha_status import HAConnectionInfo
from rocketq.client.transport.tls import TlsMode
from rocketq.server.tls import TlsAcceptor

__all__ = ["HAService", "SlaveConnection"]

log = logging.getLogger(__name__)

#: How often an idle writer looks for new data: an ASYNC_MASTER's puts and other appends do not call
#: :meth:`wakeup` (only SYNC_MASTER puts, which wait for a slave, do; Java's writers wait 100 ms).
POLL_INTERVAL_S = 0.02
#: Transfers written per round with one socket write.  Every write releases the GIL, and getting it
#: back while the dispatch thread runs costs more than the write itself: fewer, larger writes.
BURST_BYTES = 256 * 1024
_READ_SIZE = 64 * 1024


def _now_ms() -> int:
    return int(time.time() * 1000)


class _SlaveSilent(Exception):
    """Nothing from the slave for ``haHousekeepingInterval``: the connection is closed."""


def _settle(fut: asyncio.Future[bool | None], ok: bool | None) -> None:
    if not fut.done():
        fut.set_result(ok)


@dataclass(eq=False)
class SlaveConnection:
    """One slave's replication state, as the master sees it."""

    addr: str
    started: asyncio.Event = field(default_factory=asyncio.Event)
    request_offset: int = -1  # the slave's first report
    transfer_from: int = -1  # the next offset to send
    acked: int = -1  # the highest trusted report (-1: none yet)
    last_report_ms: int = 0
    last_caught_up_ms: int = 0
    bytes_sent: int = 0
    broker_id: int = -1  # controller mode: the id the slave's handshake named
    confirm_sent: int = -1  # controller mode: the last confirm offset sent to this slave


class HAService:
    """The master's HA server; all methods run on the broker's event loop."""

    def __init__(
        self,
        store: MessageStore,
        *,
        host: str,
        port: int,
        batch_size: int,
        heartbeat_interval_s: float,
        housekeeping_interval_s: float,
        max_gap_not_in_sync: int,
        tls_mode: TlsMode = TlsMode.DISABLED,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.store = store
        # TLS on the HA port as on the remoting port (rocketq.server.tls; docs/security.md "HA port")
        self._tls = (
            None
            if ssl_context is None
            else TlsAcceptor(tls_mode, ssl_context, self._stream, SerializeType.JSON)
        )
        self.host, self.port = host, port
        self.batch_size = batch_size
        self.heartbeat_interval_s = heartbeat_interval_s
        self.housekeeping_interval_s = housekeeping_interval_s
        self.max_gap_not_in_sync = max_gap_not_in_sync
        self.connections: set[SlaveConnection] = set()
        self.push_to_slave_max_offset = 0
        self._server: asyncio.Server | None = None
        #: the writers waiting for data (resolved by :meth:`wakeup`: a SYNC_MASTER put, or the
        #: service's tick every POLL_INTERVAL_S while slaves are connected)
        self._wakers: list[asyncio.Future[None]] = []
        self._tick_handle: asyncio.TimerHandle | None = None
        self._waiters: list[tuple[int, int, Callable[[bool], None]]] = []
        #: SYNC_MASTER sends' deadlines in the order they were set (one timer for the earliest,
        #: instead of a timer and a wait_for per send)
        self._deadlines: collections.deque[tuple[float, asyncio.Future[bool | None]]] = collections.deque()
        self._expiry: asyncio.TimerHandle | None = None
        self._seq = itertools.count()
        self._handlers: set[asyncio.Task[None]] = set()
        #: controller mode: reads the slave's handshake, returns its broker id (raises to refuse it)
        self.handshake: Callable[[asyncio.StreamReader], Awaitable[int]] | None = None
        #: called after every trusted ack (controller mode: SyncStateSet and quorum acks)
        self.ack_listeners: list[Callable[[SlaveConnection], None]] = []
        #: controller mode: this master's confirm offset, sent to every slave in confirm frames
        #: whenever it advanced (the slaves serve reads up to it; protocol.py)
        self.confirm_offset: Callable[[], int] | None = None

    async def start(self) -> int:
        """Listen; returns the bound port."""
        if self._tls is not None:
            self.port = (await self._tls.start(self.host, self.port))[1]
            log.info(
                "HA service listening with TLS (%s) on %s:%d", self._tls.mode.value, self.host, self.port
            )
            return self.port
        self._server = await asyncio.start_server(self._serve, self.host, self.port)
        self.port = int(self._server.sockets[0].getsockname()[1])
        log.info("HA service listening on %s:%d", self.host, self.port)
        return self.port

    def _stream(self) -> asyncio.StreamReaderProtocol:
        """What ``asyncio.start_server`` builds per connection, for the TLS accept loop."""
        return asyncio.StreamReaderProtocol(asyncio.StreamReader(), self._serve)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        if self._tls is not None:
            await self._tls.stop()
        for task in list(self._handlers):
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        for handle in (self._tick_handle, self._expiry):
            if handle is not None:
                handle.cancel()
        self._tick_handle = self._expiry = None
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2.0)
        waiters, self._waiters = self._waiters, []
        for _, _, callback in waiters:
            callback(False)

    def wakeup(self) -> None:
        """New data was appended: writers send it now instead of at their next poll."""
        wakers, self._wakers = self._wakers, []
        for fut in wakers:
            if not fut.done():
                fut.set_result(None)

    def _tick(self) -> None:
        """Every POLL_INTERVAL_S while slaves are connected: writers look for data and heartbeats."""
        self.wakeup()
        self._tick_handle = (
            asyncio.get_running_loop().call_later(POLL_INTERVAL_S, self._tick) if self.connections else None
        )

    # -- SYNC_MASTER -------------------------------------------------------------------------------
    def in_sync_slaves(self, offset: int) -> int:
        return sum(
            1 for c in self.connections if c.acked >= 0 and offset - c.acked < self.max_gap_not_in_sync
        )

    def is_slave_ok(self, offset: int) -> bool:
        """Java's ``isSlaveOK``: a connected slave is within ``haMaxGapNotInSync`` of ``offset``."""
        return self.in_sync_slaves(offset) > 0

    def when_replicated(self, offset: int, callback: Callable[[bool], None]) -> None:
        """``callback(True)`` once a slave acknowledged ``offset`` (False if the service stops)."""
        if self.push_to_slave_max_offset >= offset:
            callback(True)
            return
        heapq.heappush(self._waiters, (offset, next(self._seq), callback))

    async def wait_replicated(self, offset: int, timeout_s: float) -> PutMessageStatus:
        """PUT_OK once a slave has ``offset``; SLAVE_NOT_AVAILABLE / FLUSH_SLAVE_TIMEOUT otherwise."""
        if not self.is_slave_ok(offset):
            return PutMessageStatus.SLAVE_NOT_AVAILABLE
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool | None] = loop.create_future()  # None: timed out
        self.when_replicated(offset, functools.partial(_settle, future))
        self._deadlines.append((loop.time() + timeout_s, future))
        if self._expiry is None:
            self._expiry = loop.call_at(self._deadlines[0][0], self._expire)
        self.wakeup()
        ok = await future
        if ok is None:
            log.warning("SYNC_MASTER: no slave acknowledged offset %d within %.1f s", offset, timeout_s)
        return PutMessageStatus.PUT_OK if ok else PutMessageStatus.FLUSH_SLAVE_TIMEOUT

    def _expire(self) -> None:
        """Time out the sends whose deadline passed; re-arm for the earliest left.  (Deadlines are
        set in order: syncFlushTimeout is the same for all, unless changed at runtime, when a send
        may time out up to the old timeout late.)"""
        loop = asyncio.get_running_loop()
        now = loop.time()
        deadlines = self._deadlines
        while deadlines and (deadlines[0][1].done() or deadlines[0][0] <= now):
            _settle(deadlines.popleft()[1], None)
        self._expiry = loop.call_at(deadlines[0][0], self._expire) if deadlines else None

    def _acked(self, conn: SlaveConnection, offset: int) -> None:
        conn.acked = offset
        if offset > self.push_to_slave_max_offset:
            self.push_to_slave_max_offset = offset
        waiters = self._waiters
        while waiters and waiters[0][0] <= self.push_to_slave_max_offset:
            heapq.heappop(waiters)[2](True)
        for listener in self.ack_listeners:
            listener(conn)
        if self.confirm_offset is not None:
            self.wakeup()  # the confirm offset may have advanced: writers tell their slaves

    # -- connections -------------------------------------------------------------------------------
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # stop() ends connections by cancelling their handlers: the handler then returns normally,
        # since Python 3.11's start_server logs a handler that ends cancelled as an ERROR
        with contextlib.suppress(asyncio.CancelledError):
            await self._serve_connection(reader, writer)

    async def _serve_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        peer = writer.get_extra_info("peername")
        conn = SlaveConnection(addr=f"{peer[0]}:{peer[1]}" if peer else "?")
        if self.handshake is not None:
            try:
                conn.broker_id = await asyncio.wait_for(self.handshake(reader), self.housekeeping_interval_s)
            except Exception as exc:  # a bad or stale handshake, a timeout, a closed connection
                log.warning("slave %s refused at the HA handshake: %s", conn.addr, exc)
                self._handlers.discard(task)
                writer.close()
                return
        self.connections.add(conn)
        if self._tick_handle is None:
            self._tick_handle = asyncio.get_running_loop().call_later(POLL_INTERVAL_S, self._tick)
        log.info("slave %s connected to the HA service", conn.addr)
        tasks = [
            asyncio.create_task(self._read(conn, reader)),
            asyncio.create_task(self._write(conn, writer)),
        ]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for t in done:  # the reader and writer log what they expect; a bug must not pass silently
                if not t.cancelled() and t.exception() is not None:
                    log.error("HA connection to %s failed unexpectedly", conn.addr, exc_info=t.exception())
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self.connections.discard(conn)
            writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), 1.0)
            self._handlers.discard(task)
            log.info("slave %s disconnected from the HA service (acked %d)", conn.addr, conn.acked)

    async def _read(self, conn: SlaveConnection, reader: asyncio.StreamReader) -> None:
        decoder = ReportDecoder()
        loop = asyncio.get_running_loop()
        last_read = time.monotonic()
        timer: list[asyncio.TimerHandle] = []

        def check_silence() -> None:  # one timer per interval instead of a wait_for (a task) per read
            idle = time.monotonic() - last_read
            if idle >= self.housekeeping_interval_s:
                reader.set_exception(_SlaveSilent())
            else:
                timer[:] = [loop.call_later(self.housekeeping_interval_s - idle, check_silence)]

        check_silence()
        try:
            while True:
                try:
                    data = await reader.read(_READ_SIZE)
                except _SlaveSilent:
                    log.warning(
                        "slave %s sent nothing for %.0f s (haHousekeepingInterval): closing",
                        conn.addr,
                        self.housekeeping_interval_s,
                    )
                    return
                except OSError as exc:
                    log.info("HA connection from %s failed: %s", conn.addr, exc)
                    return
                last_read = time.monotonic()
                if not data:
                    if decoder.pending:
                        log.error(
                            "HA connection from %s: protocol error, closed in the middle of an offset "
                            "report (%d of 8 bytes)",
                            conn.addr,
                            decoder.pending,
                        )
                    return
                try:
                    reports = decoder.feed(data)
                except HAProtocolError as exc:
                    log.error("HA connection from %s: protocol error, closing: %s", conn.addr, exc)
                    return
                if reports:
                    self._on_report(conn, reports[-1])
        finally:
            for handle in timer:
                handle.cancel()

    def _on_report(self, conn: SlaveConnection, offset: int) -> None:
        now = _now_ms()
        conn.last_report_ms = now
        if conn.request_offset < 0:
            conn.request_offset = offset
            conn.transfer_from = self._start_offset(conn, offset)
            conn.started.set()
        if conn.transfer_from >= offset >= conn.request_offset or offset == conn.transfer_from:
            if offset >= self.store.max_phy_offset:
                conn.last_caught_up_ms = now
            if offset > conn.acked:
                self._acked(conn, offset)

    def _start_offset(self, conn: SlaveConnection, offset: int) -> int:
        lo, hi = self.store.min_phy_offset, self.store.max_phy_offset
        if offset > hi:
            log.warning(
                "slave %s reports CommitLog offset %d beyond this master's max %d: its log diverges "
                "(another master's store, or a tail this master lost); sending from %d, the slave "
                "truncates or refuses (haSlaveTruncateDivergent)",
                conn.addr,
                offset,
                hi,
                hi,
            )
            return hi
        if offset < lo:
            log.info(
                "slave %s starts at %d, below this master's min offset %d: sending from %d",
                conn.addr,
                offset,
                lo,
                lo,
            )
            return lo
        return offset

    async def _write(self, conn: SlaveConnection, writer: asyncio.StreamWriter) -> None:
        await conn.started.wait()
        loop = asyncio.get_running_loop()
        last_write = 0.0
        wake: asyncio.Future[None] | None = None
        frames = FrameWriter(writer)
        try:
            while True:
                # registered before looking for data: an append meanwhile wakes this writer (a
                # future, resolved by a put or the service's tick: no task or timer per wait)
                if wake is None or wake.done():
                    wake = loop.create_future()
                    self._wakers.append(wake)
                sent = await self._send_some(conn, frames)
                if sent < 0:
                    return
                now = time.monotonic()
                if sent:
                    last_write = now
                    continue
                if now - last_write >= self.heartbeat_interval_s:
                    frames.write([encode_transfer_header(conn.transfer_from, 0)])
                    await writer.drain()
                    last_write = now
                await wake
        except (ConnectionError, OSError) as exc:
            log.info("HA connection to %s lost: %s", conn.addr, exc)
        finally:
            frames.close()

    async def _send_some(self, conn: SlaveConnection, frames: FrameWriter) -> int:
        """Send the transfers there is data for, up to :data:`BURST_BYTES`, and in controller mode a
        confirm frame if the confirm offset advanced, with one socket write: the transfers' total
        size, 0 if none, -1 if the slave cannot be served."""
        store = self.store
        start = where = conn.transfer_from
        parts: list[bytes | memoryview] = []
        while where - start < BURST_BYTES and where < store.max_phy_offset:
            tail = store.commit_log.segment_tail(where)
            if tail is None:
                if where < store.min_phy_offset:
                    log.error(
                        "slave %s needs offset %d, which this master deleted (min offset %d): closing; "
                        "the slave must be resynchronised from an empty store",
                        conn.addr,
                        where,
                        store.min_phy_offset,
                    )
                    return -1
                break  # the next segment is being created
            view = tail[2][: self.batch_size]
            if not view:
                break
            parts += (encode_transfer_header(where, len(view)), view)
            where += len(view)
        if self.confirm_offset is not None:
            confirm = self.confirm_offset()
            if confirm > conn.confirm_sent:
                parts.append(encode_confirm(confirm))
                conn.confirm_sent = confirm
        if not parts:
            return 0
        frames.write(parts)
        conn.transfer_from = where
        conn.bytes_sent += where - start
        await frames.writer.drain()
        return where - start

    # -- reporting ----------------------------------------------------------------------------------
    def runtime_info(self) -> tuple[int, int, tuple[HAConnectionInfo, ...]]:
        """(max offset, in-sync slaves, one entry per slave) for GET_BROKER_HA_STATUS."""
        max_offset = self.store.max_phy_offset
        now = _now_ms()
        infos = []
        for c in sorted(self.connections, key=lambda c: c.addr):
            diff = max_offset - c.acked if c.acked >= 0 else max_offset
            lag_ms = 0 if diff == 0 else (now - c.last_caught_up_ms if c.last_caught_up_ms else -1)
            infos.append(
                HAConnectionInfo(
                    addr=c.addr,
                    slave_ack_offset=c.acked,
                    diff=diff,
                    in_sync=c.acked >= 0 and diff < self.max_gap_not_in_sync,
                    transfer_from_where=c.transfer_from,
                    transferred_byte_in_second=0,
                    lag_ms=lag_ms,
                    last_ack_timestamp_ms=c.last_report_ms,
                    last_caught_up_timestamp_ms=c.last_caught_up_ms,
                )
            )
        return max_offset, self.in_sync_slaves(max_offset), tuple(infos)
