"""Flush services: group commit for SYNC_FLUSH, periodic flush for ASYNC_FLUSH and ConsumeQueues.

Theory of operation.
* ``GroupCommitService`` (SYNC_FLUSH): an appending thread asks for its end offset to be durable
  and waits on a condition.  The service thread msyncs once for everything appended so far and
  wakes every waiter whose offset is covered, so concurrent appends share one fsync.  A waiter
  that is not covered within ``sync_flush_timeout_ms`` gets False (FLUSH_DISK_TIMEOUT).  A caller
  that must not block (the broker's event loop) registers a callback instead
  (:meth:`GroupCommitService.add_flush_callback`); the service thread calls it once the offset is
  durable, or with False when the service stops first.
* ``FlushRealTimeService`` (ASYNC_FLUSH): every ``flush_interval_commit_log_ms`` it flushes when at
  least ``flush_commit_log_least_pages`` pages are dirty, and unconditionally every
  ``flush_commit_log_thorough_interval_ms``.
* ``FlushConsumeQueueService``: flushes ConsumeQueues and the index the same way, then writes the
  checkpoint, including the dispatched offset that recovery replays from.
* A round that fails (full disk, I/O error) is retried every 0.1 s; :class:`FailureLog` reports it
  once when the failures start (with the remedy) and once when a round succeeds again, instead of
  a traceback per round.  The reput (dispatch) service uses the same class.
"""

from __future__ import annotations

import errno
import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable

from rocketq.broker.store.commit_log import CommitLog
from rocketq.broker.store.errors import StoreError

log = logging.getLogger(__name__)

_DISK_FULL_REMEDY = (
    "the disk holding the store is full: free space there (delete old files, lower fileReservedTime,"
    " or grow the volume); the broker retries and recovers by itself"
)
_IO_REMEDY = (
    "check that the store path's disk is mounted, writable and healthy (dmesg, df, permissions);"
    " the broker retries and recovers by itself"
)


def _is_disk_full(exc: BaseException) -> bool:
    cur: BaseException | None = exc
    for _ in range(10):  # the exception and what it was raised from
        if cur is None:
            break
        if isinstance(cur, OSError) and cur.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if "No space left" in str(cur):
            return True
        cur = cur.__cause__ or cur.__context__
    return False


class FailureLog:
    """Logs a recurring failure once when it starts and once when it ends, never per round.

    ``failed`` in a round that raised, ``succeeded`` in one that did not.  Entering the failed
    state is an ERROR naming the remedy (a traceback only for errors that are not I/O, i.e. bugs);
    leaving it is a WARNING with how many rounds failed.  Thread-safe.
    """

    def __init__(self, what: str, logger: logging.Logger | None = None) -> None:
        self.what = what
        self.failing = False
        self.failures = 0
        self._log = logger or log
        self._lock = threading.Lock()

    def failed(self, exc: BaseException) -> None:
        with self._lock:
            self.failures += 1
            if self.failing:
                return
            self.failing = True
        io = isinstance(exc, (OSError, StoreError))
        remedy = _DISK_FULL_REMEDY if _is_disk_full(exc) else _IO_REMEDY
        self._log.error(
            "%s failed: %s; %s (logged once until it recovers)",
            self.what,
            exc,
            remedy,
            exc_info=None if io else exc,
        )

    def succeeded(self) -> None:
        if not self.failing:
            return
        with self._lock:
            if not self.failing:
                return
            self.failing, rounds, self.failures = False, self.failures, 0
        self._log.warning("%s recovered after %d failed rounds", self.what, rounds)


class _Service:
    name = "service"

    def __init__(self) -> None:
        self._skip_final = False
        self.failures = FailureLog(self.name)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.run_once()
            except Exception as exc:
                self.failures.failed(exc)
                self._stop.wait(0.1)
            else:
                self.failures.succeeded()
        if self._skip_final:
            return
        try:
            self.final_round()
        except Exception as exc:
            trace = not isinstance(exc, (OSError, StoreError))
            log.error("%s final round failed: %s", self.name, exc, exc_info=exc if trace else None)

    def run_once(self) -> None:
        raise NotImplementedError

    def final_round(self) -> None:
        """Called once after stop; flush everything."""

    def shutdown(self) -> None:
        self._stop.set()
        self.wakeup()
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    def wakeup(self) -> None:
        pass

    def halt(self) -> None:
        """Stop without the final flush (crash simulation)."""
        self._skip_final = True
        self.shutdown()


