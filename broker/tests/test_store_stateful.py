"""Stateful model test: the store against an in-memory model, with clean restarts, crashes and torn tails.

Rules append single messages and batches, read through the ConsumeQueue, flush, restart cleanly,
crash (optionally losing everything not flushed, as a power cut would) and write a torn partial
record at the tail.  Invariants: no flushed (or, without page-cache loss, acknowledged) message is
lost or altered, every returned record passes its CRC, queue offsets are dense, and the index
agrees with the CommitLog.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from rocketq.broker.store.config import StoreConfig
from rocketq.broker.store.message_store import MessageStore
from rocketq.broker.store.record_batch import MessageToStore
from rocketq.broker.store.status import GetMessageStatus, PutMessageStatus
from rocketq.client.remoting.message import decode_stored_message, encode_stored_message

HOST = ("127.0.0.1", 10911)
SEG = 16 * 1024
QUEUES = 3
bodies = st.binary(min_size=0, max_size=700)


class StoreMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = tempfile.mkdtemp(prefix="rq-stateful-")
        self.config = StoreConfig(
            store_path_root_dir=self.root,
            mapped_file_size_commit_log_bytes=SEG,
            mapped_file_size_consume_queue_units=20,
            max_message_size_bytes=4096,
            max_hash_slot_num=16,
            max_index_num=40,
            flush_interval_commit_log_ms=3_600_000,
            flush_commit_log_thorough_interval_ms=3_600_000,
            flush_interval_consume_queue_ms=3_600_000,
            clean_resource_interval_ms=3_600_000,
        )
        self.store = MessageStore(self.config)
        self.store.start()
        # per queue: list of (body, key, commit log end offset of the record)
        self.model: list[list[tuple[bytes, str, int]]] = [[] for _ in range(QUEUES)]
        self.counter = 0
        self.flushed = 0

    def teardown(self) -> None:
        self.store.shutdown()
        shutil.rmtree(self.root, ignore_errors=True)

    def _msg(self, queue_id: int, body: bytes) -> tuple[MessageToStore, str]:
        self.counter += 1
        key = f"k{self.counter}"
        return MessageToStore(
            topic="T",
            queue_id=queue_id,
            body=body,
            properties={"KEYS": key, "TAGS": "t"},
            born_timestamp=1,
            born_host=HOST,
            store_host=HOST,
        ), key

    @rule(queue_id=st.integers(0, QUEUES - 1), body=bodies)
    def append(self, queue_id: int, body: bytes) -> None:
        m, key = self._msg(queue_id, body)
        r = self.store.put_message(m)
        assert r.status is PutMessageStatus.PUT_OK and r.append_result is not None
        assert r.append_result.queue_offset == len(self.model[queue_id])
        self.model[queue_id].append((body, key, r.append_result.wrote_offset + r.append_result.wrote_bytes))

    @rule(queue_id=st.integers(0, QUEUES - 1), batch=st.lists(bodies, min_size=1, max_size=5))
    def batch_append(self, queue_id: int, batch: list[bytes]) -> None:
        msgs = [self._msg(queue_id, b) for b in batch]
        r = self.store.put_messages([m for m, _ in msgs])
        assert r.status is PutMessageStatus.PUT_OK and r.append_result is not None
        assert r.append_result.queue_offset == len(self.model[queue_id])
        pos = r.append_result.wrote_offset
        for (m, key), b in zip(msgs, batch, strict=True):
            pos += len(
                encode_stored_message(
                    topic="T",
                    queue_id=queue_id,
                    body=b,
                    properties=m.properties,
                    born_timestamp=1,
                    born_host=HOST,
                    store_host=HOST,
                )
            )
            self.model[queue_id].append((b, key, pos))
        assert pos == r.append_result.wrote_offset + r.append_result.wrote_bytes

    @rule(queue_id=st.integers(0, QUEUES - 1), start=st.integers(0, 60), max_n=st.integers(1, 40))
    def read(self, queue_id: int, start: int, max_n: int) -> None:
        assert self.store.wait_dispatched()
        expected = self.model[queue_id]
        g = self.store.get_message("g", "T", queue_id, start, max_n, 1 << 30)
        if start < len(expected):
            assert g.status is GetMessageStatus.FOUND
            got = [decode_stored_message(b, check_crc=True) for b in g.buffers]
            want = expected[start : start + max_n]
            if len(got) < len(want):  # a pull stops at the end of a ConsumeQueue segment
                assert g.next_begin_offset % 20 == 0 and g.next_begin_offset == start + len(got)
            assert [m.body for m in got] == [e[0] for e in want[: len(got)]] and got
            assert [m.queue_offset for m in got] == list(range(start, start + len(got)))
        else:
            assert g.status in (
                GetMessageStatus.OFFSET_OVERFLOW_ONE,
                GetMessageStatus.OFFSET_OVERFLOW_BADLY,
                GetMessageStatus.NO_MESSAGE_IN_QUEUE,
            )

    @rule()
    def flush(self) -> None:
        self.store.commit_log.flush(0)
        self.flushed = self.store.commit_log.flushed_where

    @rule()
    def clean_restart(self) -> None:
        self.store.shutdown()
        self.store = MessageStore(self.config)
        self.store.start()
        assert self.store.last_exit_ok
        self.flushed = self.store.commit_log.flushed_where

    @rule(lose_unflushed=st.booleans(), torn=st.binary(min_size=0, max_size=300))
    def crash(self, lose_unflushed: bool, torn: bytes) -> None:
        self.store.halt()
        end = self.store.max_phy_offset
        if lose_unflushed:
            self._zero_commit_log_from(self.flushed)
            self.model = [[e for e in q if e[2] <= self.flushed] for q in self.model]
            end = self.flushed
        if torn:
            self._write_torn_record(end, torn)
        self.store = MessageStore(self.config)
        self.store.start()
        assert not self.store.last_exit_ok
        self.flushed = self.store.commit_log.flushed_where

    def _zero_commit_log_from(self, offset: int) -> None:
        cl_dir = Path(self.config.commit_log_dir)
        if not cl_dir.exists():
            return
        for name in sorted(os.listdir(cl_dir)):
            start = int(name)
            if start + SEG <= offset:
                continue
            with open(cl_dir / name, "r+b") as f:
                pos = max(offset - start, 0)
                f.seek(pos)
                f.write(bytes(SEG - pos))

    def _write_torn_record(self, end: int, torn: bytes) -> None:
        """A record cut short: a plausible header, then part of the body (as a kill mid-memcpy)."""
        rec = encode_stored_message(
            topic="T",
            queue_id=0,
            body=torn + b"pad" * 50,
            properties={},
            born_timestamp=1,
            born_host=HOST,
            store_host=HOST,
        )
        part = rec[: max(8, len(rec) // 2)]
        name = Path(self.config.commit_log_dir) / f"{end - end % SEG:020d}"
        if end % SEG + len(part) > SEG or not name.exists():
            return
        with open(name, "r+b") as f:
            f.seek(end % SEG)
            f.write(part)

    @invariant()
    def queues_match_model(self) -> None:
        for q in range(QUEUES):
            assert self.store.get_max_offset_in_queue("T", q) == len(self.model[q])

    @precondition(lambda self: any(self.model))
    @invariant()
    def last_message_is_indexed_and_intact(self) -> None:
        assert self.store.wait_dispatched()
        q = max(range(QUEUES), key=lambda i: len(self.model[i]))
        body, key, _ = self.model[q][-1]
        found = self.store.query_message("T", key, 32, 0, 1 << 62)
        assert [decode_stored_message(b, check_crc=True).body for b in found.buffers] == [body]


TestStoreStateful = StoreMachine.TestCase
TestStoreStateful.settings = settings(
    max_examples=60, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
