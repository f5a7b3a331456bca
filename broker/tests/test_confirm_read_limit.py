"""Controller mode's read limit: pulls stop at the confirm offset (RocketMQ 5's readUnCommitted=false).

The store's ``read_limit`` cuts ``get_message`` at the first ConsumeQueue unit whose record ends
beyond the confirm offset; ``nextBeginOffset`` never passes an unconfirmed record; a read finding
nothing confirmed answers as at the queue's end; the parked pull is woken when the offset advances.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketq.broker.long_polling import PullRequestHoldService
from rocketq.broker.processor.pull import readable_max_offset
from rocketq.broker.store.config import StoreConfig
from rocketq.broker.store.message_store import MessageStore
from rocketq.broker.store.record_batch import MessageToStore
from rocketq.broker.store.status import GetMessageStatus, PutMessageStatus
from rocketq.client.remoting.message import decode_stored_message


def msg(body: bytes) -> MessageToStore:
    return MessageToStore(
        topic="TopicA",
        queue_id=0,
        body=body,
        properties={},
        born_timestamp=int(time.time() * 1000),
        born_host=("10.0.0.2", 5555),
        store_host=("127.0.0.1", 10911),
    )


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MessageStore]:
    s = MessageStore(
        StoreConfig(
            store_path_root_dir=str(tmp_path),
            mapped_file_size_commit_log_bytes=64 * 1024,
            mapped_file_size_consume_queue_units=100,
            max_message_size_bytes=16 * 1024,
            clean_resource_interval_ms=3_600_000,
        )
    )
    s.start()
    yield s
    s.shutdown()


def _ends(store: MessageStore, n: int) -> list[int]:
    """Put ``n`` messages on TopicA/0; the CommitLog offset each record ends at."""
    ends = []
    for i in range(n):
        result = store.put_message(msg(body=f"m{i}".encode()))
        assert result.status is PutMessageStatus.PUT_OK and result.append_result is not None
        ends.append(result.append_result.wrote_offset + result.append_result.wrote_bytes)
    assert store.wait_dispatched()
    return ends


def _bodies(
    store: MessageStore, offset: int, max_nums: int = 32, tags: frozenset[int] | None = None
) -> list[bytes]:
    result = store.get_message("g", "TopicA", 0, offset, max_nums, 1 << 20, tags)
    try:
        return [decode_stored_message(bytes(b)).body for b in result.buffers]
    finally:
        result.release()


@pytest.mark.parametrize("max_nums", [8, 1000])  # the struct fast path and the numpy path
def test_records_beyond_the_confirm_offset_are_not_returned(store: MessageStore, max_nums: int) -> None:
    ends = _ends(store, 6)
    confirm = [ends[2]]
    store.read_limit = lambda: confirm[0]
    result = store.get_message("g", "TopicA", 0, 0, max_nums, 1 << 20)
    result.release()
    assert result.status is GetMessageStatus.FOUND
    assert result.msg_count == 3 and result.next_begin_offset == 3
    # nothing confirmed from offset 3: answered as at the queue's end, the consumer stays there
    empty = store.get_message("g", "TopicA", 0, 3, max_nums, 1 << 20)
    assert empty.status is GetMessageStatus.OFFSET_OVERFLOW_ONE and empty.next_begin_offset == 3
    assert not empty.buffers
    # a limit inside a record still hides that record
    confirm[0] = ends[4] - 1
    assert _bodies(store, 3, max_nums) == [b"m3"]
    confirm[0] = ends[5]  # now confirmed: the next pull gets them
    assert _bodies(store, 3, max_nums) == [b"m3", b"m4", b"m5"]


def test_tag_filtered_reads_do_not_skip_unconfirmed_records(store: MessageStore) -> None:
    ends = _ends(store, 4)
    store.read_limit = lambda: ends[1]
    result = store.get_message("g", "TopicA", 0, 0, 32, 1 << 20, frozenset({12345}))  # matches nothing
    result.release()
    assert result.status is GetMessageStatus.NO_MATCHED_MESSAGE
    assert result.next_begin_offset == 2  # past the confirmed units only


def test_readable_max_offset_is_the_confirmed_one(store: MessageStore) -> None:
    ends = _ends(store, 5)
    assert readable_max_offset(store, "TopicA", 0) == 5
    for i, end in enumerate(ends):
        store.read_limit = lambda end=end: end
        assert readable_max_offset(store, "TopicA", 0) == i + 1
        store.read_limit = lambda end=end: end - 1
        assert readable_max_offset(store, "TopicA", 0) == i
    store.read_limit = lambda: None  # everything confirmed
    assert readable_max_offset(store, "TopicA", 0) == 5
    assert _bodies(store, 4) == [b"m4"]


def test_parked_pull_is_woken_when_the_confirm_offset_advances(store: MessageStore) -> None:
    ends = _ends(store, 3)
    confirm = [ends[0]]
    store.read_limit = lambda: confirm[0]

    async def scenario() -> None:
        hold = PullRequestHoldService(asyncio.get_running_loop())
        future = hold.hold("TopicA", 0, 1, 10_000, lambda: readable_max_offset(store, "TopicA", 0))
        assert future is not None and not future.done()  # offset 1 is not confirmed yet
        hold.notify_confirmed(lambda t, q: readable_max_offset(store, t, q))
        assert not future.done()  # the confirm offset did not move past offset 1
        confirm[0] = ends[1]
        hold.notify_confirmed(lambda t, q: readable_max_offset(store, t, q))
        assert future.done() and future.result() is True
        assert hold.held_count == 0
        hold.shutdown()

    asyncio.run(scenario())
