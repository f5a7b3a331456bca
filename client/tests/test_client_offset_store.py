"""Offset stores and the ProcessQueue bookkeeping that decides what may be committed."""

from __future__ import annotations

import asyncio
from pathlib import Path

from hypothesis import example, given
from hypothesis import strategies as st

from rocketq.client.consumer.offset_store import LocalFileOffsetStore, ReadOffsetType, RemoteBrokerOffsetStore
from rocketq.client.consumer.process_queue import ProcessQueue
from rocketq.client.model import MessageExt
from rocketq.client.remoting.message import decode_stored_message, encode_stored_message
from rocketq.client.remoting.route import MessageQueue

MQ0 = MessageQueue("T", "b", 0)
MQ1 = MessageQueue("T", "b", 1)


class FakeBroker:
    def __init__(self) -> None:
        self.stored: dict[MessageQueue, int] = {MQ1: 77}
        self.commits: list[tuple[MessageQueue, int, bool]] = []

    async def query_offset(self, group: str, mq: MessageQueue) -> int | None:
        return self.stored.get(mq)

    async def commit_offset(self, group: str, mq: MessageQueue, offset: int, *, oneway: bool) -> None:
        self.commits.append((mq, offset, oneway))
        self.stored[mq] = offset


def test_remote_store_reads_commits_and_forgets() -> None:
    async def scenario() -> None:
        broker = FakeBroker()
        store = RemoteBrokerOffsetStore(broker, "g")
        assert await store.read_offset(MQ0, ReadOffsetType.READ_FROM_STORE) == -1
        assert await store.read_offset(MQ1, ReadOffsetType.MEMORY_FIRST_THEN_STORE) == 77
        assert await store.read_offset(MQ1, ReadOffsetType.READ_FROM_MEMORY) == 77
        store.update_offset(MQ0, 10)
        store.update_offset(MQ0, 5, increase_only=True)
        assert store.offset_table[MQ0] == 10
        store.update_offset(MQ0, 5)
        assert store.offset_table[MQ0] == 5
        await store.persist_all([MQ0])
        assert broker.commits == [(MQ0, 5, True)]
        assert MQ1 not in store.offset_table  # no longer assigned: dropped
        await store.commit_sync(MQ0, 9)
        assert broker.commits[-1] == (MQ0, 9, False)

    asyncio.run(scenario())


