"""Long polling for POP: pops that found nothing wait here until a message arrives in their topics.

RocketMQ's ``PopLongPollingService``, on the model of the pull side's
:class:`~rocketq.broker.long_polling.PullRequestHoldService`: a POP (or NOTIFICATION) that finds
nothing waits under each topic it reads (the topic and its POP retry topics; a pop of queue -1
reads any queue of them) for at most its ``pollTime``.  Arrivals come from the store's dispatch
rounds on the reput thread; :meth:`arrival_listener` records the topic only when someone waits on
it and hops to the event loop once per batch of arrivals, where every waiter of the topic is woken
(``True``).  A deadline wakes a waiter with ``False``.  A waiter registered just after an arrival
was dispatched would miss it, so :meth:`wait` calls ``recheck`` after registering and wakes at
once when data is already there.  The number of waiters is bounded by ``maxPopPollingSize``:
past it :meth:`wait` returns None and the processor answers POLLING_FULL.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

__all__ = ["PopLongPolling"]


@dataclass(eq=False, slots=True)
class _Waiter:
    topics: tuple[str, ...]
    group: str
    future: asyncio.Future[bool]
    timer: asyncio.TimerHandle | None = field(default=None)


class PopLongPolling:
    """Waiting pops per topic, woken by arrivals, deadlines or shutdown (event loop thread)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, *, max_polling: int) -> None:
        self._loop = loop
        self._max = max_polling
        self._waiters: dict[str, list[_Waiter]] = {}
        self._count = 0
        self._lock = threading.Lock()  # shared with the reput thread: watched topics and arrivals
        self._watched: set[str] = set()
        self._arrived: set[str] = set()
        self._closed = False

    @property
    def count(self) -> int:
        return self._count

    def polling_num(self, topic: str, group: str) -> int:
        """POLLING_INFO: the pops of ``group`` waiting on ``topic``."""
        return sum(1 for w in self._waiters.get(topic, ()) if w.group == group)

    def wait(
        self, topics: Sequence[str], group: str, timeout_ms: int, recheck: Callable[[], bool]
    ) -> asyncio.Future[bool] | None:
        """Wait for a message in any of ``topics``; None when the service is full or closed."""
        if self._closed or self._count >= self._max:
            return None
        waiter = _Waiter(tuple(topics), group, self._loop.create_future())
        waiter.timer = self._loop.call_later(max(timeout_ms, 0) / 1000.0, self._wake, waiter, False)
        for topic in waiter.topics:
            self._waiters.setdefault(topic, []).append(waiter)
        self._count += 1
        with self._lock:
            self._watched.update(waiter.topics)
        if recheck():  # arrived between the read and the registration
            self._wake(waiter, True)
        return waiter.future

    def _wake(self, waiter: _Waiter, arrived: bool) -> None:
        if waiter.future.done():
            return
        for topic in waiter.topics:
            waiters = self._waiters.get(topic)
            if waiters is not None and waiter in waiters:
                waiters.remove(waiter)
                if not waiters:
                    del self._waiters[topic]
                    with self._lock:
                        self._watched.discard(topic)
        self._count -= 1
        if waiter.timer is not None:
            waiter.timer.cancel()
        waiter.future.set_result(arrived)

    def notify(self, topic: str) -> None:
        """A message arrived in ``topic`` (loop thread): wake everyone waiting on it."""
        for waiter in list(self._waiters.get(topic, ())):
            self._wake(waiter, True)

    def arrival_listener(self, topic: str, queue_id: int, max_offset: int) -> None:
        """The store's arrival callback (reput thread): coalesce, then hop to the loop once."""
        with self._lock:
            if topic not in self._watched or self._closed:
                return
            first = not self._arrived
            self._arrived.add(topic)
        if first:
            try:
                self._loop.call_soon_threadsafe(self._drain)
            except RuntimeError:  # loop closed during shutdown
                pass

    def _drain(self) -> None:
        with self._lock:
            arrived, self._arrived = self._arrived, set()
        for topic in arrived:
            self.notify(topic)

    def shutdown(self) -> None:
        """Wake every waiter with False (they answer with what the store has)."""
        with self._lock:
            self._closed = True
        for waiters in list(self._waiters.values()):
            for waiter in list(waiters):
                self._wake(waiter, False)
