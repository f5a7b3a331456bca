"""Giving memory back to the operating system after a burst (glibc's ``malloc_trim``).

A connection whose peer stops reading makes the server hold its unsent responses, up to the
write-buffer high-water mark (rocketq.client.transport.channel, ``ConnectionLimits``), and whole
requests' worth of buffers besides.  When such a connection closes, Python frees those buffers,
but glibc keeps most of the freed memory in its heaps (several arenas, one per thread that
allocated; chunks of a few hundred KiB below the dynamic mmap threshold), so the process's RSS
stays where the burst left it.  ``malloc_trim(0)`` releases the free pages of every arena.

:class:`MemoryTrimmer` runs it once, shortly after a backpressured connection closed (a burst of
closes is one trim), in a worker thread: it takes the arenas' locks and walks them, a few
milliseconds for a heap of hundreds of MiB, which must not stall the event loop.  On a C library
without ``malloc_trim`` (musl, macOS) it does nothing.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging
from collections.abc import Callable

__all__ = ["MemoryTrimmer", "malloc_trim"]

log = logging.getLogger(__name__)


def _load_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        fn = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_size_t]
    fn.restype = ctypes.c_int
    return fn


#: glibc's ``malloc_trim`` (None where the C library has none)
malloc_trim: Callable[[int], int] | None = _load_trim()


class MemoryTrimmer:
    """Debounced ``malloc_trim(0)`` in a worker thread; :meth:`request` runs on the event loop."""

    def __init__(self, delay_s: float = 1.0, trim: Callable[[int], int] | None = malloc_trim) -> None:
        self.delay_s = delay_s
        self._trim = trim
        self._handle: asyncio.TimerHandle | None = None
        self.trims = 0  # how many have run (diagnostics, tests)

    def request(self) -> None:
        """Trim ``delay_s`` from now, unless a trim is already due (buffers still being freed)."""
        if self._trim is None or self._handle is not None:
            return
        self._handle = asyncio.get_running_loop().call_later(self.delay_s, self._start)

    def _start(self) -> None:
        self._handle = None
        future = asyncio.get_running_loop().run_in_executor(None, self._run)
        future.add_done_callback(_log_failure)

    def _run(self) -> None:
        assert self._trim is not None
        self._trim(0)
        self.trims += 1

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None


def _log_failure(future: asyncio.Future[None]) -> None:
    if not future.cancelled() and future.exception() is not None:
        log.warning("malloc_trim failed: %s", future.exception())
