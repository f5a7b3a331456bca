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


# -- the CommitLog's page-cache window (commitLogPageCacheWindow) -----------------------------------


def _resident_pages(path: Path, size: int) -> list[bool]:
    """Which pages of the file's first ``size`` bytes are in the page cache (``mincore`` on a
    mapping of our own: it reports the page cache without faulting anything in)."""
    import ctypes
    import mmap

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    pages = -(-size // mmap.PAGESIZE)
    vec = (ctypes.c_ubyte * pages)()
    with open(path, "r+b") as f, mmap.mmap(f.fileno(), size) as mm:
        anchor = ctypes.c_char.from_buffer(mm)
        try:
            assert libc.mincore(ctypes.addressof(anchor), size, vec) == 0, os.strerror(ctypes.get_errno())
        finally:
            del anchor
    return [bool(v & 1) for v in vec]


def _page_cache_can_drop(root: Path) -> bool:
    """Whether this filesystem drops clean pages on ``POSIX_FADV_DONTNEED`` (tmpfs cannot)."""
    probe = root / "probe"
    probe.write_bytes(os.urandom(1 << 16))
    fd = os.open(probe, os.O_RDONLY)
    try:
        os.fdatasync(fd)
        os.posix_fadvise(fd, 0, 1 << 16, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    dropped = not any(_resident_pages(probe, 1 << 16))
    probe.unlink()
    return dropped


@pytest.mark.skipif(not hasattr(os, "posix_fadvise"), reason="needs posix_fadvise and mincore (Linux)")
def test_page_cache_window_drops_flushed_pages_behind_it(tmp_path: Path) -> None:
    from rocketq.broker.store.mapped_file_queue import MappedFileQueue

    if not _page_cache_can_drop(tmp_path):
        pytest.skip("this filesystem keeps clean pages (tmpfs?): nothing to observe")
    seg, mib = 2 << 20, 1 << 20
    q = MappedFileQueue(str(tmp_path / "log"), seg, page_cache_window=mib)
    data = os.urandom(7 * mib)
    for at in range(0, len(data), 256 << 10):  # 7 MiB over segments of 2 MiB
        mf = q.get_last_mapped_file()
        mf.append(data[at : at + (256 << 10)])
        if at == 3 * mib:  # a flush on the way (at 3.25 MiB) drops what is a window behind
            assert q.flush()
            first, second = (_resident_pages(Path(mf.path), seg) for mf in q.files)
            assert not any(first) and not any(second[:64]) and all(second[64:320])
    assert q.flush()
    resident = [p for mf in q.files for p in _resident_pages(Path(mf.path), seg)]
    assert len(resident) == 8 * mib // 4096
    assert not any(resident[: 6 * mib // 4096])  # more than the window behind the flushed end: gone
    assert all(resident[6 * mib // 4096 : 7 * mib // 4096])  # the window: kept
    # what was dropped reads back from the disk, through the segments' own mappings too
    assert b"".join(bytes(mf.view(0, min(seg, len(data) - mf.file_from_offset))) for mf in q.files) == data

    q.set_max_offset(5 * mib)  # a truncation (a slave's) moves the mark back with the end
    for part in (data[:mib], data[mib : 2 * mib]):
        q.get_last_mapped_file().append(part)
    assert q.flush()
    resident = [p for mf in q.files for p in _resident_pages(Path(mf.path), seg)]
    # (the read-back above brought the older pages back: only what the window passed since is gone)
    assert not any(resident[5 * mib // 4096 : 6 * mib // 4096])
    assert all(resident[6 * mib // 4096 : 7 * mib // 4096])
    assert bytes(q.files[2].view(mib, mib)) + bytes(q.files[3].view(0, mib)) == data[: 2 * mib]
    q.close()


@pytest.mark.skipif(not hasattr(os, "posix_fadvise"), reason="needs posix_fadvise and mincore (Linux)")
def test_without_a_page_cache_window_flushed_pages_stay(tmp_path: Path) -> None:
    from rocketq.broker.store.mapped_file_queue import MappedFileQueue

    q = MappedFileQueue(str(tmp_path / "log"), 2 << 20)
    q.get_last_mapped_file().append(os.urandom(1 << 20))
    assert q.flush()
    assert all(_resident_pages(Path(q.files[0].path), 1 << 20))
    q.close()


def test_page_cache_window_config() -> None:
    assert StoreConfig().commit_log_page_cache_window_bytes == 0
    conf = StoreConfig.from_broker_conf({"commitLogPageCacheWindow": str(256 << 20)})
    assert conf.commit_log_page_cache_window_bytes == 256 << 20
    with pytest.raises(StoreConfigError, match="commitLogPageCacheWindow"):
        StoreConfig.from_broker_conf({"commitLogPageCacheWindow": "-1"})


def test_the_commit_log_and_only_it_gets_the_window(tmp_path: Path) -> None:
    from rocketq.broker.store.message_store import MessageStore

    conf = StoreConfig(store_path_root_dir=str(tmp_path), commit_log_page_cache_window_bytes=8 << 20)
    with MessageStore(conf) as store:
        assert store.commit_log.mfq.page_cache_window == 8 << 20
        cq = store.find_or_create_consume_queue("TopicA", 0)
        assert cq.mfq.page_cache_window == 0
