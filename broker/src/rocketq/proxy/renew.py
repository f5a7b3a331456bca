"""Auto-renewal of push consumers' receipt handles (RocketMQ proxy's ``ReceiptHandleManager``).

A PushConsumer receives with ``auto_renew`` and no invisible duration: the broker hides each
message for ``defaultInvisibleTimeMills`` only, however long the listener runs.  As RocketMQ's
proxy does, the proxy remembers every handle it hands out under ``auto_renew`` (per client id,
group and message) and, ``renewAheadTimeMillis`` before the message would become visible again,
asks the broker for another ``renewSliceTimeMillis`` of invisibility (CHANGE_MESSAGE_INVISIBLETIME,
which answers a new handle), until the client acks the message, changes its invisible duration,
forwards it to the dead-letter queue, goes away, or ``renewMaxTimeMillis`` has passed since it was
received.  The client keeps the handle it was given: an ack or change carrying it is sent to the
broker with the current one (:meth:`HandleRenewer.take`).

Theory of operation.  :class:`ReceiptHandleTable` is the bookkeeping, without I/O or event loop and
with an injected clock: leases by (client, group, message id, original handle), a per-client
index, and a heap of renewal due times with lazy deletion (an entry whose lease moved on carries an
old version and is skipped).  :class:`HandleRenewer` is the one asyncio task that drives it: every
``renewSchedulePeriodMillis`` it takes the due leases and renews them with a bounded number of
concurrent broker calls; a failed renewal is retried at the next scan, at most
``maxRenewRetryTimes`` times, and a handle the broker no longer knows is dropped.  A lease being
renewed is marked; an ack arriving meanwhile waits for that renewal and then uses its handle, so
the broker never sees a handle that another request already replaced.  When a client terminates
or its last Telemetry stream closes, its handles are made visible again after
``invisibleTimeMillisWhenClear`` (RocketMQ's clear of a departed channel).  When
``renewMaxTimeMillis`` has passed the lease is dropped and the message comes back once its current
invisible time is over.
"""

from __future__ import annotations

import asyncio
import dataclasses
import heapq
import logging
import time
from collections.abc import Awaitable, Callable

import grpc

from rocketq.client.errors import HeaderError
from rocketq.client.remoting.pop import ExtraInfo
from rocketq.client.transport.cancel import cancel_and_wait
from rocketq.proxy.client_registry import CLIENT_ID, metadata_of
from rocketq.proxy.config import ProxyConfig
from rocketq.proxy.convert import Refusal
from rocketq.proxy.v2 import definition_pb2 as pb

__all__ = [
    "ChangeHandle",
    "HandleRenewer",
    "Lease",
    "ReceiptHandleTable",
    "RenewSettings",
    "client_id_of",
    "renew_settings",
]

log = logging.getLogger("rocketq.proxy")

#: broker calls one scan runs at once (RocketMQ's proxy: a pool of 2 to 4 renewal threads)
RENEW_CONCURRENCY = 4
#: how long an ack waits for a renewal of its handle in flight before it uses the handle it has
_TAKE_WAIT_S = 10.0


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class RenewSettings:
    """The rmq-proxy.json keys of renewal (RocketMQ's names), in milliseconds."""

    ahead_ms: int = 10_000
    slice_ms: int = 60_000
    max_time_ms: int = 3 * 3600 * 1000
    schedule_period_ms: int = 5_000
    max_retries: int = 3
    invisible_when_clear_ms: int = 1_000


def renew_settings(config: ProxyConfig) -> RenewSettings:
    return RenewSettings(
        ahead_ms=config.renew_ahead_time_millis,
        slice_ms=config.renew_slice_time_millis,
        max_time_ms=config.renew_max_time_millis,
        schedule_period_ms=config.renew_schedule_period_millis,
        max_retries=config.max_renew_retry_times,
        invisible_when_clear_ms=config.invisible_time_millis_when_clear,
    )


def client_id_of(context: grpc.aio.ServicerContext[object, object]) -> str:
    """The ``x-mq-client-id`` a 5.x SDK puts on every call ("" when a call has none)."""
    return metadata_of(context.invocation_metadata()).get(CLIENT_ID, "")


#: (client id, group, message id, the handle the client holds)
LeaseKey = tuple[str, str, str, str]


@dataclasses.dataclass(slots=True, eq=False)
class Lease:
    """One message received under auto_renew, and the handle the broker knows it by now."""

    client_id: str
    group: str
    topic: str
    msg_id: str
    original: str
    current: str
    #: when the message becomes visible again under ``current`` (epoch ms)
    next_visible_ms: int
    received_ms: int
    renew_times: int = 0
    retries: int = 0
    #: a heap entry whose version differs from this is stale
    version: int = 0
    renewing: bool = False
    removed: bool = False
    #: its client went away: released as soon as a renewal in flight ends
    orphaned: bool = False

    @property
    def key(self) -> LeaseKey:
        return (self.client_id, self.group, self.msg_id, self.original)


