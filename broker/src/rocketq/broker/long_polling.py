"""Long polling: pulls that found nothing wait here until a message arrives or they time out.

RocketMQ's ``PullRequestHoldService``.  A PULL_MESSAGE with the SUSPEND flag that would answer
PULL_NOT_FOUND is parked under its ``(topic, queueId)`` with the offset it asked for; the pull
processor awaits the returned future and re-reads the store once it resolves.

Theory of operation:

* Arrivals come from the store's dispatch rounds (``MessageStore.add_arrival_listener``), one call
  per queue and round, on the reput thread or on the event loop (after a small inline append).
  :meth:`PullRequestHoldService.arrival_listener` runs on that thread; it only
  records ``max_offset`` for the queue when a pull is parked there, and schedules at most one hop
  to the event loop (``call_soon_threadsafe``) per batch of arrivals, so a busy queue does not flood
  the loop with wake-ups.
* On the loop, every parked request whose offset is below the new max offset is woken (``True``).
* Each parked request also has a ``call_later`` deadline that wakes it with ``False``.
* A request registered just after an arrival was dispatched would miss it, so :meth:`hold` takes
  the queue's current max offset (read after registering) and wakes the request at once when data
  is already there.
* Controller mode: a master serves reads only up to its confirm offset, so a parked pull's
  ``current_max_offset`` is the confirmed one, and :meth:`notify_confirmed` (called when the
  confirm offset advances) re-checks every queue with parked pulls against it.
* The number of parked pulls is bounded (``maxSuspendedPulls``): past it :meth:`hold` returns None
  and the processor answers SYSTEM_BUSY, so memory stays bounded under any number of consumers.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["HeldPull", "PullRequestHoldService"]

QueueKey = tuple[str, int]


@dataclass(eq=False, slots=True)
class HeldPull:
    key: QueueKey
    offset: int
    future: asyncio.Future[bool]
    timer: asyncio.TimerHandle | None = field(default=None)


class PullRequestHoldService:
    """Parked pulls per queue, woken by arrivals, deadlines or shutdown."""

    def __init__(self, loop: asyncio.AbstractEventLoop, *, max_suspended: int = 10_000) -> None:
        self._loop = loop
        self._max = max_suspended
        self._held: dict[QueueKey, list[HeldPull]] = {}
        self._count = 0
        # Shared with the reput thread: the keys with parked pulls and pending arrivals.
        self._lock = threading.Lock()
        self._watched: set[QueueKey] = set()
        self._arrivals: dict[QueueKey, int] = {}
        self._closed = False

    @property
    def held_count(self) -> int:
        return self._count

    def hold(
        self, topic: str, queue_id: int, offset: int, timeout_ms: int, current_max_offset: Callable[[], int]
    ) -> asyncio.Future[bool] | None:
        """Park a pull; the future resolves True on arrival, False on timeout or shutdown.

        Returns None when the service is full or closed (the caller answers SYSTEM_BUSY).
        """
        if self._closed or self._count >= self._max:
            return None
        key = (topic, queue_id)
        req = HeldPull(key=key, offset=offset, future=self._loop.create_future())
        req.timer = self._loop.call_later(max(timeout_ms, 0) / 1000.0, self._wake, req, False)
        self._held.setdefault(key, []).append(req)
        self._count += 1
        with self._lock:
            self._watched.add(key)
        if current_max_offset() > offset:  # arrived between the store read and the registration
            self._wake(req, True)
        return req.future

    def _wake(self, req: HeldPull, arrived: bool) -> None:
        reqs = self._held.get(req.key)
        if reqs is not None and req in reqs:
            reqs.remove(req)
            self._count -= 1
            if not reqs:
                del self._held[req.key]
                with self._lock:
                    self._watched.discard(req.key)
        if req.timer is not None:
            req.timer.cancel()
        if not req.future.done():
            req.future.set_result(arrived)

    def notify_message_arriving(self, topic: str, queue_id: int, max_offset: int) -> None:
        """Wake the pulls parked on the queue that may now find data (loop thread).

        ``<=`` rather than ``<``: woken pulls re-read the store and re-park if they still find
        nothing, so a spurious wake costs one read while a missed one would cost a whole timeout.
        """
        for req in list(self._held.get((topic, queue_id), ())):
            if req.offset <= max_offset:
                self._wake(req, True)

    def notify_confirmed(self, readable_max_offset: Callable[[str, int], int]) -> None:
        """The confirm offset advanced (loop thread): wake the pulls that may now read something."""
        for topic, queue_id in list(self._held):
            readable = readable_max_offset(topic, queue_id)
            for req in list(self._held.get((topic, queue_id), ())):
                if req.offset < readable:
                    self._wake(req, True)

    def arrival_listener(self, topic: str, queue_id: int, max_offset: int) -> None:
        """The store's arrival callback (reput thread): coalesce, then hop to the loop once."""
        key = (topic, queue_id)
        with self._lock:
            if key not in self._watched or self._closed:
                return
            first = not self._arrivals
            if self._arrivals.get(key, -1) < max_offset:
                self._arrivals[key] = max_offset
        if first:
            try:
                self._loop.call_soon_threadsafe(self._drain)
            except RuntimeError:  # loop closed during shutdown
                pass

    def _drain(self) -> None:
        with self._lock:
            arrivals, self._arrivals = self._arrivals, {}
        for (topic, queue_id), max_offset in arrivals.items():
            self.notify_message_arriving(topic, queue_id, max_offset)

    def shutdown(self) -> None:
        """Wake every parked pull with False (they answer from the store as it is)."""
        with self._lock:
            self._closed = True
        for reqs in list(self._held.values()):
            for req in list(reqs):
                self._wake(req, False)
