"""Queue allocation strategies for rebalancing a consumer group (RocketMQ's AllocateMessageQueue*).

Every member of a group runs the same algorithm over the same inputs (all readable queues of the
topic, all client ids of the group, both *sorted*) and keeps its own share, so no coordinator is
needed.  Members written in Java and in Python can share a group only if they compute identical
shares; the algorithms here reproduce the Java client's results exactly:

* :class:`AllocateMessageQueueAveragely` (the default): contiguous blocks; with ``q`` queues and
  ``c`` consumers, the first ``q % c`` consumers take ``q // c + 1`` queues, the others ``q // c``.
* :class:`AllocateMessageQueueAveragelyByCircle`: queue ``i`` goes to consumer ``i % c``.
* :class:`AllocateMessageQueueConsistentHash`: a hash ring with ``virtual_node_count`` (10) virtual
  nodes per client, keyed ``"<clientId>-<i>"``; a queue goes to the first node at or after the
  hash of its Java ``toString()``.  The hash is the first 4 bytes of the MD5 digest, big-endian.

They live in the remoting layer because both sides run them: a consumer's rebalance, and the
broker's QUERY_ASSIGNMENT (RocketMQ 5's server-side rebalance).  The rebalancer sorts the inputs
(queues by topic, broker name, queue id; client ids as strings) before calling a strategy.  A
strategy is any callable ``(consumer_group, current_cid, mq_all, cid_all) -> list[MessageQueue]``.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Callable, Sequence

from rocketq.client.errors import ClientError
from rocketq.client.remoting.route import MessageQueue

__all__ = [
    "AllocateFn",
    "AllocateMessageQueueAveragely",
    "AllocateMessageQueueAveragelyByCircle",
    "AllocateMessageQueueConsistentHash",
    "mq_sort_key",
    "mq_to_java_string",
]

AllocateFn = Callable[[str, str, Sequence[MessageQueue], Sequence[str]], list[MessageQueue]]


def mq_sort_key(mq: MessageQueue) -> tuple[str, str, int]:
    """MessageQueue.compareTo order: topic, then broker name, then queue id."""
    return (mq.topic, mq.broker_name, mq.queue_id)


def mq_to_java_string(mq: MessageQueue) -> str:
    """Java's ``MessageQueue.toString()``, the key consistent hashing uses."""
    return f"MessageQueue [topic={mq.topic}, brokerName={mq.broker_name}, queueId={mq.queue_id}]"


def _check(current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]) -> bool:
    """Java's argument checks; False when the current client is not (yet) in the group list."""
    if not current_cid:
        raise ClientError("current_cid is empty")
    return bool(mq_all) and bool(cid_all) and current_cid in cid_all


class AllocateMessageQueueAveragely:
    """Contiguous blocks; the first ``len(mq_all) % len(cid_all)`` consumers get one queue more."""

    name = "AllocateMessageQueueAveragely"  # the Java class (AllocateStrategy.AVG)

    def __call__(
        self, consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        if not _check(current_cid, mq_all, cid_all):
            return []
        n_mq, n_cid = len(mq_all), len(cid_all)
        index = list(cid_all).index(current_cid)
        mod = n_mq % n_cid
        if n_mq <= n_cid:
            average = 1
        elif mod > 0 and index < mod:
            average = n_mq // n_cid + 1
        else:
            average = n_mq // n_cid
        start = index * average if (mod > 0 and index < mod) else index * average + mod
        count = min(average, n_mq - start)
        return [mq_all[(start + i) % n_mq] for i in range(max(count, 0))]


class AllocateMessageQueueAveragelyByCircle:
    """Round-robin: queue ``i`` goes to the consumer at index ``i % len(cid_all)``."""

    name = "AllocateMessageQueueAveragelyByCircle"

    def __call__(
        self, consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        if not _check(current_cid, mq_all, cid_all):
            return []
        index = list(cid_all).index(current_cid)
        return [mq_all[i] for i in range(index, len(mq_all), len(cid_all))]


def md5_hash(key: str) -> int:
    """ConsistentHashRouter.MD5Hash: the first four MD5 bytes as an unsigned big-endian number."""
    return int.from_bytes(hashlib.md5(key.encode("utf-8")).digest()[:4], "big")


class AllocateMessageQueueConsistentHash:
    """Consistent hashing with ``virtual_node_count`` virtual nodes per client (Java default 10)."""

    name = "AllocateMessageQueueConsistentHash"

    def __init__(self, virtual_node_count: int = 10, hash_fn: Callable[[str], int] = md5_hash) -> None:
        if virtual_node_count < 0:
            raise ClientError("virtual_node_count must be >= 0")
        self.virtual_node_count = virtual_node_count
        self._hash = hash_fn

    def _ring(self, cid_all: Sequence[str]) -> tuple[list[int], list[str]]:
        ring: dict[int, str] = {}
        for cid in cid_all:  # later nodes overwrite earlier ones on a collision, as TreeMap.put
            for i in range(self.virtual_node_count):
                ring[self._hash(f"{cid}-{i}")] = cid
        keys = sorted(ring)
        return keys, [ring[k] for k in keys]

    def __call__(
        self, consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        if not _check(current_cid, mq_all, cid_all):
            return []
        keys, owners = self._ring(cid_all)
        if not keys:
            return []
        result = []
        for mq in mq_all:
            pos = bisect.bisect_left(keys, self._hash(mq_to_java_string(mq)))
            if owners[pos % len(keys)] == current_cid:
                result.append(mq)
        return result
