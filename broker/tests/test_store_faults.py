"""Recovery and faults: torn tail, flipped bytes, truncated segments, lost ConsumeQueues, full disk."""

from __future__ import annotations

import errno
import logging
import os
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from rocketq.broker.store.config import FlushDiskType, StoreConfig
from rocketq.broker.store.errors import StoreCorruptError
from rocketq.broker.store.index_file import HEADER_SIZE, IndexService, bulk_index_key_hash
from rocketq.broker.store.message_store import MessageStore
from rocketq.broker.store.record_batch import MessageToStore
from rocketq.broker.store.status import GetMessageStatus, PutMessageStatus
from rocketq.client.remoting.message import decode_stored_message

HOST = ("127.0.0.1", 10911)
SEG = 64 * 1024


def cfg(root: Path, **kw: object) -> StoreConfig:
    base: dict[str, object] = dict(
        store_path_root_dir=str(root),
        mapped_file_size_commit_log_bytes=SEG,
        mapped_file_size_consume_queue_units=100,
        max_message_size_bytes=16 * 1024,
        max_hash_slot_num=64,
        max_index_num=500,
        flush_disk_type=FlushDiskType.SYNC_FLUSH,
        clean_resource_interval_ms=3_600_000,
    )
    base.update(kw)
    return StoreConfig(**base)  # type: ignore[arg-type]


def msg(i: int, queue_id: int = 0, size: int = 200) -> MessageToStore:
    return MessageToStore(
        topic="TopicA",
        queue_id=queue_id,
        body=(b"%06d" % i) * (size // 6),
        properties={"KEYS": f"key{i}", "UNIQ_KEY": f"U{i:08d}"},
        born_timestamp=int(time.time() * 1000),
        born_host=HOST,
        store_host=HOST,
    )


def fill(root: Path, n: int, *, crash: bool = False, queues: int = 1) -> list[int]:
    """Store n messages; return their CommitLog offsets."""
    s = MessageStore(cfg(root))
    s.start()
    offsets = []
    for i in range(n):
        r = s.put_message(msg(i, i % queues))
        assert r.status is PutMessageStatus.PUT_OK and r.append_result is not None
        offsets.append(r.append_result.wrote_offset)
    assert s.wait_dispatched()
    if crash:
        s.halt()
    else:
        s.shutdown()
    return offsets


def read_all(s: MessageStore, queue_id: int = 0) -> list[bytes]:
    out: list[bytes] = []
    offset = 0
    while True:
        g = s.get_message("g", "TopicA", queue_id, offset, 32, 1 << 20)
        if g.status is not GetMessageStatus.FOUND:
            return out
        out += [decode_stored_message(b, check_crc=True).body for b in g.buffers]
        offset = g.next_begin_offset


def segment_path(root: Path, offset: int) -> Path:
    return root / "commitlog" / f"{offset - offset % SEG:020d}"


def flip(path: Path, pos: int) -> None:
    with open(path, "r+b") as f:
        f.seek(pos)
        b = f.read(1)
        f.seek(pos)
        f.write(bytes([b[0] ^ 0x5A]))


def test_abnormal_recovery_keeps_everything(tmp_path: Path) -> None:
    fill(tmp_path, 300, crash=True, queues=2)
    assert (tmp_path / "abort").exists()
    with MessageStore(cfg(tmp_path)) as s:
        assert not s.last_exit_ok
        assert read_all(s, 0) == [msg(i).body for i in range(0, 300, 2)]
        assert read_all(s, 1) == [msg(i).body for i in range(1, 300, 2)]
        assert len(s.query_message("TopicA", "key299", 32, 0, 1 << 62).buffers) == 1
        r = s.put_message(msg(300))
        assert r.append_result is not None and r.append_result.queue_offset == 150


@pytest.mark.parametrize("crash", [False, True])
def test_flipped_byte_in_tail_record_truncates_only_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, crash: bool
) -> None:
    offsets = fill(tmp_path, 100, crash=crash)
    flip(segment_path(tmp_path, offsets[-1]), offsets[-1] % SEG + 100)  # inside the body
    caplog.set_level(logging.WARNING)
    with MessageStore(cfg(tmp_path)) as s:
        assert s.max_phy_offset == offsets[-1]
        assert read_all(s) == [msg(i).body for i in range(99)]
        assert any("torn or corrupt tail" in r.getMessage() for r in caplog.records)
        assert s.query_message("TopicA", "key99", 32, 0, 1 << 62).buffers == []
        r = s.put_message(msg(1000))
        assert r.append_result is not None and r.append_result.queue_offset == 99
        assert r.append_result.wrote_offset == offsets[-1]


def test_flipped_byte_in_the_middle_is_reported_not_skipped(tmp_path: Path) -> None:
    offsets = fill(tmp_path, 100)
    target = offsets[-5]
    path = segment_path(tmp_path, target)
    before = path.read_bytes()
    flip(path, target % SEG + 100)
    with pytest.raises(StoreCorruptError) as info:
        MessageStore(cfg(tmp_path)).start()
    assert str(target) in str(info.value) and str(path) in str(info.value)
    assert len(path.read_bytes()) == len(before)  # nothing truncated
    flip(path, target % SEG + 100)  # repaired by the operator
    with MessageStore(cfg(tmp_path)) as s:
        assert read_all(s) == [msg(i).body for i in range(100)]