class ReceiptHandleTable:
    """The leases, their renewal due times and the clients holding them; no I/O."""

    def __init__(self, settings: RenewSettings, clock: Callable[[], int] = _wall_ms) -> None:
        self.settings = settings
        self.clock = clock
        self._leases: dict[LeaseKey, Lease] = {}
        self._by_client: dict[str, set[LeaseKey]] = {}
        self._heap: list[tuple[int, int, int, LeaseKey]] = []  # (due ms, seq, version, key)
        self._seq = 0

    def __len__(self) -> int:
        return len(self._leases)

    def _schedule(self, lease: Lease, due_ms: int) -> None:
        lease.version += 1
        self._seq += 1
        heapq.heappush(self._heap, (due_ms, self._seq, lease.version, lease.key))

    def add(
        self, client_id: str, group: str, topic: str, msg_id: str, handle: str, next_visible_ms: int
    ) -> Lease:
        """Remember a handle just handed out; its renewal is due ``ahead_ms`` before it expires."""
        lease = Lease(client_id, group, topic, msg_id, handle, handle, next_visible_ms, self.clock())
        old = self._leases.get(lease.key)
        if old is not None:
            old.removed = True
        self._leases[lease.key] = lease
        self._by_client.setdefault(client_id, set()).add(lease.key)
        self._schedule(lease, next_visible_ms - self.settings.ahead_ms)
        return lease

    def remove(self, client_id: str, group: str, msg_id: str, handle: str) -> Lease | None:
        """Forget the lease of the handle a client acks or changes (None: not renewed here)."""
        lease = self._leases.pop((client_id, group, msg_id, handle), None)
        if lease is not None:
            self._forget(lease)
        return lease

    def _forget(self, lease: Lease) -> None:
        lease.removed = True
        keys = self._by_client.get(lease.client_id)
        if keys is not None:
            keys.discard(lease.key)
            if not keys:
                del self._by_client[lease.client_id]

    def drop_client(self, client_id: str) -> list[Lease]:
        """Forget every lease of a client that went away; the caller makes them visible soon."""
        leases = [self._leases.pop(key) for key in self._by_client.pop(client_id, set())]
        for lease in leases:
            lease.removed = lease.orphaned = True
        return leases

    def next_due_ms(self) -> int | None:
        self._drop_stale_top()
        return self._heap[0][0] if self._heap else None

    def _drop_stale_top(self) -> None:
        while self._heap:
            _, _, version, key = self._heap[0]
            lease = self._leases.get(key)
            if lease is not None and lease.version == version and not lease.renewing:
                return
            heapq.heappop(self._heap)

    def due(self) -> list[Lease]:
        """The leases to renew now, marked as renewing; leases past ``max_time_ms`` are dropped."""
        now = self.clock()
        found: list[Lease] = []
        while True:
            self._drop_stale_top()
            if not self._heap or self._heap[0][0] > now:
                return found
            key = heapq.heappop(self._heap)[3]
            lease = self._leases[key]
            if now - lease.received_ms >= self.settings.max_time_ms:
                log.info(
                    "stopped renewing message %s of %s for %s after renewMaxTimeMillis",
                    lease.msg_id,
                    lease.topic,
                    lease.group,
                )
                del self._leases[key]
                self._forget(lease)
                continue
            lease.renewing = True
            found.append(lease)

    def renewed(self, lease: Lease, handle: str, next_visible_ms: int) -> None:
        """The broker gave the lease a new handle; the next renewal is due ``ahead_ms`` before its end."""
        lease.renewing = False
        lease.current = handle
        lease.next_visible_ms = next_visible_ms
        lease.renew_times += 1
        lease.retries = 0
        if not lease.removed:
            self._schedule(lease, next_visible_ms - self.settings.ahead_ms)

    def failed(self, lease: Lease, *, retry: bool) -> bool:
        """A renewal failed; True when it is tried again at the next scan (``max_retries`` times)."""
        lease.renewing = False
        if lease.removed:
            return False
        lease.retries += 1
        if retry and lease.retries <= self.settings.max_retries:
            self._schedule(lease, self.clock() + self.settings.schedule_period_ms)
            return True
        del self._leases[lease.key]
        self._forget(lease)
        return False


#: changes a handle's invisible time on its broker: (group, topic, handle, invisible ms) ->
#: the new handle and when it becomes visible, or the refusal
ChangeHandle = Callable[[str, str, str, int], Awaitable[tuple[str, int] | Refusal]]

#: refusals after which renewing the handle again is pointless (RocketMQ: INVALID_RECEIPT_HANDLE)
_FINAL = frozenset({pb.Code.INVALID_RECEIPT_HANDLE, pb.Code.BAD_REQUEST, pb.Code.TOPIC_NOT_FOUND})


