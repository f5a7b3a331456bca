"""What POP, PEEK and NOTIFICATION share: pop offsets, the retry topics to read, one queue's read.

The POP offset of a group on a queue is its consumer offset (Java keeps both in
``ConsumerOffsetManager``): a queue popped for the first time starts at the queue's minimum
offset with ``initMode`` MIN (0) or on a retry topic, and with MAX (1) at its last message (the
first one when ``initPopOffsetByCheckMsgInMem`` and the whole queue is still in memory), as
``PopMessageProcessor.getInitOffset``.  Reads use the pull path's filters: TAG hash codes in the
ConsumeQueue, or a compiled SQL92 expression evaluated on each record's properties.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rocketq.broker.config import BrokerConfig
from rocketq.broker.filter.expression import Node
from rocketq.broker.filter.message_filter import read_matching
from rocketq.broker.offset_manager import ConsumerOffsetManager
from rocketq.broker.processor.pull import INLINE_READ_MAX_BEHIND_BYTES
from rocketq.broker.store.message_store import MessageStore
from rocketq.broker.store.status import GetMessageStatus
from rocketq.client.remoting.message import iter_stored_messages
from rocketq.client.remoting.pop import RetryFlag, pop_retry_topic_of
from rocketq.client.remoting.vocabulary import RETRY_GROUP_TOPIC_PREFIX

__all__ = [
    "INIT_MODE_MAX",
    "INIT_MODE_MIN",
    "Filter",
    "QueueRead",
    "init_pop_offset",
    "pop_offset",
    "read_queue",
    "retry_topics",
]

INIT_MODE_MIN = 0
INIT_MODE_MAX = 1
Filter = frozenset[int] | Node | None  # tag codes, a compiled SQL92 expression, or everything
#: how far from the CommitLog's end a queue counts as "in memory" for initMode MAX
_IN_MEMORY_BYTES = INLINE_READ_MAX_BEHIND_BYTES


@dataclass(frozen=True, slots=True)
class QueueRead:
    """One queue's read: the records (whole, as stored) and their queue offsets."""

    status: GetMessageStatus
    records: list[bytes]
    queue_offsets: list[int]
    next_begin_offset: int
    max_offset: int

    @property
    def body_size(self) -> int:
        return sum(len(r) for r in self.records)


def init_pop_offset(store: MessageStore, cfg: BrokerConfig, topic: str, queue_id: int, init_mode: int) -> int:
    """``getInitOffset``: where a group with no offset on the queue starts popping."""
    if init_mode == INIT_MODE_MIN or topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return store.get_min_offset_in_queue(topic, queue_id)
    if (
        cfg.init_pop_offset_by_check_msg_in_mem
        and store.get_min_offset_in_queue(topic, queue_id) <= 0
        and store.check_in_mem_by_consume_offset(topic, queue_id, 0, _IN_MEMORY_BYTES)
    ):
        return 0
    return max(store.get_max_offset_in_queue(topic, queue_id) - 1, 0)


def pop_offset(
    store: MessageStore,
    offsets: ConsumerOffsetManager,
    cfg: BrokerConfig,
    group: str,
    topic: str,
    queue_id: int,
    init_mode: int,
    *,
    commit_init: bool,
) -> int:
    """The group's POP offset on the queue; a first one is committed when ``commit_init``."""
    offset = offsets.query_offset(group, topic, queue_id)
    if offset >= 0:
        return offset
    offset = init_pop_offset(store, cfg, topic, queue_id, init_mode)
    if commit_init:
        offsets.commit_offset(group, topic, queue_id, offset)
    return offset


def pop_retry_topic(topic: str, group: str, *, v2: bool) -> str:
    """``KeyBuilder.buildPopRetryTopic``: the V2 name (``%RETRY%group+topic``) or the V1 one."""
    return pop_retry_topic_of(topic, group, RetryFlag.RETRY_V2 if v2 else RetryFlag.RETRY)


def retry_topics(cfg: BrokerConfig, topic: str, group: str, random_q: int) -> list[str]:
    """The POP retry topic a request reads (``PopMessageProcessor``): the V2 name with
    ``enableRetryTopicV2``, or the V1 one for every other request when
    ``retrieveMessageFromPopRetryTopicV1`` keeps the old messages readable."""
    if cfg.enable_retry_topic_v2 and cfg.retrieve_message_from_pop_retry_topic_v1 and random_q % 2 == 0:
        return [pop_retry_topic(topic, group, v2=False)]
    return [pop_retry_topic(topic, group, v2=cfg.enable_retry_topic_v2)]


def all_retry_topics(cfg: BrokerConfig, topic: str, group: str) -> list[str]:
    """Every POP retry topic of ``group`` on ``topic`` whose arrivals wake a waiting pop."""
    names = [pop_retry_topic(topic, group, v2=cfg.enable_retry_topic_v2)]
    if cfg.enable_retry_topic_v2 and cfg.retrieve_message_from_pop_retry_topic_v1:
        names.append(pop_retry_topic(topic, group, v2=False))
    return names


def read_queue(
    store: MessageStore,
    group: str,
    topic: str,
    queue_id: int,
    offset: int,
    max_nums: int,
    max_bytes: int,
    msg_filter: Filter,
) -> QueueRead:
    """Up to ``max_nums`` matching records from ``offset`` (blocking; small reads run inline)."""
    if isinstance(msg_filter, Node):
        filtered = read_matching(store, group, topic, queue_id, offset, max_nums, max_bytes, msg_filter)
        records: list[bytes] = []
        queue_offsets: list[int] = []
        body = memoryview(filtered.body)
        pos = 0
        for msg in iter_stored_messages(filtered.body, decompress=False):
            records.append(bytes(body[pos : pos + msg.total_size]))
            queue_offsets.append(msg.queue_offset)
            pos += msg.total_size
        return QueueRead(
            filtered.status, records, queue_offsets, filtered.next_begin_offset, filtered.max_offset
        )
    result = store.get_message(group, topic, queue_id, offset, max_nums, max_bytes, msg_filter)
    try:
        records = [bytes(b) for b in result.buffers]
        queue_offsets = list(result.queue_offsets)
    finally:
        result.release()
    if len(queue_offsets) != len(records):  # not reported: read them from the records
        queue_offsets = [m.queue_offset for r in records for m in iter_stored_messages(r, decompress=False)]
    return QueueRead(result.status, records, queue_offsets, result.next_begin_offset, result.max_offset)


def is_hot(store: MessageStore, topic: str, queue_id: int, offset: int, msg_filter: Filter) -> bool:
    """A read that stays in the page cache and can run on the event loop (as the pull path does)."""
    return not isinstance(msg_filter, Node) and store.check_in_mem_by_consume_offset(
        topic, queue_id, offset, INLINE_READ_MAX_BEHIND_BYTES
    )


def has_message(
    store: MessageStore,
    offsets: ConsumerOffsetManager,
    cfg: BrokerConfig,
    group: str,
    topic: str,
    queue_ids: Sequence[int],
    init_mode: int,
) -> bool:
    """NOTIFICATION's test: some queue's POP offset is behind its max offset."""
    for qid in queue_ids:
        offset = pop_offset(store, offsets, cfg, group, topic, qid, init_mode, commit_init=False)
        if offset < store.get_max_offset_in_queue(topic, qid):
            return True
    return False