def test_torn_partial_record_at_tail(tmp_path: Path) -> None:
    offsets = fill(tmp_path, 50, crash=True)
    with MessageStore(cfg(tmp_path)) as s:
        end = s.max_phy_offset
    path = segment_path(tmp_path, end)
    data = bytearray(path.read_bytes())
    rec = data[offsets[0] % SEG : offsets[1] % SEG]
    data[end % SEG : end % SEG + len(rec) // 2] = rec[: len(rec) // 2]  # half a record, as a kill mid-memcpy
    path.write_bytes(bytes(data))
    (tmp_path / "abort").touch()
    with MessageStore(cfg(tmp_path)) as s:
        assert s.max_phy_offset == end
        assert read_all(s) == [msg(i).body for i in range(50)]


def test_truncated_last_segment(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    offsets = fill(tmp_path, 400)
    last = segment_path(tmp_path, offsets[-1])
    cut = offsets[-10] % SEG + 50
    os.truncate(last, cut)
    caplog.set_level(logging.WARNING)
    with MessageStore(cfg(tmp_path)) as s:
        assert s.max_phy_offset == offsets[-10]
        assert read_all(s) == [msg(i).body for i in range(390)]
        assert any("truncated" in r.getMessage() for r in caplog.records)


def test_truncated_middle_segment_is_an_error(tmp_path: Path) -> None:
    offsets = fill(tmp_path, 600)
    assert offsets[-1] > 2 * SEG
    os.truncate(tmp_path / "commitlog" / f"{SEG:020d}", 1000)
    with pytest.raises(StoreCorruptError, match="truncated"):
        MessageStore(cfg(tmp_path)).start()


@pytest.mark.parametrize("what", ["all", "one"])
def test_missing_consume_queue_directory_is_rebuilt(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, what: str
) -> None:
    fill(tmp_path, 300, queues=3)
    if what == "all":
        shutil.rmtree(tmp_path / "consumequeue")
    else:
        shutil.rmtree(tmp_path / "consumequeue" / "TopicA" / "1")
    caplog.set_level(logging.WARNING)
    with MessageStore(cfg(tmp_path)) as s:
        for q in range(3):
            assert read_all(s, q) == [msg(i).body for i in range(q, 300, 3)]
            assert s.get_max_offset_in_queue("TopicA", q) == 100
        assert any("rebuilding" in r.getMessage() for r in caplog.records)


def test_missing_index_is_rebuilt_after_crash(tmp_path: Path) -> None:
    fill(tmp_path, 100, crash=True)
    shutil.rmtree(tmp_path / "index")
    os.unlink(tmp_path / "checkpoint")
    with MessageStore(cfg(tmp_path)) as s:
        assert len(s.query_message("TopicA", "key3", 32, 0, 1 << 62).buffers) == 1


def test_disk_full_when_creating_a_segment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR)
    with MessageStore(cfg(tmp_path)) as s:
        stored = 0
        real = os.posix_fallocate

        def no_space(fd: int, offset: int, length: int) -> None:
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(os, "posix_fallocate", no_space)
        failed = None
        for i in range(400):
            r = s.put_message(msg(i))
            if r.status is not PutMessageStatus.PUT_OK:
                failed = r.status
                break
            stored += 1
        assert failed is PutMessageStatus.CREATE_MAPPED_FILE_FAILED
        assert any("No space left" in r.getMessage() for r in caplog.records)
        assert not (tmp_path / "commitlog" / f"{SEG:020d}").exists()
        monkeypatch.setattr(os, "posix_fallocate", real)
        r = s.put_message(msg(stored))
        assert r.status is PutMessageStatus.PUT_OK
        assert s.wait_dispatched()
        assert read_all(s) == [msg(i).body for i in range(stored + 1)]


@pytest.mark.parametrize("per_call", [4, 30])  # the scalar insert path and the numpy one
def test_index_survives_a_crash_between_slot_and_header_writes(tmp_path: Path, per_call: int) -> None:
    """A kill after an insert's slots but before its header leaves slots naming uncounted entries;
    the recovery replay of the same keys must not cut the older entries of those slots off."""
    keys = [f"TopicA#k{i}" for i in range(2 * per_call)]
    hashes = bulk_index_key_hash(keys)
    phys = np.arange(len(keys), dtype=np.int64) * 100
    stamps = np.full(len(keys), 1_700_000_000_000, dtype=np.int64)
    svc = IndexService(str(tmp_path), 2, 400)
    svc.build_index_hashes(hashes[:per_call], phys[:per_call], stamps[:per_call])
    header = bytes(svc.files[-1].mf.buffer[:HEADER_SIZE])
    svc.build_index_hashes(hashes[per_call:], phys[per_call:], stamps[per_call:])
    svc.files[-1].mf.buffer[:HEADER_SIZE] = header  # the second insert's header never reached the file
    svc.close()
    recovered = IndexService(str(tmp_path), 2, 400, preallocate=False)
    recovered.load()
    assert recovered.end_phy_offset == int(phys[per_call - 1])
    recovered.build_index_hashes(hashes[per_call:], phys[per_call:], stamps[per_call:])  # recovery replay
    for key, phy in zip(keys, phys.tolist(), strict=True):
        assert recovered.query_offsets("TopicA", key.split("#")[1], 8, 0, 1 << 62)[0] == [phy], key
    recovered.close()
