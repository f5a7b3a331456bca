"""The epoch file (controller mode): persistence, torn writes, queries and the consistent point."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketq.broker.controller_mode.epoch_file import (
    EPOCH_FILE_NAME,
    AppendStatus,
    EpochFile,
    EpochFileError,
    find_consistent_point,
)
from rocketq.client.remoting.controller import EpochEntry


def test_append_persist_reload(tmp_path: Path) -> None:
    ef = EpochFile.open(tmp_path)
    assert ef.last_epoch == -1
    assert ef.append(1, 0) is AppendStatus.APPENDED
    assert ef.append(2, 500) is AppendStatus.APPENDED
    assert ef.append(2, 900) is AppendStatus.NOT_NEWER
    assert ef.append(3, 400) is AppendStatus.NOT_NEWER
    again = EpochFile.open(tmp_path)
    assert again.entries(1000) == [EpochEntry(1, 0, 500), EpochEntry(2, 500, 1000)]
    assert again.entry_for_offset(499, 1000) == EpochEntry(1, 0, 500)
    assert again.entry_for_offset(1000, 1000) is None
    text = (tmp_path / EPOCH_FILE_NAME).read_text()
    assert text.splitlines()[0] == "2" and text.splitlines()[2:] == ["1-0", "2-500"]


def test_same_start_replaces_empty_epoch(tmp_path: Path) -> None:
    ef = EpochFile.open(tmp_path)
    ef.append(1, 0)
    ef.append(2, 100)
    ef.append(3, 100)
    assert [(e.epoch, e.start_offset) for e in ef.entries()] == [(1, 0), (3, 100)]


def test_torn_write_falls_back_to_backup(tmp_path: Path) -> None:
    ef = EpochFile.open(tmp_path)
    ef.append(1, 0)
    ef.append(2, 100)
    path = tmp_path / EPOCH_FILE_NAME
    path.write_bytes(path.read_bytes()[:7])  # a crash cut the file
    again = EpochFile.open(tmp_path)
    assert [(e.epoch, e.start_offset) for e in again.entries()] == [(1, 0)]  # the previous version
    (tmp_path / (EPOCH_FILE_NAME + ".tmp")).write_bytes(b"garbage")  # a torn temp file is ignored
    assert EpochFile.open(tmp_path).last_epoch == 1


def test_both_copies_corrupt_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / EPOCH_FILE_NAME).write_bytes(b"1\n0\n1-0\n")
    with pytest.raises(EpochFileError, match="CRC mismatch"):
        EpochFile.open(tmp_path)


def test_truncate_suffix(tmp_path: Path) -> None:
    ef = EpochFile.open(tmp_path)
    for epoch, start in ((1, 0), (2, 100), (3, 200)):
        ef.append(epoch, start)
    ef.truncate_suffix(150)
    assert EpochFile.open(tmp_path).entries(150) == [EpochEntry(1, 0, 100), EpochEntry(2, 100, 150)]


def test_consistent_point_examples() -> None:
    # the old master wrote [80, 100) under epoch 1 that the new master (epoch 2 from 80) never got
    old = [EpochEntry(1, 0, 100)]
    new = [EpochEntry(1, 0, 80), EpochEntry(2, 80, 300)]
    assert find_consistent_point(old, new) == 80
    # a slave behind the master: nothing to cut
    assert find_consistent_point([EpochEntry(1, 0, 50)], new) == 50
    # nothing shared
    assert find_consistent_point([EpochEntry(5, 0, 10)], new) == -1
    # same epoch number but another start: not the same master's bytes
    assert find_consistent_point([EpochEntry(1, 0, 10), EpochEntry(2, 10, 90)], new) == 10


@given(
    st.lists(st.integers(min_value=1, max_value=50), min_size=1, max_size=8),
    st.integers(min_value=0, max_value=7),
    st.integers(min_value=0, max_value=400),
    st.integers(min_value=0, max_value=400),
)
def test_consistent_point_never_past_a_divergence(
    gaps: list[int], fork: int, mine_extra: int, theirs_extra: int
) -> None:
    """Two logs share epochs 1..fork; past that each wrote its own epoch: the point is a shared prefix."""
    starts = [sum(gaps[:i]) for i in range(len(gaps))]
    fork = min(fork, len(starts) - 1)
    shared_end = starts[fork] + gaps[fork]
    common = [
        EpochEntry(i + 1, s, starts[i + 1] if i + 1 <= fork else shared_end)
        for i, s in enumerate(starts[: fork + 1])
    ]
    mine = [
        *common[:-1],
        EpochEntry(common[-1].epoch, common[-1].start_offset, shared_end),
        EpochEntry(100, shared_end, shared_end + mine_extra),
    ]
    theirs = [
        *common[:-1],
        EpochEntry(common[-1].epoch, common[-1].start_offset, shared_end),
        EpochEntry(200, shared_end, shared_end + theirs_extra),
    ]
    assert find_consistent_point(mine, theirs) == shared_end