def test_local_file_store_round_trip(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = LocalFileOffsetStore(tmp_path, "10.0.0.1@inst", "g")
        store.update_offset(MQ0, 3)
        store.update_offset(MQ1, 8)
        await store.persist_all([MQ0, MQ1])
        store.update_offset(MQ0, 4)
        await store.persist_all([MQ0, MQ1])
        assert store.path == tmp_path / "10.0.0.1@inst" / "g" / "offsets.json"
        assert store.path.with_name("offsets.json.bak").exists()
        again = LocalFileOffsetStore(tmp_path, "10.0.0.1@inst", "g")
        await again.load()
        assert again.offset_table == {MQ0: 4, MQ1: 8}
        assert await again.read_offset(MessageQueue("T", "b", 9), ReadOffsetType.READ_FROM_STORE) == -1
        store.path.write_text("{broken")
        third = LocalFileOffsetStore(tmp_path, "10.0.0.1@inst", "g")
        await third.load()  # falls back to the previous version
        assert third.offset_table == {MQ0: 3, MQ1: 8}

    asyncio.run(scenario())


def msg(offset: int, body: bytes = b"xx") -> MessageExt:
    raw = encode_stored_message(
        topic="T",
        queue_id=0,
        born_timestamp=1,
        born_host=("10.0.0.1", 1),
        store_host=("10.0.0.2", 10911),
        body=body,
        queue_offset=offset,
    )
    return decode_stored_message(raw)


def test_concurrent_commit_never_passes_a_pending_message() -> None:
    pq = ProcessQueue()
    m = [msg(i) for i in range(10, 15)]
    pq.put_messages(m)
    assert pq.msg_count == 5 and pq.msg_size == 10 and pq.max_span() == 4
    assert pq.remove_messages([m[1], m[2]]) == 10  # 10 still pending
    assert pq.remove_messages([m[0]]) == 13
    assert pq.remove_messages([m[3], m[4]]) == 15  # all done: max + 1
    assert pq.msg_count == 0 and pq.msg_size == 0
    pq.put_messages([m[0]])  # duplicates of consumed offsets are accepted again (redelivery)
    assert pq.pending_offsets() == [10]


def test_orderly_take_commit_and_retry() -> None:
    pq = ProcessQueue()
    m = [msg(i) for i in range(5)]
    assert pq.put_messages(m[2:]) is True  # first put starts an orderly consumer
    assert pq.put_messages(m[:2]) is False  # already consuming; out-of-order arrival is sorted
    taken = pq.take_messages(2)
    assert [x.queue_offset for x in taken] == [0, 1]
    pq.make_messages_to_consume_again(taken)
    assert [x.queue_offset for x in pq.take_messages(3)] == [0, 1, 2]
    assert pq.commit() == 3
    assert [x.queue_offset for x in pq.take_messages(10)] == [3, 4]
    assert pq.commit() == 5
    assert pq.take_messages(1) == [] and pq.consuming is False
    assert pq.commit() == -1


# Concurrent consumption's bookkeeping against a model: pulls in order (the bulk path), with
# gaps, overlaps, duplicates and out of order (the message-by-message path), removals of pending,
# consumed and unknown offsets, orderly takes in between; the counts, sizes, pending offsets and
# the committable offset must be the model's after every step.
_ops = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.lists(st.integers(0, 60), max_size=12), st.booleans()),
        st.tuples(st.just("remove"), st.lists(st.integers(0, 60), max_size=12), st.booleans()),
        st.tuples(st.just("take"), st.lists(st.integers(1, 5), min_size=1, max_size=1), st.booleans()),
    ),
    max_size=30,
)


@given(_ops)
@example([("put", [1, 2], True), ("take", [5], False), ("put", [1, 2, 3], True)])  # taken, re-pulled
@example([("put", [3, 4], True), ("put", [1, 2, 5], True), ("remove", [4, 1], False)])
def test_process_queue_matches_a_model(ops: list[tuple[str, list[int], bool]]) -> None:
    pq = ProcessQueue()
    pending: dict[int, int] = {}  # offset -> body size
    consuming: dict[int, int] = {}
    offset_max = 0
    for kind, offs, sort in ops:
        if sort:
            offs = sorted(set(offs))  # a pull's offsets: increasing (maybe not contiguous)
        msgs = [msg(o, b"x" * (o % 7)) for o in offs]
        if kind == "put":
            pq.put_messages(msgs)
            for o in offs:
                if o not in pending and o not in consuming:
                    pending[o] = o % 7
            if pending:
                offset_max = max(offset_max, max(pending))
        elif kind == "remove":
            got = pq.remove_messages(msgs)
            if not pending:
                assert got == -1
            else:
                for o in offs:
                    pending.pop(o, None)
                assert got == (min(pending) if pending else offset_max + 1)
        else:
            taken = pq.take_messages(offs[0])
            head = sorted(pending)[: offs[0]]
            assert [m.queue_offset for m in taken] == head
            for o in head:
                consuming[o] = pending.pop(o)
            if sort:
                assert pq.commit() == (max(consuming) + 1 if consuming else -1)
                consuming.clear()
        assert pq.pending_offsets() == sorted(pending)
        assert pq.msg_count == len(pending) + len(consuming)
        assert pq.msg_size == sum(pending.values()) + sum(consuming.values())
        assert pq.queue_offset_max == offset_max


def test_lock_and_pull_expiry() -> None:
    pq = ProcessQueue()
    assert not pq.is_lock_expired(pq.last_lock_timestamp + 30_000)
    assert pq.is_lock_expired(pq.last_lock_timestamp + 30_001)
    assert pq.is_pull_expired(pq.last_pull_timestamp + 120_001)
