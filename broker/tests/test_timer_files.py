"""Golden bytes of the timer files (timerwheel slot, timerlog record and blank record, timercheck),
each expected value written field by field from RocketMQ's ``Slot``/``TimerWheel.putSlot``,
``TimerMessageStore.doEnqueue``/``TimerLog.append`` and ``TimerCheckpoint.flush`` (big-endian
``ByteBuffer`` puts), not from the module's own structs."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from rocketq.broker.store.errors import StoreConfigError
from rocketq.broker.timer.checkpoint import TimerCheckpoint
from rocketq.broker.timer.timer_log import TimerLog, TimerRecord
from rocketq.broker.timer.wheel import IGNORE, TimerWheel


def test_wheel_file_size_and_slot_bytes(tmp_path: Path) -> None:
    path = tmp_path / "timerwheel"
    wheel = TimerWheel(str(path), 604_800, 1000)
    assert os.path.getsize(path) == 38_707_200  # 604800 * 2 * 32
    t = 1_700_000_000_123
    wheel.put_slot(t, 52, 104, 3, 0)
    wheel.flush()
    index = 1_700_000_000 % 1_209_600
    raw = path.read_bytes()[index * 32 : index * 32 + 32]
    expected = (
        struct.pack(">q", 1_700_000_000)  # timeMs / precisionMs
        + struct.pack(">q", 52)  # firstPos
        + struct.pack(">q", 104)  # lastPos
        + struct.pack(">i", 3)  # num
        + struct.pack(">i", 0)  # magic
    )
    assert raw == expected
    slot = wheel.get_slot(1_700_000_000_999)  # the same slot time
    assert (slot.time_ms, slot.first_pos, slot.last_pos, slot.num) == (1_700_000_000_000, 52, 104, 3)
    # one full turn later the slot index is the same but the time is not: empty
    assert wheel.get_slot(t + 1_209_600_000).time_ms == -1
    wheel.revise_slot(t, IGNORE, 156, force=False)
    assert wheel.get_slot(t).last_pos == 156 and wheel.get_slot(t).first_pos == 52
    wheel.close()


def test_wheel_of_another_size_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "timerwheel"
    TimerWheel(str(path), 100, 1000).close()
    with pytest.raises(StoreConfigError, match="slot count"):
        TimerWheel(str(path), 200, 1000)


def test_wheel_precision_100(tmp_path: Path) -> None:
    wheel = TimerWheel(str(tmp_path / "w"), 1000, 100)
    wheel.put_slot(123_456_789, 1, 2, 1, 0)
    index = 1_234_567 % 2000
    raw = (tmp_path / "w").read_bytes()[index * 32 : index * 32 + 8]
    assert raw == struct.pack(">q", 1_234_567)
    wheel.close()


def test_timer_log_record_bytes(tmp_path: Path) -> None:
    log = TimerLog(str(tmp_path / "timerlog"), 4096)
    record = TimerRecord(
        prev_pos=-1,
        magic=1 | 2,
        curr_write_time_ms=1_700_000_000_000,
        delayed_time_ms=1_700_000_005_000,
        offset_py=123_456,
        size_py=321,
        topic_hash=2113,  # "Ab".hashCode() = 65 * 31 + 98
    )
    assert log.append(record) == 0
    raw = (tmp_path / "timerlog" / "00000000000000000000").read_bytes()[:52]
    expected = (
        struct.pack(">i", 52)  # size
        + struct.pack(">q", -1)  # prev pos
        + struct.pack(">i", 3)  # magic: DEFAULT | ROLL
        + struct.pack(">q", 1_700_000_000_000)  # curr write time
        + struct.pack(">i", 5000)  # delayed time - curr write time
        + struct.pack(">q", 123_456)  # offsetPy
        + struct.pack(">i", 321)  # sizePy
        + struct.pack(">i", 2113)  # hash of the real topic
        + struct.pack(">q", 0)  # reserved
    )
    assert raw == expected
    assert log.read(0) == record
    log.close()


def test_timer_log_blank_record_ends_a_segment(tmp_path: Path) -> None:
    log = TimerLog(str(tmp_path / "timerlog"), 4096)
    record = TimerRecord(-1, 1, 1000, 2000, 0, 10, 0)
    positions = [log.append(record) for _ in range(79)]
    # 78 records fit (78 * 52 = 4056); the 79th and a 16-byte blank do not fit in the last 40 bytes
    assert positions[77] == 4004 and positions[78] == 4096
    first = (tmp_path / "timerlog" / "00000000000000000000").read_bytes()
    blank = struct.pack(">i", 40) + struct.pack(">q", 0) + struct.pack(">i", -875_286_124)
    assert first[4056:4072] == blank
    assert struct.unpack(">i", blank[12:])[0] & 0xFFFFFFFF == 0xCBD43194  # 0xBBCCDDEE ^ (1880681586 + 8)
    assert (tmp_path / "timerlog" / "00000000000000004096").exists()
    log.close()
    # recovery walks past the blank into the next segment and keeps every record
    again = TimerLog(str(tmp_path / "timerlog"), 4096)
    again.load()
    seen: list[int] = []
    assert again.recover(0, lambda pos, rec: seen.append(pos)) == 4096 + 52
    assert seen == positions
    assert again.last_record() == record
    again.close()


def test_timer_log_recovery_cuts_a_torn_record(tmp_path: Path) -> None:
    log = TimerLog(str(tmp_path / "timerlog"), 4096)
    for i in range(3):
        log.append(TimerRecord(-1, 1, 1000, 2000 + i, i, 10, 0))
    log.close()
    path = tmp_path / "timerlog" / "00000000000000000000"
    with open(path, "r+b") as f:  # a half-written fourth record: size written, magic not
        f.seek(156)
        f.write(struct.pack(">i", 52) + struct.pack(">q", 104) + struct.pack(">i", 0x40))
    again = TimerLog(str(tmp_path / "timerlog"), 4096)
    again.load()
    assert again.recover(0, lambda pos, rec: None) == 156
    last = again.last_record()
    assert last is not None and last.offset_py == 2
    assert again.append(TimerRecord(104, 1, 1000, 3000, 9, 10, 0)) == 156
    again.close()


def test_checkpoint_bytes(tmp_path: Path) -> None:
    path = tmp_path / "config" / "timercheck"
    cp = TimerCheckpoint(str(path))
    assert not cp.existed and cp.last_read_time_ms == 0
    cp.last_read_time_ms = 1_700_000_000_000
    cp.last_timer_log_flush_pos = 5200
    cp.last_timer_queue_offset = 17
    cp.master_timer_queue_offset = 18
    cp.state_version, cp.data_timestamp, cp.data_counter = 2, 1_700_000_000_001, 9
    cp.flush()
    cp.close()
    raw = path.read_bytes()
    assert len(raw) == 4096
    expected = b"".join(
        struct.pack(">q", v) for v in (1_700_000_000_000, 5200, 17, 18, 2, 1_700_000_000_001, 9)
    )
    assert raw[:56] == expected and raw[56:] == bytes(4040)
    again = TimerCheckpoint(str(path))
    assert again.existed
    assert (again.last_read_time_ms, again.last_timer_log_flush_pos, again.last_timer_queue_offset) == (
        1_700_000_000_000,
        5200,
        17,
    )
    assert (again.master_timer_queue_offset, again.data_counter) == (18, 9)
    again.close()


def test_segments_whose_messages_left_the_commit_log_are_deleted(tmp_path: Path) -> None:
    log = TimerLog(str(tmp_path / "timerlog"), 4096)
    assert log.last_unit_pos == 4004  # 4096 - (4096 - 16) % 52 - 16 - 52
    for i in range(79 * 2):  # two full segments and a third one started
        log.append(TimerRecord(-1, 1, 1000, 2000, offset_py=i * 100, size_py=10, topic_hash=0))
    assert len(log.queue.files) == 3
    assert log.delete_expired(7700) == 0  # the first segment's last record names 7700 (record 77)
    assert log.delete_expired(7701) == 1
    assert log.delete_expired(10**9) == 1  # never the segment being written
    assert [mf.file_from_offset for mf in log.queue.files] == [8192]
    log.close()
