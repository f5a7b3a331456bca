"""Reading stored messages for the admin tools: by client msgId (UNIQ_KEY), by queue offset, and
a whole topic queue by queue between two times (Java's ``queryMsgByUniqueKey``,
``queryMsgByOffset`` and ``printMsg``).

* :func:`query_msg_by_unique_key`: QUERY_MESSAGE with ``_UNIQUE_KEY_QUERY`` on every master of
  the topic, oldest first (a message sent again by a retry keeps its UNIQ_KEY, so there may be
  several).
* :func:`message_at_offset`: one PULL_MESSAGE of one message at ``offset`` of one queue, from the
  queue's master (a slave while the master is absent); None when nothing is stored there.
* :func:`browse_topic`: per readable queue, the offset window (the queue's min/max offsets, or
  the offsets SEARCH_OFFSET_BY_TIMESTAMP finds for the begin/end times) and the messages in it
  matching a tag expression, pulled with ``TOOLS_CONSUMER`` and committing nothing.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from rocketq.client.admin import AsyncAdmin
from rocketq.client.errors import MQClientError
from rocketq.client.instance import pick_replica
from rocketq.client.model import MessageExt, PullStatus
from rocketq.client.remoting import headers as h
from rocketq.client.remoting.route import TopicRouteData
from rocketq.client.remoting.vocabulary import (
    SUB_ALL,
    TOOLS_CONSUMER_GROUP,
    ExpressionType,
    MessageQueue,
    PullSysFlag,
)

__all__ = [
    "QueueBrowse",
    "browse_topic",
    "message_at_offset",
    "query_msg_by_unique_key",
    "tags_of_expression",
]

_PULL_BATCH = 32
_PULL_TIMEOUT_MS = 10_000
_FOREVER_MS = 2**62


@dataclass(frozen=True, slots=True)
class QueueBrowse:
    """One queue of :func:`browse_topic`: the offset window read and what was found in it."""

    message_queue: MessageQueue
    min_offset: int
    max_offset: int
    messages: tuple[MessageExt, ...]
    #: how the read ended: FOUND (window done), NO_NEW_MSG / OFFSET_ILLEGAL (the queue ended first)
    status: PullStatus
    next_offset: int


def tags_of_expression(expression: str) -> frozenset[str] | None:
    """The tags of a TAG expression ``"A || B"``; None for ``*`` (every message)."""
    tags = frozenset(t.strip() for t in expression.split("||") if t.strip())
    if not tags or SUB_ALL in tags:
        return None
    return tags


async def query_msg_by_unique_key(
    admin: AsyncAdmin, topic: str, msg_id: str, *, max_num: int = 32
) -> list[MessageExt]:
    """The messages of ``topic`` whose UNIQ_KEY is ``msg_id``, oldest first (at most ``max_num``)."""
    return await admin.query_msg_by_key(topic, msg_id, max_num=max_num, begin_ms=0, end_ms=_FOREVER_MS,
                                        unique_key=True)  # fmt: skip


def _read_addr(route: TopicRouteData, broker_name: str) -> str:
    for bd in route.broker_datas:
        if bd.broker_name == broker_name:
            found = pick_replica(bd.broker_addrs)
            if found is not None:
                return found.broker_addr
    raise MQClientError(
        f"the broker {broker_name!r} has no reachable address in the topic's route; "
        f"brokers there: {sorted(bd.broker_name for bd in route.broker_datas)}"
    )


def _pull_header(mq: MessageQueue, offset: int, max_nums: int, expression: str) -> h.PullMessageRequestHeader:
    return h.PullMessageRequestHeader(
        consumer_group=TOOLS_CONSUMER_GROUP,
        topic=mq.topic,
        queue_id=mq.queue_id,
        queue_offset=offset,
        max_msg_nums=max_nums,
        sys_flag=int(PullSysFlag.SUBSCRIPTION),
        commit_offset=0,
        suspend_timeout_millis=0,
        subscription=expression,
        sub_version=0,
        expression_type=str(ExpressionType.TAG),
    )


async def message_at_offset(
    admin: AsyncAdmin, topic: str, broker_name: str, queue_id: int, offset: int
) -> MessageExt | None:
    """The message at ``offset`` of queue ``queue_id`` of ``topic`` on ``broker_name``, or None."""
    route = await admin.topic_route(topic)
    addr = _read_addr(route, broker_name)
    header = _pull_header(MessageQueue(topic, broker_name, queue_id), offset, 1, SUB_ALL)
    result = await admin.api.pull_message(addr, header, _PULL_TIMEOUT_MS)
    if result.status is not PullStatus.FOUND:
        return None
    found = [m for m in result.messages if m.queue_offset == offset]
    return found[0] if found else None


async def browse_topic(
    admin: AsyncAdmin,
    topic: str,
    *,
    sub_expression: str = SUB_ALL,
    begin_ms: int | None = None,
    end_ms: int | None = None,
    max_per_queue: int = 10_000,
    queues: Collection[MessageQueue] | None = None,
) -> list[QueueBrowse]:
    """Every readable queue of ``topic``: its window (``begin_ms``/``end_ms`` searched by store
    time, else the queue's min/max offsets) and the messages there matching ``sub_expression``;
    only those of ``queues`` when given."""
    route = await admin.topic_route(topic)
    tags = tags_of_expression(sub_expression)
    result = []
    for mq in sorted(route.readable_queues(topic)):
        if queues is not None and mq not in queues:
            continue
        addr = _read_addr(route, mq.broker_name)
        api = admin.api
        lo = await (api.search_offset(addr, topic, mq.queue_id, begin_ms) if begin_ms is not None
                    else api.get_min_offset(addr, topic, mq.queue_id))  # fmt: skip
        hi = await (api.search_offset(addr, topic, mq.queue_id, end_ms) if end_ms is not None
                    else api.get_max_offset(addr, topic, mq.queue_id))  # fmt: skip
        found: list[MessageExt] = []
        offset, status = lo, PullStatus.FOUND
        while offset < hi and len(found) < max_per_queue:
            header = _pull_header(mq, offset, min(_PULL_BATCH, hi - offset), sub_expression)
            pulled = await api.pull_message(addr, header, _PULL_TIMEOUT_MS, tags_filter=tags)
            if pulled.status in (PullStatus.NO_NEW_MSG, PullStatus.OFFSET_ILLEGAL):
                status = pulled.status
                break
            if pulled.next_begin_offset <= offset:
                break
            if pulled.status is PullStatus.FOUND:
                found += [m for m in pulled.messages if m.queue_offset < hi]
            offset = pulled.next_begin_offset
        result.append(QueueBrowse(mq, lo, hi, tuple(found[:max_per_queue]), status, offset))
    return result
