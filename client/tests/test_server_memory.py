"""rocketq.server.memory: mqbroker's malloc settings, in fresh interpreters (they are process-wide;
mallinfo2 needs glibc >= 2.33)."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

#: allocates three 216 KiB buffers (a slave's HA read, a batch request); prints how many of them
#: malloc served with a fresh mmap (mallinfo2's hblks), after tune_malloc()'s message
_PROBE = """
import ctypes
from rocketq.server.memory import tune_malloc
class MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
        "keepcost",
    )]
libc = ctypes.CDLL(None)
libc.mallinfo2.restype = MallInfo2
print(tune_malloc())
before = libc.mallinfo2().hblks
buffers = [bytearray(216 * 1024) for _ in range(3)]
print(libc.mallinfo2().hblks - before)
"""


def _probe(**env: str) -> tuple[str, int]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "GLIBC_TUNABLES"}
    out = subprocess.run(
        [sys.executable, "-c", _PROBE],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.splitlines()
    return out[0], int(out[1])


glibc = pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc's mallopt"
)


@glibc
def test_large_buffers_come_from_the_heap_instead_of_fresh_mmaps() -> None:
    tuned_msg, tuned_mmaps = _probe()
    plain_msg, plain_mmaps = _probe(ROCKETQ_MALLOC_TUNING="0")
    assert tuned_msg.startswith("malloc: buffers below 32 MiB reuse heap memory")
    assert plain_msg == "malloc settings unchanged (ROCKETQ_MALLOC_TUNING=0)"
    assert plain_mmaps > 0  # glibc's default: buffers of 128 KiB and more are mapped afresh
    assert tuned_mmaps == 0


@glibc
def test_an_operators_malloc_settings_are_left_alone() -> None:
    msg, _ = _probe(MALLOC_ARENA_MAX="2")
    assert msg == "malloc settings unchanged (the environment sets MALLOC_ARENA_MAX)"
    msg, _ = _probe(GLIBC_TUNABLES="glibc.malloc.trim_threshold=1048576")
    assert msg == "malloc settings unchanged (the environment sets GLIBC_TUNABLES)"
