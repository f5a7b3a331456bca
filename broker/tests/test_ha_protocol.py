"""The HA wire codec (golden bytes, round trips, garbage), the record aligner and the store's
replication entry points (append_replicated, truncate_commit_log)."""

from __future__ import annotations

import functools
import random
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketq.broker.ha.aligner import RecordAligner
from rocketq.broker.ha.protocol import (
    HAProtocolError,
    ReportDecoder,
    TransferDecoder,
    encode_confirm,
    encode_report,
    encode_transfer_header,
    max_transfer_size,
)
from rocketq.broker.ha.replica_hints import replica_hints
from rocketq.broker.store import dispatch as dispatch_module
from rocketq.broker.store.commit_log import DispatchHint
from rocketq.broker.store.config import StoreConfig
from rocketq.broker.store.errors import StoreConfigError, StoreError
from rocketq.broker.store.message_store import MessageStore
from rocketq.broker.store.props_scan import I64, Buffer
from rocketq.broker.store.record_batch import MessageToStore
from rocketq.broker.testing import small_store
from rocketq.client.remoting.message import encode_blank
from rocketq.client.remoting.record_layout import (
    BLANK_MAGIC,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_PREPARED_TYPE,
)
from rocketq.client.remoting.vocabulary import SCHEDULE_TOPIC, TRANS_HALF_TOPIC


def test_golden_report() -> None:
    # 0x0102030405060708 as an int64, big-endian: RocketMQ's ByteBuffer.putLong.
    assert encode_report(0x0102030405060708) == bytes.fromhex("0102030405060708")
    assert encode_report(0) == b"\x00" * 8


def test_golden_transfer_header() -> None:
    # phyOffset 1 GiB (0x40000000), size 32 KiB (0x8000): 8 + 4 bytes, big-endian.
    assert encode_transfer_header(1 << 30, 32768) == bytes.fromhex("000000004000000000008000")


@given(st.lists(st.integers(min_value=0, max_value=(1 << 62)), max_size=20), st.integers(1, 13))
def test_reports_round_trip_in_any_chunking(offsets: list[int], cut: int) -> None:
    offsets = sorted(offsets)
    stream = b"".join(encode_report(o) for o in offsets)
    decoder = ReportDecoder()
    got: list[int] = []
    for i in range(0, len(stream), cut):
        got += decoder.feed(stream[i : i + cut])
    assert got == offsets and decoder.pending == 0


@given(st.integers(0, 1 << 40), st.lists(st.binary(max_size=300), max_size=8), st.integers(1, 50))
def test_transfers_round_trip_in_any_chunking(start: int, bodies: list[bytes], cut: int) -> None:
    stream, offset = bytearray(), start
    for body in bodies:
        stream += encode_transfer_header(offset, len(body)) + body
        offset += len(body)
    decoder = TransferDecoder(max_size=1024)
    got = []
    for i in range(0, len(stream), cut):
        got += decoder.feed(bytes(stream[i : i + cut]))
    assert [t.data for t in got] == bodies
    assert all(t.phy_offset == start + sum(map(len, bodies[:k])) for k, t in enumerate(got))


@pytest.mark.parametrize(
    "garbage",
    [
        encode_report(100) + bytes.fromhex("ffffffffffffffff"),  # negative
        encode_report(100) + encode_report(99),  # backwards on one connection
    ],
)
def test_report_garbage(garbage: bytes) -> None:
    with pytest.raises(HAProtocolError, match="stream position 8") as info:
        ReportDecoder().feed(garbage)
    assert info.value.found == garbage[8:]


@pytest.mark.parametrize(
    ("garbage", "why"),
    [
        (bytes.fromhex("ffffffffffffffff") + b"\x00\x00\x00\x00", "negative transfer offset"),
        (encode_report(0) + bytes.fromhex("ffffffff"), "outside"),  # negative size
        (encode_report(0) + (4097).to_bytes(4, "big"), "outside"),  # above the cap
        (encode_transfer_header(0, 1) + b"x" + encode_transfer_header(5, 0), "does not continue"),
    ],
)
def test_transfer_garbage(garbage: bytes, why: str) -> None:
    with pytest.raises(HAProtocolError, match=why):
        TransferDecoder(max_size=4096).feed(garbage)