class GroupCommitService(_Service):
    name = "GroupCommitService"

    def __init__(self, commit_log: CommitLog, on_flushed: Callable[[int], None]) -> None:
        super().__init__()
        self.commit_log = commit_log
        self.on_flushed = on_flushed
        self._cv = threading.Condition()
        self._wanted = 0
        self._flushed = commit_log.flushed_where
        # (offset, seq, callback) of non-blocking waiters, smallest offset first.
        self._callbacks: list[tuple[int, int, Callable[[bool], None]]] = []
        self._seq = itertools.count()

    def add_flush_callback(self, offset: int, callback: Callable[[bool], None]) -> None:
        """Call ``callback(True)`` (from the service thread, or here) once durable up to ``offset``.

        ``callback(False)`` if the service stops before.  The callback must be quick and must not
        block: it runs on the flush thread (the broker hops to its loop with call_soon_threadsafe).
        """
        with self._cv:
            durable = self._flushed >= offset
            if not durable and not self._stop.is_set():
                heapq.heappush(self._callbacks, (offset, next(self._seq), callback))
                if offset > self._wanted:
                    self._wanted = offset
                    self._cv.notify_all()
                return
        callback(durable)

    def _run_callbacks(self, flushed: int, *, final: bool = False) -> None:
        due: list[tuple[Callable[[bool], None], bool]] = []
        with self._cv:
            while self._callbacks and self._callbacks[0][0] <= flushed:
                due.append((heapq.heappop(self._callbacks)[2], True))
            if final:
                due.extend((cb, False) for _, _, cb in self._callbacks)
                self._callbacks.clear()
        for cb, ok in due:
            try:
                cb(ok)
            except Exception:
                log.exception("flush callback failed")

    def wait_for_flush(self, offset: int, timeout_s: float) -> bool:
        """Block until the CommitLog is durable up to ``offset``; False on timeout."""
        with self._cv:
            if self._flushed >= offset:
                return True
            if offset > self._wanted:
                self._wanted = offset
                self._cv.notify_all()
            deadline = time.monotonic() + timeout_s
            while self._flushed < offset:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cv.wait(remaining)
            return True

    def run_once(self) -> None:
        with self._cv:
            while self._wanted <= self._flushed and not self._stop.is_set():
                self._cv.wait(0.01)
        ts = self.commit_log.last_store_timestamp
        self.commit_log.flush(0)
        self.on_flushed(ts)
        with self._cv:
            self._flushed = flushed = self.commit_log.flushed_where
            self._cv.notify_all()
        self._run_callbacks(flushed)

    def final_round(self) -> None:
        ts = self.commit_log.last_store_timestamp
        self.commit_log.flush(0)
        self.on_flushed(ts)
        with self._cv:
            self._flushed = flushed = self.commit_log.flushed_where
            self._cv.notify_all()
        self._run_callbacks(flushed, final=True)

    def halt(self) -> None:
        super().halt()
        self._run_callbacks(-1, final=True)

    def wakeup(self) -> None:
        with self._cv:
            self._cv.notify_all()


class FlushRealTimeService(_Service):
    name = "FlushRealTimeService"

    def __init__(
        self,
        commit_log: CommitLog,
        interval_ms: int,
        least_pages: int,
        thorough_interval_ms: int,
        on_flushed: Callable[[int], None],
    ) -> None:
        super().__init__()
        self.commit_log = commit_log
        self.interval_s = interval_ms / 1000
        self.least_pages = least_pages
        self.thorough_interval_s = thorough_interval_ms / 1000
        self.on_flushed = on_flushed
        self._last_thorough = time.monotonic()

    def run_once(self) -> None:
        self._stop.wait(self.interval_s)
        least = self.least_pages
        now = time.monotonic()
        if now - self._last_thorough >= self.thorough_interval_s:
            least = 0
            self._last_thorough = now
        ts = self.commit_log.last_store_timestamp
        if self.commit_log.flush(least):
            self.on_flushed(ts)

    def final_round(self) -> None:
        ts = self.commit_log.last_store_timestamp
        self.commit_log.flush(0)
        self.on_flushed(ts)


class FlushConsumeQueueService(_Service):
    name = "FlushConsumeQueueService"

    def __init__(
        self, flush_all: Callable[[int], None], interval_ms: int, least_pages: int, thorough_interval_ms: int
    ) -> None:
        super().__init__()
        self.flush_all = flush_all
        self.interval_s = interval_ms / 1000
        self.least_pages = least_pages
        self.thorough_interval_s = thorough_interval_ms / 1000
        self._last_thorough = time.monotonic()

    def run_once(self) -> None:
        self._stop.wait(self.interval_s)
        least = self.least_pages
        now = time.monotonic()
        if now - self._last_thorough >= self.thorough_interval_s:
            least = 0
            self._last_thorough = now
        self.flush_all(least)

    def final_round(self) -> None:
        self.flush_all(0)
