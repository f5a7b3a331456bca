"""Send response times and a broker's consumption figures for the admin tools (Java's
``checkMsgSendRT``, ``clusterRT`` and ``brokerConsumeStats``).

* :func:`check_msg_send_rt`: ``amount`` sends of a ``size``-byte body to a topic, message ``i``
  to writable queue ``i mod n`` (Java's selector), each timed on the client.
* :func:`broker_send_rt`: ``amount`` sends to the topic named after a broker (every broker serves
  one, as RocketMQ's ``brokerTopicEnable``), counted and timed.
* :func:`broker_consume_stats`: every consumer group the broker knows (subscription configs and
  committed offsets) with GET_CONSUME_STATS asked of that broker alone: per topic queue the
  broker offset, the group's offset and the difference.  Java's broker answers all of it in one
  GET_BROKER_CONSUME_STATS; rocketq's builds it from these requests.

Times are wall-clock milliseconds measured around each send; they are figures to print, not
promises.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from rocketq.client import admin_groups
from rocketq.client.admin import AsyncAdmin
from rocketq.client.admin_groups import QueueProgress
from rocketq.client.errors import MQClientError, RocketQError
from rocketq.client.model import Message
from rocketq.client.producer.core import AsyncProducer
from rocketq.client.remoting.vocabulary import MessageQueue

__all__ = [
    "BrokerSendRT",
    "GroupQueueProgress",
    "SendProbe",
    "broker_consume_stats",
    "broker_send_rt",
    "check_msg_send_rt",
]

#: the producer group of Java's send-time tools
RT_PRODUCER_GROUP = "PID_SMSC"


@dataclass(frozen=True, slots=True)
class SendProbe:
    """One timed send of :func:`check_msg_send_rt`."""

    message_queue: MessageQueue
    ok: bool
    rt_ms: float


@dataclass(frozen=True, slots=True)
class BrokerSendRT:
    """One broker's line of :func:`broker_send_rt` (``avg_rt_ms`` leaves out the first send, as Java)."""

    cluster: str
    broker_name: str
    avg_rt_ms: float
    success: int
    failed: int


@dataclass(frozen=True, slots=True)
class GroupQueueProgress:
    """One queue of one group in :func:`broker_consume_stats`."""

    group: str
    progress: QueueProgress


def average_after_first(times_ms: Sequence[float]) -> float:
    """Java's average: the first send (connection set-up) left out when there are others."""
    rest = times_ms[1:] if len(times_ms) > 1 else times_ms
    return sum(rest) / len(rest) if rest else 0.0


def _body(size: int) -> bytes:
    if size < 1:
        raise MQClientError(f"bad message size {size}: give at least 1 byte")
    return (b"0123456789" * (size // 10 + 1))[:size]


async def _producer(admin: AsyncAdmin) -> AsyncProducer:
    producer = AsyncProducer(
        admin.api.namesrv_addrs, producer_group=RT_PRODUCER_GROUP, client=admin.api.config
    )
    await producer.start()
    return producer


async def check_msg_send_rt(
    admin: AsyncAdmin, topic: str, amount: int = 100, size: int = 128
) -> list[SendProbe]:
    """``amount`` timed sends to ``topic``, round-robin over its writable queues."""
    if amount < 1:
        raise MQClientError(f"bad amount {amount}: send at least 1 message")
    queues = (await admin.topic_route(topic)).writable_queues(topic)
    if not queues:
        raise MQClientError(f"topic {topic} has no writable queue")
    body, probes = _body(size), []
    producer = await _producer(admin)
    try:
        for i in range(amount):
            mq = queues[i % len(queues)]
            start = time.perf_counter()
            try:
                await producer.send(Message(topic, body), queue=mq)
                ok = True
            except RocketQError:
                ok = False
            probes.append(SendProbe(mq, ok, (time.perf_counter() - start) * 1000))
    finally:
        await producer.shutdown()
    return probes


async def broker_send_rt(
    admin: AsyncAdmin, cluster: str | None = None, amount: int = 100, size: int = 128
) -> list[BrokerSendRT]:
    """For each broker of ``cluster`` (every cluster when None): ``amount`` timed sends."""
    if amount < 1:
        raise MQClientError(f"bad amount {amount}: send at least 1 message")
    info = await admin.cluster_list()
    if cluster is not None and cluster not in info.cluster_addr_table:
        raise MQClientError(f"cluster [{cluster}] not exist; known: {sorted(info.cluster_addr_table)}")
    clusters = [cluster] if cluster is not None else sorted(info.cluster_addr_table)
    body, rows = _body(size), []
    producer = await _producer(admin)
    try:
        for c in clusters:
            for name in sorted(info.cluster_addr_table[c]):
                times, failed = [], 0
                for _ in range(amount):
                    start = time.perf_counter()
                    try:
                        await producer.send(Message(name, body))
                    except RocketQError:
                        failed += 1
                    times.append((time.perf_counter() - start) * 1000)
                rows.append(BrokerSendRT(c, name, average_after_first(times), amount - failed, failed))
    finally:
        await producer.shutdown()
    return rows


async def broker_consume_stats(admin: AsyncAdmin, broker_addr: str) -> list[GroupQueueProgress]:
    """Every group's progress on every topic queue of the broker at ``broker_addr``."""
    only = {broker_addr: broker_addr}
    rows = []
    for group in await admin_groups.group_list(admin.api, only):
        for progress in await admin_groups.consume_stats(admin.api, only, group):
            rows.append(GroupQueueProgress(group, progress))
    rows.sort(key=lambda r: (r.progress.message_queue, r.group))
    return rows