def test_golden_confirm_frame() -> None:
    # a transfer header at offset -1 with size 8, then the confirm offset (controller mode only)
    assert encode_confirm(0x0102030405060708) == bytes.fromhex("ffffffffffffffff000000080102030405060708")


@given(st.integers(0, 1 << 40), st.lists(st.binary(max_size=300), max_size=8), st.integers(1, 50), st.data())
def test_confirm_frames_between_transfers(
    start: int, bodies: list[bytes], cut: int, data: st.DataObject
) -> None:
    """Confirm frames anywhere in the stream leave the transfers and their continuity as they are;
    the decoder keeps the highest confirm offset it saw."""
    stream, offset, confirms = bytearray(), start, []
    for body in bodies:
        if data.draw(st.booleans()):
            confirms.append(data.draw(st.integers(0, 1 << 50)))
            stream += encode_confirm(confirms[-1])
        stream += encode_transfer_header(offset, len(body)) + body
        offset += len(body)
    decoder = TransferDecoder(max_size=1024, confirm_frames=True)
    got = []
    for i in range(0, len(stream), cut):
        got += decoder.feed(bytes(stream[i : i + cut]))
    assert [t.data for t in got] == bodies
    assert all(t.phy_offset == start + sum(map(len, bodies[:k])) for k, t in enumerate(got))
    assert decoder.confirm_offset == max(confirms, default=-1) and decoder.pending == 0


@pytest.mark.parametrize(
    ("garbage", "confirm_frames", "why"),
    [
        (encode_confirm(5), False, "negative transfer offset"),  # a 4.x slave never accepts one
        (
            bytes.fromhex("ffffffffffffffff") + b"\x00\x00\x00\x04" + b"\x00" * 4,
            True,
            "confirm frame of 4 bytes",
        ),
        (bytes.fromhex("ffffffffffffffff00000008ffffffffffffff00"), True, "negative confirm offset"),
    ],
)
def test_confirm_frame_garbage(garbage: bytes, confirm_frames: bool, why: str) -> None:
    with pytest.raises(HAProtocolError, match=why):
        TransferDecoder(max_size=4096, confirm_frames=confirm_frames).feed(garbage)


def test_max_transfer_size_is_capped() -> None:
    assert max_transfer_size(32 * 1024) == 128 * 1024
    assert max_transfer_size(1 << 40) == 64 * 1024 * 1024


# ---------------------------------------------------------------------------------------- stores


def _msg(i: int) -> MessageToStore:
    return MessageToStore(
        topic="T",
        queue_id=i % 2,
        body=bytes([i % 256]) * (100 + i * 7),
        properties={"KEYS": f"k{i}", "UNIQ_KEY": f"u{i}"},
        born_timestamp=1,
        born_host=("127.0.0.1", 1),
        store_host=("127.0.0.1", 2),
    )


def _fill(store: MessageStore, n: int) -> None:
    for i in range(n):
        assert store.put_message(_msg(i)).status.is_ok


def _segments(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((root / "commitlog").iterdir())}


@pytest.mark.parametrize("cut", [1, 7, 1000, 32 * 1024])
def test_replicated_bytes_make_an_identicalsmall_store(tmp_path: Path, cut: int) -> None:
    with small_store(tmp_path / "m") as master, small_store(tmp_path / "s") as slave:
        _fill(master, 400)  # about 3 segments: blank fillers are replicated too
        end = master.max_phy_offset
        aligner = RecordAligner(0, master.commit_log.mfq.mapped_file_size)
        offset = 0
        while offset < end:
            tail = master.commit_log.segment_tail(offset)
            assert tail is not None
            piece = tail[2][:cut]
            chunk = aligner.feed(piece)
            if chunk:
                slave.append_replicated(aligner.offset - len(chunk), chunk)
            assert slave.max_phy_offset == aligner.offset  # whole records only
            offset += len(piece)
        assert slave.wait_dispatched()
        assert slave.max_phy_offset == end
        assert slave.get_max_offset_in_queue("T", 0) == master.get_max_offset_in_queue("T", 0) == 200
        assert slave.query_message("T", "k7", 10, 0, 1 << 62).phy_offsets == [
            master.query_message("T", "k7", 10, 0, 1 << 62).phy_offsets[0]
        ]
    assert _segments(tmp_path / "s") == _segments(tmp_path / "m")


