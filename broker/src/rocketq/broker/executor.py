"""Bounded thread-pool executors for store calls, with RocketMQ's flow-control answers.

The store is synchronous: a SYNC_FLUSH put waits for the group commit, a pull may fault pages in
from disk.  Such calls run in a small thread pool so that the event loop keeps serving other
connections.  Each pool has a bounded queue (``sendThreadPoolQueueCapacity`` …): when it is full
the request is rejected at once with ``SYSTEM_BUSY`` ``[REJECTREQUEST]``, and a task that waited
longer than its queue's wait limit (``waitTimeMillsInSendQueue``) before a thread picked it up is
dropped with ``SYSTEM_BUSY`` ``[TIMEOUT_CLEAN_QUEUE]`` instead of being run late — the two answers a
RocketMQ client understands as "back off for a while".
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

__all__ = ["BoundedExecutor", "Busy"]

_T = TypeVar("_T")


class Busy(Exception):
    """Raised by :meth:`BoundedExecutor.run` when the request must be answered SYSTEM_BUSY."""

    def __init__(self, remark: str) -> None:
        super().__init__(remark)
        self.remark = remark


class _Expired(Exception):
    """A task found too late by a pool thread: it is dropped, not run."""

    def __init__(self, waited_ms: float) -> None:
        super().__init__(waited_ms)
        self.waited_ms = waited_ms


class BoundedExecutor:
    """A named thread pool with a bounded number of queued-or-running tasks."""

    def __init__(self, name: str, *, threads: int, capacity: int, max_wait_ms: int | None = None) -> None:
        self.name = name
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=f"rocketq-{name}")
        self._capacity = capacity
        self._max_wait_ms = max_wait_ms
        self._pending = 0

    @property
    def pending(self) -> int:
        """Tasks queued or running (read on the event loop thread)."""
        return self._pending

    async def run(self, fn: Callable[[], _T]) -> _T:
        """Run ``fn`` on the pool; raise :class:`Busy` when the queue is full or the wait too long."""
        if self._pending >= self._capacity:
            raise Busy(
                f"[REJECTREQUEST]system busy, start flow control for a while "
                f"({self.name} queue full: {self._pending} requests)"
            )
        self._pending += 1
        enqueued = time.monotonic()
        max_wait = self._max_wait_ms

        def task() -> _T:
            if max_wait is not None:
                waited_ms = (time.monotonic() - enqueued) * 1000.0
                if waited_ms > max_wait:
                    raise _Expired(waited_ms)
            return fn()

        try:
            try:
                return await asyncio.get_running_loop().run_in_executor(self._pool, task)
            finally:
                self._pending -= 1
        except _Expired as expired:
            raise Busy(
                f"[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, period in queue: "
                f"{expired.waited_ms:.0f}ms, size of queue: {self._pending}"
            ) from None

    def shutdown(self, wait: bool = True) -> None:
        self._pool.shutdown(wait=wait, cancel_futures=not wait)
