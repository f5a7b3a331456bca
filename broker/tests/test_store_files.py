"""Store files beside the CommitLog: StoreConfig loading, the checkpoint layout, IndexFile bytes."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketq.broker.store.checkpoint import StoreCheckpoint
from rocketq.broker.store.config import FlushDiskType, StoreConfig
from rocketq.broker.store.errors import StoreConfigError
from rocketq.broker.store.index_file import IndexFile, bulk_index_key_hash, slot_order
from rocketq.broker.store.mapped_file import MappedFile
from rocketq.client.remoting.javahash import index_key_hash


def test_store_config_from_broker_conf() -> None:
    cfg = StoreConfig.from_broker_conf(
        {
            "storePathRootDir": "/data/store",
            "flushDiskType": "SYNC_FLUSH",
            "mappedFileSizeCommitLog": "104857600",
            "mappedFileSizeConsumeQueue": "6000",
            "deleteWhen": "04;16",
            "fileReservedTime": "48",
            "brokerName": "ignored",
            "messageIndexEnable": "false",
        }
    )
    assert cfg.flush_disk_type is FlushDiskType.SYNC_FLUSH and cfg.mapped_file_size_consume_queue_units == 300
    assert cfg.delete_hours() == frozenset({4, 16}) and cfg.file_reserved_time_hours == 48
    assert not cfg.message_index_enable and cfg.mapped_file_size_commit_log_bytes == 100 << 20
    with pytest.raises(StoreConfigError):
        StoreConfig(delete_when="25")
    with pytest.raises(StoreConfigError):
        StoreConfig(mapped_file_size_commit_log_bytes=1 << 20)  # 4 MiB messages do not fit


def test_checkpoint_layout(tmp_path: Path) -> None:
    cp = StoreCheckpoint(str(tmp_path / "checkpoint"))
    cp.physic_msg_timestamp, cp.logics_msg_timestamp, cp.index_msg_timestamp = 11, 22, 33
    cp.dispatched_phy_offset = 4096
    cp.shutdown()
    raw = (tmp_path / "checkpoint").read_bytes()
    assert len(raw) == 4096 and struct.unpack_from(">qqq", raw) == (11, 22, 33)
    again = StoreCheckpoint(str(tmp_path / "checkpoint"))
    assert again.dispatched_phy_offset == 4096 and again.min_timestamp == 0
    again.shutdown()


def test_index_file_golden_layout(tmp_path: Path) -> None:
    f = IndexFile(str(tmp_path / "20240101000000000"), 8, 4)
    assert os.path.getsize(tmp_path / "20240101000000000") == 40 + 8 * 4 + 4 * 20
    key = "TopicA#k1"
    h = index_key_hash(key)
    assert f.put_key(key, 1234, 1_700_000_000_000) and f.put_key(key, 5678, 1_700_000_002_500)
    buf = bytes(f.mf.buffer)
    assert struct.unpack_from(">qqqqii", buf, 0) == (1_700_000_000_000, 1_700_000_002_500, 1234, 5678, 1, 3)
    assert struct.unpack_from(">i", buf, 40 + (h % 8) * 4) == (2,)
    assert struct.unpack_from(">iqii", buf, 40 + 32 + 1 * 20) == (h, 1234, 0, 0)
    assert struct.unpack_from(">iqii", buf, 40 + 32 + 2 * 20) == (h, 5678, 2, 1)
    assert f.put_key("x", 9, 1_700_000_003_000) and not f.put_key(
        "y", 10, 1_700_000_003_000
    )  # full (entry 0 unused)
    out: list[int] = []
    f.select_phy_offsets(key, 32, 0, 1 << 62, out)
    assert out == [5678, 1234]
    f.close()


@given(st.lists(st.text(min_size=1, max_size=40), min_size=1, max_size=50))
def test_bulk_index_key_hash_matches_reference(keys: list[str]) -> None:
    assert bulk_index_key_hash(keys).tolist() == [index_key_hash(k) for k in keys]


@given(
    st.lists(st.integers(0, 6), min_size=1, max_size=200),
    st.sampled_from([7, 5_000_000, 1 << 31, 1 << 61]),
)
def test_slot_order_is_a_stable_argsort(small: list[int], slot_count: int) -> None:
    """Few distinct slots (many ties: the order within a slot is what chains the entries), at
    slot counts where slot and position fit in one key and where they do not (the merge sort)."""
    slots = np.array(small, dtype=np.int64) * (slot_count // 7)
    order, ordered = slot_order(slots, slot_count)
    expected = np.argsort(slots, kind="stable")
    assert order.tolist() == expected.tolist()
    assert ordered.tolist() == slots[expected].tolist()


def test_bulk_index_writes_same_bytes_as_single_puts(tmp_path: Path) -> None:
    keys = [f"T#key{i % 37}" for i in range(90)] + ["T#polygenelubricants"]
    a = IndexFile(str(tmp_path / "1"), 7, 80)
    b = IndexFile(str(tmp_path / "2"), 7, 80)
    for i, k in enumerate(keys[:79]):
        assert a.put_key(k, 100 + i, 5000)
    assert (
        b.put_hashes(bulk_index_key_hash(keys), np.arange(100, 100 + len(keys), dtype=np.int64), 5000) == 79
    )
    assert bytes(a.mf.buffer) == bytes(b.mf.buffer)
    a.close()
    b.close()


def test_flush_of_a_file_closed_meanwhile_is_a_no_op(tmp_path: Path) -> None:
    """A flush thread that races with a truncation or expiry deleting the file finds it closed:
    nothing to flush, no error (it used to report a failed msync, as for a broken disk)."""
    mf = MappedFile(str(tmp_path / "00000000000000000000"), 8192)
    mf.append(b"x" * 100)
    mf.destroy()
    assert mf.flush() is False
    live = MappedFile(str(tmp_path / "00000000000000008192"), 8192)
    live.append(b"y" * 100)
    assert live.flush() is True and live.flushed_position == 100
    live.close()