def test_append_replicated_rejects_a_gap(tmp_path: Path) -> None:
    with small_store(tmp_path / "s") as slave:
        with pytest.raises(StoreError, match="segment boundary"):
            slave.append_replicated(10, b"x")
        with small_store(tmp_path / "m") as master:
            _fill(master, 3)
            data = bytes(master.commit_log.view(0, master.max_phy_offset) or b"")
        slave.append_replicated(0, data)
        with pytest.raises(StoreError, match="does not continue"):
            slave.append_replicated(len(data) + 1, b"x")


def test_truncate_commit_log_drops_queue_units_and_index(tmp_path: Path) -> None:
    with small_store(tmp_path / "s") as store:
        _fill(store, 300)
        assert store.wait_dispatched()
        cq = store.find_consume_queue("T", 0)
        assert cq is not None
        cut_unit = cq.unit_at(100)
        assert cut_unit is not None
        store.truncate_commit_log(cut_unit[0])
        assert store.max_phy_offset == cut_unit[0]
        assert store.get_max_offset_in_queue("T", 0) == 100
        assert store.query_message("T", "k299", 10, 0, 1 << 62).phy_offsets == []
        assert store.query_message("T", "k0", 10, 0, 1 << 62).phy_offsets == [0]
        _fill(store, 3)  # appends continue at the cut with the right queue offsets
        assert store.wait_dispatched()
        assert store.get_max_offset_in_queue("T", 0) == 102


def test_aligner_rejects_bytes_that_are_no_records() -> None:
    with pytest.raises(HAProtocolError, match="no CommitLog record"):
        RecordAligner(0, 4096).feed(b"\x00\x00\x00\x20garbage-garbage-garbage-garbage")
    aligner = RecordAligner(4096 - 64, 4096)
    assert aligner.feed(encode_blank(64)[:8]) == encode_blank(64)[:8]  # a blank filler passes at once
    assert int.from_bytes(encode_blank(64)[4:8], "big") == BLANK_MAGIC
    assert aligner.feed(b"\x00" * 56) == b"\x00" * 56
    assert aligner.offset == 4096


# ------------------------------------------------------------------------------ replica hints


def msg(topic: str, qid: int, i: int, sys_flag: int = 0, **props: str) -> MessageToStore:
    properties = {"UNIQ_KEY": f"u{topic[:3]}{i}", "TAGS": f"tag{i % 3}", **props}
    return MessageToStore(
        topic=topic,
        queue_id=qid,
        body=b"b" * (20 + i % 50),
        properties=properties,
        sys_flag=sys_flag,
        born_timestamp=1,
        born_host=("127.0.0.1", 1),
        store_host=("127.0.0.1", 2),
    )


def _mixed_load(store: MessageStore) -> None:
    """Batches, single sends, tags and keys, a long topic, transaction and schedule records."""
    long_topic = "L" * 120
    for i in range(60):
        assert store.put_messages(
            [msg("T", i % 3, i * 100 + j, KEYS=f"k{i} x{j}") for j in range(12)]
        ).status.is_ok
        assert store.put_message(msg(long_topic, 0, i)).status.is_ok
        if i % 10 == 0:
            assert store.put_message(msg("T", 1, i, TRANSACTION_PREPARED_TYPE)).status.is_ok
            assert store.put_message(msg("T", 1, i, TRANSACTION_COMMIT_TYPE)).status.is_ok
            assert store.put_message(msg(TRANS_HALF_TOPIC, 0, i, TRANSACTION_PREPARED_TYPE)).status.is_ok
            delayed = msg(SCHEDULE_TOPIC, 1, i, DELAY="2", REAL_TOPIC="T", REAL_QID="0")
            assert store.put_message(delayed).status.is_ok


