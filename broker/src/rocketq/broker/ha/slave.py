"""HAClient: the slave's side of replication (RocketMQ's ``HAService.HAClient``).

Theory of operation.  The client learns the master's HA address from the NameServer's
REGISTER_BROKER response (``haServerAddr``) or from ``haMasterAddress``, connects, and reports its
CommitLog max offset: at connect, after every append, and every ``haSendHeartbeatInterval`` when
idle.  Transfers are decoded by :class:`~.protocol.TransferDecoder`; the first one of a session
decides whether the master continues this slave's log:

* at the slave's max offset, or anywhere on a segment boundary when the slave's log is empty:
  replicate;
* below it: the slave's log runs past the master's (its store belongs to another master, or the
  master lost a tail it never flushed).  With ``haSlaveTruncateDivergent`` (default) the excess is
  truncated (:meth:`MessageStore.truncate_commit_log`) and the session restarts from the new end;
  without it the slave refuses: status ``DIVERGENT_REFUSED``, an ERROR at every reconnect, no reads;
* above it: the master no longer has what the slave misses (``GAP_REFUSED``, an ERROR each time).

Received bytes go through :class:`~.aligner.RecordAligner` and are appended whole records at a
time with :meth:`MessageStore.append_replicated`, so the slave's CommitLog files are the master's
bytes up to its max offset, and the store's normal dispatch builds ConsumeQueues and the index
(from the hints :mod:`.replica_hints` makes, as cheaply as on the master).
A lost connection, a master restart or ``haHousekeepingInterval`` of silence from the master ends
the session; the next one starts again from the slave's (whole-record) max offset, so nothing is
lost or duplicated.  Reconnects back off from 0.1 s to 5 s.  In controller mode the master's
confirm frames (protocol.py) go to :attr:`HAClient.on_confirm`: the slave serves reads only up
to them.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import ssl
import time
from collections.abc import Callable
from typing import NoReturn, cast

from rocketq.broker.ha.aligner import RecordAligner
from rocketq.broker.ha.protocol import (
    HAProtocolError,
    Transfer,
    TransferDecoder,
    encode_report,
    max_transfer_size,
)
from rocketq.broker.ha.replica_hints import replica_hints
from rocketq.broker.store.errors import StoreError
from rocketq.broker.store.message_store import MessageStore
from rocketq.client.remoting.ha_status import HAClientInfo
from rocketq.client.transport.cancel import cancel_and_wait

__all__ = ["HAClient", "SlaveStatus"]

log = logging.getLogger(__name__)

#: reading from the master pauses while this much is received and not yet taken
_MAX_BUFFERED = 4 * 1024 * 1024
#: a take of at least this much means the master is streaming: the loop first receives what is
#: already readable (up to _GATHER_ROUNDS more socket reads), so one append and one dispatch-hint
#: run cover several reads
_GATHER_FROM = 128 * 1024
_GATHER_ROUNDS = 4
_BACKOFF_MIN_S = 0.1
_BACKOFF_MAX_S = 5.0
_CONNECT_TIMEOUT_S = 3.0


class SlaveStatus(enum.Enum):
    NO_MASTER = "NO_MASTER"
    CONNECTING = "CONNECTING"
    REPLICATING = "REPLICATING"
    DIVERGENT_REFUSED = "DIVERGENT_REFUSED"
    GAP_REFUSED = "GAP_REFUSED"


class _Restart(Exception):
    """End the session and reconnect at once (after a truncation)."""


class _Refused(Exception):
    """End the session: this slave cannot follow the master (status and log already set)."""


class _MasterSilent(Exception):
    """End the session: nothing from the master for ``haHousekeepingInterval``."""


class _MasterStream(asyncio.Protocol):
    """The slave's end of the HA connection: what the master sends queues up until :meth:`take`.

    Instead of a StreamReader (which copies every read into its buffer and out again), the reads
    are kept as they come and joined once per take; while the master streams, a take first lets
    the loop receive what is already readable, so the slave handles a few large chunks instead of
    many socket-sized ones."""

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self._parts: list[bytes] = []
        self._size = 0
        self._eof = False
        self._error: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._paused = False
        self.closed: asyncio.Future[None] = self._loop.create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses; both have the same methods
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self._parts.append(data)
        self._size += len(data)
        if self._size >= _MAX_BUFFERED and not self._paused and self.transport is not None:
            self.transport.pause_reading()
            self._paused = True
        self._wake()

    def eof_received(self) -> None:
        self._eof = True
        self._wake()

    def connection_lost(self, exc: Exception | None) -> None:
        self._eof = True
        if exc is not None and self._error is None:
            self._error = exc
        self._wake()
        if not self.closed.done():
            self.closed.set_result(None)

    def fail(self, exc: BaseException) -> None:
        """End the stream: the pending (or next) :meth:`take` raises ``exc``."""
        self._error = exc
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def take(self) -> bytes:
        """Everything received since the last take (b"" once the master closed the connection);
        raises what ended the stream otherwise."""
        while not self._parts:
            if self._error is not None:
                raise self._error
            if self._eof:
                return b""
            self._waiter = self._loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        for _ in range(_GATHER_ROUNDS):
            if self._size < _GATHER_FROM or self._size >= _MAX_BUFFERED or self._eof:
                break
            before = self._size
            await asyncio.sleep(0)  # the loop reads the socket again if it is readable
            if self._size == before:
                break
        parts, self._parts, self._size = self._parts, [], 0
        if self._paused and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()
        return parts[0] if len(parts) == 1 else b"".join(parts)


class HAClient:
    """Replicates the master's CommitLog into ``store``; all methods run on the broker's event loop."""

    def __init__(
        self,
        store: MessageStore,
        *,
        master_address: str,
        batch_size: int,
        heartbeat_interval_s: float,
        housekeeping_interval_s: float,
        truncate_divergent: bool,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self._ssl = ssl_context  # TLS to the master's HA port (tls.enable; docs/security.md "HA port")
        self.store = store
        self.master_address = master_address
        self._fixed = bool(master_address)
        self.batch_size = batch_size
        self.heartbeat_interval_s = heartbeat_interval_s
        self.housekeeping_interval_s = housekeeping_interval_s
        self.truncate_divergent = truncate_divergent
        self.status = SlaveStatus.NO_MASTER
        self.status_detail = ""
        self.connected = False
        self.last_read_ms = 0
        self.last_write_ms = 0
        self._last_read = self._last_write = 0.0  # time.monotonic() of the session's last read, report
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._address_changed = asyncio.Event()
        #: controller mode: bytes sent before the first report (broker id and expected epoch)
        self.handshake = b""
        #: controller mode: called with the master's confirm offset whenever a confirm frame raised it
        self.on_confirm: Callable[[int], None] | None = None
        self.master_confirm = -1  # the highest confirm offset a master sent (-1: none yet)

    @property
    def readable(self) -> bool:
        """False while the slave refuses its master's log (it must not serve what it holds)."""
        return self.status is not SlaveStatus.DIVERGENT_REFUSED

    def update_master_address(self, addr: str | None) -> None:
        """The NameServer's ``haServerAddr`` for this group (ignored when ``haMasterAddress`` is set)."""
        if self._fixed or not addr or addr == self.master_address:
            return
        log.info("master HA address is now %s (was %s)", addr, self.master_address or "unknown")
        self.master_address = addr
        self._address_changed.set()

    def start(self) -> None:
        self._stopping = False
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        """End replication and wait until the session task is over (``_stopping`` also ends its
        loop, should a cancellation be dropped: :mod:`rocketq.client.transport.cancel`)."""
        self._stopping = True
        await cancel_and_wait(self._task)

    async def _run(self) -> None:
        backoff = _BACKOFF_MIN_S
        while not self._stopping:
            addr = self.master_address
            if not addr:
                self.status = SlaveStatus.NO_MASTER
                self._address_changed.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._address_changed.wait(), 1.0)
                continue
            restart = False
            try:
                restart = await self._connect_and_replicate(addr)
                backoff = _BACKOFF_MIN_S if self.connected else backoff
            except (OSError, TimeoutError) as exc:
                log.log(
                    logging.INFO if backoff < _BACKOFF_MAX_S else logging.WARNING,
                    "cannot replicate from master %s: %s",
                    addr,
                    exc,
                )
            except Exception:  # a bug must not stop replication for good: log it, reconnect
                log.exception("replication from master %s failed unexpectedly; reconnecting", addr)
            finally:
                self.connected = False
            if not restart:
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, _BACKOFF_MAX_S)

    async def _connect_and_replicate(self, addr: str) -> bool:
        """One session; True to reconnect at once."""
        host, _, port = addr.rpartition(":")
        if self.status is not SlaveStatus.DIVERGENT_REFUSED:
            self.status = SlaveStatus.CONNECTING
        transport, stream = await asyncio.wait_for(
            asyncio.get_running_loop().create_connection(_MasterStream, host, int(port), ssl=self._ssl),
            _CONNECT_TIMEOUT_S,
        )
        self.connected = True
        try:
            await self._session(stream, transport)
        except _Restart:
            return True
        except _Refused:
            return False
        except HAProtocolError as exc:
            log.error("master %s broke the HA protocol, reconnecting: %s", addr, exc)
        except StoreError as exc:
            log.error("cannot append replicated data from %s: %s", addr, exc)
        finally:
            transport.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(stream.closed), 1.0)
        return False

    def _report(self, transport: asyncio.Transport) -> None:
        # (8 bytes a read: never worth flow control; a master that stops reading is found silent)
        transport.write(encode_report(self.store.max_phy_offset))
        self._last_write = time.monotonic()
        self.last_write_ms = int(time.time() * 1000)

    async def _session(self, stream: _MasterStream, transport: asyncio.Transport) -> None:
        if self.handshake:
            transport.write(self.handshake)
        self._report(transport)
        decoder = TransferDecoder(
            max_size=max_transfer_size(self.batch_size), confirm_frames=bool(self.handshake)
        )
        aligner: RecordAligner | None = None
        self._last_read = time.monotonic()
        # the timers run beside the reads: a timeout per read (asyncio.wait_for) costs a task each
        watchdog = asyncio.get_running_loop().create_task(self._watchdog(stream, transport))
        try:
            while True:
                try:
                    data = await stream.take()
                except _MasterSilent:
                    log.warning(
                        "master sent nothing for %.0f s (haHousekeepingInterval): reconnecting",
                        self.housekeeping_interval_s,
                    )
                    return
                if not data:
                    log.info("master closed the HA connection")
                    return
                self._last_read = time.monotonic()
                self.last_read_ms = int(time.time() * 1000)
                transfers = decoder.feed(data)
                if decoder.confirm_offset > self.master_confirm:
                    self.master_confirm = decoder.confirm_offset
                    if self.on_confirm is not None:
                        self.on_confirm(self.master_confirm)
                if transfers and aligner is None:
                    aligner = await self._first_transfer(transfers[0])
                if aligner is not None and self._append(aligner, transfers):
                    self._report(transport)
        finally:
            watchdog.cancel()

    async def _watchdog(self, stream: _MasterStream, transport: asyncio.Transport) -> None:
        """Reports after ``haSendHeartbeatInterval`` without one; ends the session (the pending take
        raises) after ``haHousekeepingInterval`` without a byte from the master."""
        while True:
            now = time.monotonic()
            if now - self._last_write >= self.heartbeat_interval_s:
                self._report(transport)
            silent_until = self._last_read + self.housekeeping_interval_s
            if now > silent_until:
                stream.fail(_MasterSilent())
                return
            due = min(self._last_write + self.heartbeat_interval_s, silent_until)
            await asyncio.sleep(max(0.01, due - now))

    def _append(self, aligner: RecordAligner, transfers: list[Transfer]) -> bool:
        """Append the whole records that ``transfers`` complete; True if there were any.

        The append runs on the event loop, as Java's HAClient appends in its own thread: it is a
        write into the page cache, cheaper than a hand-off to a worker thread and back, and the
        acknowledgement a SYNC_MASTER send waits for follows right after it.  The dispatch hints
        of the records (ha/replica_hints.py) are made by the reput thread, for all the reads since
        its last round at once.
        """
        parts = [t.data for t in transfers if t.data]
        if not parts:
            return False
        chunk, starts = aligner.feed_records(*parts)  # no join: the aligner copies them once (at most)
        if not chunk:
            return False
        self.store.append_replicated(aligner.offset - len(chunk), chunk, starts=starts, hinter=replica_hints)
        return True

    async def _first_transfer(self, t: Transfer) -> RecordAligner:
        store = self.store
        mine = store.max_phy_offset
        segment = store.commit_log.mfq.mapped_file_size
        empty = store.commit_log.mfq.last() is None
        if t.phy_offset == mine or (empty and t.phy_offset % segment == 0):
            self.status, self.status_detail = SlaveStatus.REPLICATING, ""
            return RecordAligner(t.phy_offset, segment)
        if t.phy_offset < mine:
            if self.truncate_divergent:
                log.warning(
                    "this slave's CommitLog ends at %d but the master continues at %d: the %d bytes "
                    "beyond are not the master's; truncating them (haSlaveTruncateDivergent=true)",
                    mine,
                    t.phy_offset,
                    mine - t.phy_offset,
                )
                await asyncio.to_thread(store.truncate_commit_log, t.phy_offset)
                raise _Restart
            self._refuse(
                SlaveStatus.DIVERGENT_REFUSED,
                f"this slave's CommitLog ends at {mine} but its master's at {t.phy_offset}: the slave "
                "holds data the master does not have; it neither replicates nor serves reads. Set "
                "haSlaveTruncateDivergent=true to drop the excess, or move the store away",
            )
        self._refuse(
            SlaveStatus.GAP_REFUSED,
            f"the master continues at {t.phy_offset} but this slave's CommitLog ends at {mine}: the "
            "data between is deleted on the master. Move this slave's store away to resynchronise",
        )

    def _refuse(self, status: SlaveStatus, detail: str) -> NoReturn:
        self.status, self.status_detail = status, detail
        log.error("replication refused: %s", detail)
        raise _Refused

    def runtime_info(self) -> HAClientInfo:
        """The ``haClientRuntimeInfo`` part of GET_BROKER_HA_STATUS (docs/replication.md, Admin API)."""
        return HAClientInfo(
            master_addr=self.master_address or "",
            max_offset=self.store.max_phy_offset,
            transferred_byte_in_second=0,
            last_read_timestamp_ms=self.last_read_ms,
            last_write_timestamp_ms=self.last_write_ms,
            master_flush_offset=0,
            activated=self.connected,
            status=self.status.value,
            status_detail=self.status_detail,
        )