class HandleRenewer:
    """The renewal loop over a :class:`ReceiptHandleTable` (one task, bounded broker calls)."""

    def __init__(
        self, settings: RenewSettings, change: ChangeHandle, clock: Callable[[], int] = _wall_ms
    ) -> None:
        self.table = ReceiptHandleTable(settings, clock)
        self.settings = settings
        self._change = change
        self._finished: dict[int, asyncio.Event] = {}  # id(lease) -> set when its renewal ends
        self._clear: list[Lease] = []
        self._streams: dict[str, int] = {}  # client id -> open Telemetry streams
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="receipt-handle-renewal")

    async def close(self) -> None:
        await cancel_and_wait(self._task)  # a cancellation dropped by wait_for (a wake) is repeated
        self._task = None

    # -- what the RPC handlers call ---------------------------------------------------------
    def add(self, client_id: str, group: str, topic: str, msg_id: str, handle: str) -> None:
        """Renew a handle just handed out under auto_renew."""
        try:
            next_visible = ExtraInfo.parse(handle).next_visible_time
        except HeaderError:  # not a handle the broker made: nothing to renew
            log.warning("message %s has no receipt handle to renew: %r", msg_id, handle)
            return
        self.table.add(client_id, group, topic, msg_id, handle, next_visible)

    async def take(self, client_id: str, group: str, msg_id: str, handle: str) -> str:
        """Stop renewing the message and answer the handle the broker knows it by now."""
        lease = self.table.remove(client_id, group, msg_id, handle)
        if lease is None:
            return handle
        finished = self._finished.get(id(lease))
        if lease.renewing and finished is not None:
            try:
                await asyncio.wait_for(finished.wait(), _TAKE_WAIT_S)
            except TimeoutError:
                log.warning("renewal of message %s still running; the ack uses its last handle", msg_id)
        return lease.current

    def stream_opened(self, client_id: str) -> None:
        self._streams[client_id] = self._streams.get(client_id, 0) + 1

    def stream_closed(self, client_id: str) -> None:
        """A Telemetry stream ended; the client's last one gone means the client is."""
        left = self._streams.get(client_id, 0) - 1
        if left > 0:
            self._streams[client_id] = left
            return
        self._streams.pop(client_id, None)
        self.client_gone(client_id)

    def client_gone(self, client_id: str) -> None:
        """NotifyClientTermination or no Telemetry stream left: its messages come back soon."""
        # a lease being renewed is released when its renewal ends (_renew)
        leases = [lease for lease in self.table.drop_client(client_id) if not lease.renewing]
        if leases:
            self._clear.extend(leases)
            self._wake.set()

    # -- the loop ----------------------------------------------------------------------------
    async def _run(self) -> None:
        period_s = self.settings.schedule_period_ms / 1000
        while True:
            try:
                await asyncio.wait_for(self._wake.wait(), period_s)
            except TimeoutError:
                pass
            self._wake.clear()
            try:
                await self.scan()
            except Exception:  # the loop must outlive one bad scan
                log.exception("receipt handle renewal scan failed")

    async def scan(self) -> None:
        """Renew what is due and clear what departed clients left, RENEW_CONCURRENCY at a time."""
        clear, self._clear = self._clear, []
        due = self.table.due()
        for lease in due:
            self._finished[id(lease)] = asyncio.Event()
        jobs = [self._renew(lease) for lease in due] + [self._release(lease) for lease in clear]
        limit = asyncio.Semaphore(RENEW_CONCURRENCY)

        async def bounded(job: Awaitable[None]) -> None:
            async with limit:
                await job

        await asyncio.gather(*(bounded(job) for job in jobs))

    async def _renew(self, lease: Lease) -> None:
        try:
            result = await self._change(lease.group, lease.topic, lease.current, self.settings.slice_ms)
        except Exception as exc:  # an unexpected failure is retried like a broker's
            result = Refusal(pb.Code.INTERNAL_SERVER_ERROR, str(exc))
        if isinstance(result, Refusal):
            again = self.table.failed(lease, retry=result.code not in _FINAL)
            log.log(
                logging.INFO if again else logging.WARNING,
                "renewal of message %s of %s for %s failed (%s)%s",
                lease.msg_id,
                lease.topic,
                lease.group,
                result.message,
                ", tried again" if again else "; it comes back when its invisible time ends",
            )
        else:
            self.table.renewed(lease, *result)
            if lease.orphaned:
                await self._release(lease)
        event = self._finished.pop(id(lease), None)
        if event is not None:
            event.set()

    async def _release(self, lease: Lease) -> None:
        try:
            result = await self._change(
                lease.group, lease.topic, lease.current, self.settings.invisible_when_clear_ms
            )
        except Exception as exc:
            result = Refusal(pb.Code.INTERNAL_SERVER_ERROR, str(exc))
        if isinstance(result, Refusal):
            log.info("message %s of a departed client not released: %s", lease.msg_id, result.message)
