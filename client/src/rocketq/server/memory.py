"""glibc malloc settings for server processes that churn through large buffers.

A broker allocates and frees buffers of hundreds of KiB all the time: a batch request's frame and
body, the records it encodes, a slave's HA reads.  glibc serves allocations of 128 KiB and more
with a fresh ``mmap`` and returns freed memory at the top of the heap to the kernel, so each such
buffer is memory the kernel must map and zero again (with transparent huge pages, a whole 2 MiB
page at the first touch): on the 2-core VM of ``benchmarks/`` copying a 216 KiB bytearray into a
new ``bytes`` took 255 µs instead of 18 µs.

:func:`tune_malloc` keeps such buffers in the heap (``M_MMAP_THRESHOLD`` 32 MiB, glibc's maximum
on 64-bit) and lets up to ``M_TRIM_THRESHOLD`` (128 MiB) of freed heap stay with the process, so
they reuse memory already mapped.  The cost is up to that much resident memory kept after a burst.
It is applied by ``mqbroker`` at start-up (docs/broker.md, "Memory"); an operator's own malloc
settings (``MALLOC_*`` or ``GLIBC_TUNABLES`` in the environment) are left alone, and
``ROCKETQ_MALLOC_TUNING=0`` turns it off.  Other C libraries (musl) are left alone too.
"""

from __future__ import annotations

import ctypes
import logging
import os
import platform

__all__ = ["MMAP_THRESHOLD_BYTES", "TRIM_THRESHOLD_BYTES", "tune_malloc"]

log = logging.getLogger(__name__)

# mallopt(3) parameters (glibc's malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3

#: allocations below this come from the heap (glibc's upper limit on 64-bit systems)
MMAP_THRESHOLD_BYTES = 32 << 20
#: freed memory at the top of the heap is returned to the kernel beyond this much
TRIM_THRESHOLD_BYTES = 128 << 20

OFF_SWITCH = "ROCKETQ_MALLOC_TUNING"


def tune_malloc() -> str:
    """Apply the settings if they apply here; returns what was done, for the log."""
    if os.environ.get(OFF_SWITCH, "1").strip().lower() in ("0", "false", "no", "off"):
        return f"malloc settings unchanged ({OFF_SWITCH}=0)"
    own = sorted(k for k in os.environ if k.startswith("MALLOC_") or k == "GLIBC_TUNABLES")
    if own:
        return f"malloc settings unchanged (the environment sets {', '.join(own)})"
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return "malloc settings unchanged (not glibc)"
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return "malloc settings unchanged (no mallopt)"
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    if (
        mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) != 1
        or mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES) != 1
    ):
        return "malloc settings unchanged (mallopt refused them)"
    return (
        f"malloc: buffers below {MMAP_THRESHOLD_BYTES >> 20} MiB reuse heap memory, up to "
        f"{TRIM_THRESHOLD_BYTES >> 20} MiB of freed heap is kept ({OFF_SWITCH}=0 turns this off)"
    )