def _replicate(master: MessageStore, slave: MessageStore, hints: str, cut: int) -> None:
    """Copy the master's log into the slave in reads of ``cut`` bytes, as the HA client does; hints:
    "none" (dispatch decodes records), "given" (made per read) or "deferred" (the reput thread makes
    them for all reads since its last round)."""
    aligner = RecordAligner(0, master.commit_log.mfq.mapped_file_size)
    offset, end = 0, master.max_phy_offset
    while offset < end:
        tail = master.commit_log.segment_tail(offset)
        assert tail is not None
        piece = bytes(tail[2][:cut])
        chunk, starts = aligner.feed_records(piece)
        if chunk:
            base = aligner.offset - len(chunk)
            if hints == "deferred":
                slave.append_replicated(base, chunk, starts=starts, hinter=replica_hints)
            else:
                slave.append_replicated(
                    base, chunk, replica_hints(chunk, base, starts) if hints == "given" else ()
                )
        offset += len(piece)
    assert slave.wait_dispatched()


def _derived_files(root: Path) -> tuple[dict[str, bytes], list[bytes]]:
    """ConsumeQueue files by path, index files' contents (their names are creation times)."""
    cq = {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted((root / "consumequeue").rglob("*"))
        if p.is_file()
    }
    return cq, sorted(p.read_bytes() for p in (root / "index").iterdir())


@pytest.mark.parametrize("cut", [5000, 64 * 1024])
def test_replica_hints_dispatch_like_record_decoding(tmp_path: Path, cut: int) -> None:
    with small_store(tmp_path / "m") as master:
        _mixed_load(master)
        assert master.wait_dispatched()
        with (
            small_store(tmp_path / "h") as hinted,
            small_store(tmp_path / "d") as deferred,
            small_store(tmp_path / "p") as parsed,
        ):
            _replicate(master, hinted, "given", cut)
            _replicate(master, deferred, "deferred", cut)
            _replicate(master, parsed, "none", cut)
            chunk = bytes(master.commit_log.view(0, 4096) or b"")
            starts = RecordAligner(0, 64 * 1024).feed_records(chunk)[1]
            assert replica_hints(chunk, 0, starts)  # the hint path is taken
    cq, index = _derived_files(tmp_path / "p")
    assert len(cq) == 5 and index  # T-0..2, the long topic, the schedule queue
    assert _derived_files(tmp_path / "h") == (cq, index)
    assert _derived_files(tmp_path / "d") == (cq, index)
    assert _derived_files(tmp_path / "m")[0] == cq


def test_deferred_hints_hold_dispatch_until_made(tmp_path: Path) -> None:
    """Chunks appended while the reput thread runs, some across segment ends: it never dispatches a
    chunk's bytes before it made the chunk's hints (no record is decoded), and a chunk that does
    not continue the log leaves no hold behind."""
    with small_store(tmp_path / "m") as master:
        for i in range(400):
            assert master.put_messages(
                [msg("T", i % 3, i * 10 + j, KEYS=f"k{i}") for j in range(8)]
            ).status.is_ok
        assert master.wait_dispatched()
        with small_store(tmp_path / "s") as slave:
            decoded = 0
            real = slave.dispatcher._dispatch_parsed

            def counting(offset: int, stop_at: int | None, touched: dict[tuple[str, int], int]) -> int:
                nonlocal decoded
                n = real(offset, stop_at, touched)
                decoded += n
                return n

            slave.dispatcher._dispatch_parsed = counting  # type: ignore[method-assign]
            made: list[int] = []

            def hinter(data: Buffer, base: int, starts: Sequence[int] | I64) -> list[DispatchHint]:
                made.append(len(starts))
                time.sleep(0.001)  # the appender runs on meanwhile
                return replica_hints(data, base, starts)

            with pytest.raises(StoreError):
                slave.append_replicated(4096, b"x", starts=[0], hinter=hinter)
            assert not slave.commit_log.replica_pending
            # the master's log as one stream, read in pieces that run across segment ends (the
            # blank filler of one segment and the first records of the next in one chunk)
            stream, offset = bytearray(), 0
            while offset < master.max_phy_offset:
                tail = master.commit_log.segment_tail(offset)
                assert tail is not None
                stream += tail[2]
                offset += len(tail[2])
            assert master.commit_log.mfq.mapped_file_size * 4 < len(stream)
            aligner = RecordAligner(0, master.commit_log.mfq.mapped_file_size)
            for p in range(0, len(stream), 9000):
                chunk, starts = aligner.feed_records(bytes(stream[p : p + 9000]))
                if chunk:
                    slave.append_replicated(aligner.offset - len(chunk), chunk, starts=starts, hinter=hinter)
                    slave.dispatcher.try_dispatch(1 << 30)  # a round here too, racing the reput thread
            assert slave.wait_dispatched()
            assert sum(made) == 3200 and decoded == 0
            assert slave.get_max_offset_in_queue("T", 0) == master.get_max_offset_in_queue("T", 0)


