"""rocketq.server.memory: the server processes keep freed heap memory for reuse."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

from rocketq.server.memory import (
    M_MMAP_THRESHOLD,
    M_TRIM_THRESHOLD,
    MMAP_THRESHOLD,
    OPERATOR_SETTINGS,
    TRIM_THRESHOLD,
    keep_freed_memory,
)


def test_keep_freed_memory_sets_both_thresholds_mmap_first() -> None:
    calls: list[tuple[int, int]] = []

    def mallopt(param: int, value: int) -> int:
        calls.append((param, value))
        return 1

    assert keep_freed_memory({}, mallopt)
    assert calls == [(M_MMAP_THRESHOLD, MMAP_THRESHOLD), (M_TRIM_THRESHOLD, TRIM_THRESHOLD)]


@pytest.mark.parametrize("name", OPERATOR_SETTINGS)
def test_an_operators_malloc_settings_win(name: str) -> None:
    calls: list[tuple[int, int]] = []

    def mallopt(param: int, value: int) -> int:
        calls.append((param, value))
        return 1

    assert not keep_freed_memory({name: "1"}, mallopt)
    assert calls == []


def test_a_refused_setting_is_reported() -> None:
    assert not keep_freed_memory({}, lambda param, value: 0)


# 20 rounds as a dispatch round allocates: 40 arrays of 512 KiB (20 MiB), touched, then all freed.
# With glibc's defaults (a 1 MiB block freed first sets the dynamic thresholds: mmap 1 MiB, trim
# 2 MiB) the heap's free top is given back after each round and the next round faults in 20 MiB
# of fresh pages; with the memory kept it reuses them.  Prints the page faults of the 20 rounds.
# Transparent huge pages are off for the process (PR_SET_THP_DISABLE): a fault is then one 4 KiB
# page, not one of a varying number of 2 MiB pages.
_ROUNDS = """
import ctypes, resource, sys
ctypes.CDLL(None).prctl(41, 1, 0, 0, 0)
import numpy as np
from rocketq.server.memory import keep_freed_memory
if sys.argv[1] == "keep":
    assert keep_freed_memory({})
np.ones(1 << 20, dtype=np.uint8)  # freed at once
[np.ones(512 << 10, dtype=np.uint8) for _ in range(40)]
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    arrays = [np.ones(512 << 10, dtype=np.uint8) for _ in range(40)]
    del arrays
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt's thresholds are glibc's")
def test_kept_memory_is_reused_without_page_faults() -> None:
    def faults(mode: str) -> int:
        env = {k: v for k, v in os.environ.items() if k not in OPERATOR_SETTINGS}
        command = [sys.executable, "-c", _ROUNDS, mode]
        out = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env, check=True)
        return int(out.stdout)

    default, kept = faults("default"), faults("keep")
    # (how much glibc's defaults give back varies between runs; at least 1 MiB a round, always)
    assert default >= 20 * 256, f"glibc's defaults took only {default} faults: this measures nothing"
    assert kept < default // 8, f"{kept} faults with the memory kept, {default} without"


def test_mqbroker_keeps_freed_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    import rocketq.broker.cli as cli

    called: list[bool] = []

    def keep() -> bool:
        called.append(True)
        return True

    monkeypatch.setattr(cli, "keep_freed_memory", keep)
    assert cli.main(["-p"]) == 0
    assert called == [True]
