"""The server processes' C heap: kept for reuse while busy, given back after a burst.

**Kept while busy** (:func:`keep_freed_memory`, called by ``mqbroker`` at start-up).  The broker's
dispatch builds its ConsumeQueue units and index entries in numpy arrays of a few hundred KiB to
a few MiB per round, dozens of rounds a second, and frees them again.  With glibc's defaults those
blocks are either mapped afresh for each round (above the dynamic mmap threshold) or returned to
the kernel when the top of a heap is free (the trim threshold, twice the mmap threshold): either
way every round touches fresh pages, and each first touch is a page fault that zeroes a page
(docs/broker.md, Heap memory, has the counts).  Allocations below :data:`MMAP_THRESHOLD` are
served from the heaps and up to :data:`TRIM_THRESHOLD` is kept free at the top of each heap
(``mallopt``: ``M_MMAP_THRESHOLD``, ``M_TRIM_THRESHOLD``); the process keeps what its busiest
rounds needed.  An operator's own :data:`OPERATOR_SETTINGS` win: then nothing is changed.

**Given back after a burst** (glibc's ``malloc_trim``).

A connection whose peer stops reading makes the server hold its unsent responses, up to the
write-buffer high-water mark (rocketq.client.transport.channel, ``ConnectionLimits``), and whole
requests' worth of buffers besides.  A peer that stops writing halfway through a large frame
makes the server hold the frame's first part, up to the pending-frame caps (a frame part of
``HELD_FRAME_BYTES``, 1 MiB, or more counts here).  When such a connection closes, Python frees those buffers,
but glibc keeps most of the freed memory in its heaps (several arenas, one per thread that
allocated; chunks of a few hundred KiB below the dynamic mmap threshold), so the process's RSS
stays where the burst left it.  ``malloc_trim(0)`` releases the free pages of every arena.

:class:`MemoryTrimmer` runs it once, shortly after such a connection closed (a burst of
closes is one trim), in a worker thread: it takes the arenas' locks and walks them, a few
milliseconds for a heap of hundreds of MiB, which must not stall the event loop.  On a C library
without ``malloc_trim`` (musl, macOS) it does nothing.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging
import os
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["OPERATOR_SETTINGS", "MemoryTrimmer", "keep_freed_memory", "malloc_trim"]

log = logging.getLogger(__name__)


def _libc(name: str, *argtypes: type[ctypes._SimpleCData[Any]]) -> Callable[..., int] | None:
    """The C library's function ``name`` returning an int (None where there is none)."""
    lib = ctypes.util.find_library("c")
    if lib is None:
        return None
    try:
        fn: Callable[..., int] = getattr(ctypes.CDLL(lib), name)
    except (OSError, AttributeError):
        return None
    fn.argtypes = list(argtypes)  # type: ignore[attr-defined]
    fn.restype = ctypes.c_int  # type: ignore[attr-defined]
    return fn


#: glibc's ``malloc_trim`` (None where the C library has none)
malloc_trim: Callable[[int], int] | None = _libc("malloc_trim", ctypes.c_size_t)

#: ``mallopt`` parameters (glibc's malloc.h)
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
#: allocations below this come from the heaps (a dispatch round's arrays); larger ones, such as
#: the frame buffers of stalled connections, are mapped and go back to the kernel when freed
MMAP_THRESHOLD = 4 << 20
#: free memory at the top of a heap up to this is kept for the next allocations
TRIM_THRESHOLD = 64 << 20
#: environment variables through which an operator sets glibc's malloc: any of them, and
#: :func:`keep_freed_memory` leaves malloc alone
OPERATOR_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES")


def keep_freed_memory(
    environ: Mapping[str, str] = os.environ, mallopt: Callable[[int, int], int] | None = None
) -> bool:
    """Keep freed heap memory for reuse instead of faulting in fresh pages (module docstring);
    True if the settings were applied, False where the operator set glibc's malloc tunables or
    the C library has no ``mallopt`` (musl, macOS)."""
    if any(name in environ for name in OPERATOR_SETTINGS):
        return False
    fn = mallopt or _libc("mallopt", ctypes.c_int, ctypes.c_int)
    if fn is None:
        return False
    # the mmap threshold first: setting it also stops glibc from moving both thresholds itself
    return bool(fn(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(fn(M_TRIM_THRESHOLD, TRIM_THRESHOLD))


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