def _started_slave_store(root: Path) -> MessageStore:
    """A started store that waits 10 s (``replicaDispatchIntervalMs``) after a round of replicated
    bytes, with 64 KiB CommitLog segments."""
    store = MessageStore(
        StoreConfig.from_broker_conf(
            {"replicaDispatchIntervalMs": "10000"},
            store_path_root_dir=str(root),
            mapped_file_size_commit_log_bytes=64 * 1024,
            max_message_size_bytes=8 * 1024,
        )
    )
    store.start()
    return store


def test_a_slave_dispatches_replicated_bytes_every_replica_dispatch_interval(tmp_path: Path) -> None:
    """After a round of replicated bytes the reput thread waits ``replicaDispatchIntervalMs`` (a
    slave's appends do not wake it) before the next; a wakeup or shutdown still dispatches at once."""
    with small_store(tmp_path / "m") as master:
        assert master.put_messages([msg("T", 0, j, KEYS=f"k{j}") for j in range(40)]).status.is_ok
        assert master.wait_dispatched()
        tail = master.commit_log.segment_tail(0)
        assert tail is not None and len(tail[2]) == master.max_phy_offset  # one segment
        stream = bytes(tail[2])
    slave = _started_slave_store(tmp_path / "s")
    try:
        aligner = RecordAligner(0, slave.config.mapped_file_size_commit_log_bytes)
        halves = []
        for piece in (stream[: len(stream) // 2], stream[len(stream) // 2 :]):
            chunk, starts = aligner.feed_records(piece)
            halves.append((aligner.offset - len(chunk), chunk, starts))
        slave.append_replicated(halves[0][0], halves[0][1], starts=halves[0][2], hinter=replica_hints)
        assert slave.wait_dispatched()  # the first round after an idle wait (reput_idle_wait_ms)
        first = slave.get_max_offset_in_queue("T", 0)
        assert 0 < first < 40
        slave.append_replicated(halves[1][0], halves[1][1], starts=halves[1][2], hinter=replica_hints)
        assert not slave.wait_dispatched(timeout_s=0.3)  # the thread waits out the interval
        assert slave.get_max_offset_in_queue("T", 0) == first
        assert slave._reput is not None
        slave._reput.wakeup()
        assert slave.wait_dispatched()
        assert slave.get_max_offset_in_queue("T", 0) == 40
        assert slave.query_message("T", "k39", 10, 0, 1 << 62).phy_offsets
    finally:
        slave.shutdown()


def test_a_slave_round_takes_what_the_interval_brought(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A slave's round dispatches up to _REPLICA_UNITS_PER_ROUND records, not the master's
    _UNITS_PER_ROUND, and the rounds that continue a replicated range keep that cap (they make
    no hints of their own).  The caps are shrunk here: records 40, master cap 4, slave cap 16."""
    with small_store(tmp_path / "m") as master:
        for j in range(40):  # queues in turn: a hint each
            assert master.put_messages([msg("T", j % 4, j)]).status.is_ok
        assert master.wait_dispatched()
        tail = master.commit_log.segment_tail(0)
        assert tail is not None
        stream = bytes(tail[2])
    monkeypatch.setattr(dispatch_module, "_UNITS_PER_ROUND", 4)
    monkeypatch.setattr(dispatch_module, "_REPLICA_UNITS_PER_ROUND", 16)
    rounds: list[int] = []
    do_reput = dispatch_module.Dispatcher.do_reput

    def counted(self: dispatch_module.Dispatcher) -> int:
        n = do_reput(self)
        if n:
            rounds.append(n)
        return n

    monkeypatch.setattr(dispatch_module.Dispatcher, "do_reput", counted)
    slave = _started_slave_store(tmp_path / "s")
    try:
        chunk, starts = RecordAligner(0, slave.config.mapped_file_size_commit_log_bytes).feed_records(stream)
        slave.append_replicated(0, chunk, starts=starts, hinter=replica_hints)
        assert slave.wait_dispatched()
        assert rounds == [16, 16, 8]
        assert [slave.get_max_offset_in_queue("T", q) for q in range(4)] == [10] * 4
    finally:
        slave.shutdown()


def test_replica_dispatch_interval_is_checked() -> None:
    conf = StoreConfig.from_broker_conf({"replicaDispatchIntervalMs": "250"})
    assert conf.replica_dispatch_interval_ms == 250
    assert StoreConfig().replica_dispatch_interval_ms == 50
    with pytest.raises(StoreConfigError, match="replicaDispatchIntervalMs"):
        StoreConfig.from_broker_conf({"replicaDispatchIntervalMs": "0"})


def test_replica_hints_leave_malformed_records_to_decoding(tmp_path: Path) -> None:
    with small_store(tmp_path / "m") as master:
        _mixed_load(master)
        log = bytes(master.commit_log.view(0, 16 * 1024) or b"")
    chunk, starts = RecordAligner(0, 64 * 1024).feed_records(log)
    hinted = sum(len(h.sizes) for h in replica_hints(chunk, 0, starts))
    assert hinted > 0
    rng = random.Random(7)
    for _ in range(300):  # any byte of any header or tail: never an exception, never a wrong record
        bad = bytearray(chunk)
        bad[rng.randrange(len(bad))] ^= 1 << rng.randrange(8)
        for h in replica_hints(bytes(bad), 0, starts):
            assert h.base in starts and h.end <= len(bad)
            assert all(int(p) + int(n) <= len(bad) for p, n in zip(h.phys, h.sizes, strict=True))


def _record_starts(log: bytes, segment: int) -> list[int]:
    """The reference: every record's offset, stepping header by header, blank fillers skipped."""
    out, p = [], 0
    while p < len(log):
        total = int.from_bytes(log[p : p + 4], "big")
        if int.from_bytes(log[p + 4 : p + 8], "big") != BLANK_MAGIC:
            out.append(p)
        else:
            assert (p + total) % segment == 0
        p += total
    assert p == len(log)
    return out


@functools.cache
def _runs_log() -> bytes:
    """A CommitLog of runs of equal records (batches) with odd ones between, over 4 segments."""
    with tempfile.TemporaryDirectory() as root:
        with small_store(Path(root)) as master:
            for i in range(50):
                assert master.put_messages([_msg(0) for _ in range(10 + i % 25)]).status.is_ok
                assert master.put_message(_msg(i + 1)).status.is_ok
            end = master.max_phy_offset
        log = b"".join(_segments(Path(root)).values())[:end]
    assert end > 3 * 64 * 1024
    return log


@settings(deadline=None)  # a shared CI machine can stall one example past the default 200 ms
@given(st.lists(st.integers(1, 40_000), min_size=1, max_size=30))
def test_aligner_finds_every_record_start_in_runs_of_one_size(cuts: list[int]) -> None:
    log = _runs_log()
    aligner = RecordAligner(0, 64 * 1024)
    starts: list[int] = []
    out = bytearray()
    p = 0
    for cut in [*cuts, len(log)]:
        chunk, found = aligner.feed_records(log[p : p + cut])
        starts += [len(out) + s for s in found]
        out += chunk
        p += cut
        if p >= len(log):
            break
    assert bytes(out) == log[: len(out)] and aligner.pending == len(log) - len(out)
    assert starts == [s for s in _record_starts(log, 64 * 1024) if s < len(out)]
