"""Admin calls about consumer groups and message browsing, used by :class:`~rocketq.client.admin.AsyncAdmin`.

What RocketMQ Dashboard shows of a group comes from four broker requests, asked of every master:

* the group list: GET_ALL_SUBSCRIPTIONGROUP_CONFIG (groups created explicitly or on first sight
  with ``autoCreateSubscriptionGroup``) and GET_ALL_CONSUMER_OFFSET (groups that committed an
  offset), minus the broker's built-in groups;
* a group's members: GET_CONSUMER_CONNECTION_LIST (client id, address, language, version of each
  connected consumer, its subscriptions, consume type and message model; a group that is not
  online answers CONSUMER_NOT_ONLINE, which is an empty list here);
* a group's lag: GET_CONSUME_STATS (per queue the broker's max offset and the group's committed
  offset; ``lag = broker_offset - consumer_offset``), for one topic or every topic of the group.

Browsing messages of a topic by store time has no request of its own: per readable queue,
SEARCH_OFFSET_BY_TIMESTAMP gives the offsets of the window's two ends and PULL_MESSAGE (as the
built-in ``TOOLS_CONSUMER`` group, with an explicit ``*`` subscription and no offset commit)
reads the messages in between, as RocketMQ Dashboard's "query by topic" does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from rocketq.client.api import MQClientAPI
from rocketq.client.errors import MQBrokerError
from rocketq.client.model import MessageExt
from rocketq.client.remoting import headers as h
from rocketq.client.remoting.admin_bodies import (
    ConsumerConnection,
    QueueProgress,
    consumer_offset_groups,
    parse_consume_stats,
    parse_consumer_connection,
    subscription_group_names,
)
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.route import MessageQueue, TopicRouteData
from rocketq.client.remoting.vocabulary import (
    SUB_ALL,
    SYSTEM_GROUPS,
    TOOLS_CONSUMER_GROUP,
    ExpressionType,
    PullSysFlag,
)

__all__ = [
    "ConsumerConnection",
    "GroupConnections",
    "QueueProgress",
    "QueueStatus",
    "consume_stats",
    "consumer_connections",
    "group_list",
    "query_msg_by_time",
]

_PULL_BATCH = 32
_PULL_TIMEOUT_MS = 5000


@dataclass(frozen=True, slots=True)
class QueueStatus:
    message_queue: MessageQueue
    min_offset: int
    max_offset: int


@dataclass(frozen=True, slots=True)
class GroupConnections:
    """GET_CONSUMER_CONNECTION_LIST of a group, merged over the masters (empty when offline)."""

    group: str
    connections: tuple[ConsumerConnection, ...] = ()
    subscriptions: tuple[tuple[str, str], ...] = ()  # (topic, expression)
    consume_type: str = ""
    message_model: str = ""
    consume_from_where: str = ""

    @property
    def online(self) -> bool:
        return bool(self.connections)


async def group_list(api: MQClientAPI, masters: Mapping[str, str]) -> list[str]:
    """The consumer groups known to the masters (subscription configs and committed offsets)."""
    groups: set[str] = set()
    for addr in masters.values():
        cmd = RemotingCommand.request(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        groups.update(subscription_group_names(api.check(await api.invoke(addr, cmd), addr).body))
        cmd = RemotingCommand.request(RequestCode.GET_ALL_CONSUMER_OFFSET)
        groups.update(consumer_offset_groups(api.check(await api.invoke(addr, cmd), addr).body))
    return sorted(g for g in groups if g not in SYSTEM_GROUPS)


async def consumer_connections(api: MQClientAPI, masters: Mapping[str, str], group: str) -> GroupConnections:
    """Who is consuming as ``group`` now (each master knows the consumers that heartbeat to it)."""
    header = h.GetConsumerConnectionListRequestHeader(consumer_group=group).to_ext_fields()
    conns: dict[str, ConsumerConnection] = {}
    subs: dict[str, str] = {}
    meta = ("", "", "")
    for addr in masters.values():
        cmd = RemotingCommand.request(RequestCode.GET_CONSUMER_CONNECTION_LIST, header)
        response = await api.invoke(addr, cmd)
        if response.code == ResponseCode.CONSUMER_NOT_ONLINE:
            continue
        answer = parse_consumer_connection(api.check(response, addr).body)
        conns.update((cc.client_id, cc) for cc in answer.connections)
        subs.update(answer.subscriptions)
        meta = (answer.consume_type, answer.message_model, answer.consume_from_where)
    return GroupConnections(
        group,
        tuple(sorted(conns.values(), key=lambda c: c.client_id)),
        tuple(sorted(subs.items())),
        *meta,
    )


async def consume_stats(
    api: MQClientAPI, masters: Mapping[str, str], group: str, topic: str | None = None
) -> list[QueueProgress]:
    """GET_CONSUME_STATS of ``group`` (one topic, or every topic it has offsets or subscriptions
    for) on every master, sorted by topic, broker and queue."""
    header = h.GetConsumeStatsRequestHeader(consumer_group=group, topic=topic).to_ext_fields()
    rows: list[QueueProgress] = []
    for addr in masters.values():
        cmd = RemotingCommand.request(RequestCode.GET_CONSUME_STATS, header)
        response = await api.invoke(addr, cmd)
        if response.code == ResponseCode.TOPIC_NOT_EXIST:
            continue
        rows += parse_consume_stats(api.check(response, addr).body)
    return sorted(
        rows, key=lambda r: (r.message_queue.topic, r.message_queue.broker_name, r.message_queue.queue_id)
    )


async def query_msg_by_time(
    api: MQClientAPI,
    route: TopicRouteData,
    read_addrs: Mapping[str, str],
    topic: str,
    begin_ms: int,
    end_ms: int,
    max_num: int = 64,
) -> list[MessageExt]:
    """Messages of ``topic`` stored in ``[begin_ms, end_ms]``, at most ``max_num``, oldest first.

    ``read_addrs`` maps each broker name of the route to the address to read from."""
    found: list[MessageExt] = []
    for mq in route.readable_queues(topic):
        addr = read_addrs.get(mq.broker_name)
        if addr is None:
            continue
        start = await api.search_offset(addr, topic, mq.queue_id, begin_ms)
        # the first offset stored after the window, or the last offset when nothing is (as
        # RocketMQ's getOffsetInQueueByTime): one past it bounds the pulls either way
        after = await api.search_offset(addr, topic, mq.queue_id, end_ms + 1)
        stop = min(after + 1, await api.get_max_offset(addr, topic, mq.queue_id))
        found += await _pull_range(api, addr, mq, start, stop, begin_ms, end_ms, max_num)
    found.sort(key=lambda m: (m.store_timestamp, m.queue_id, m.queue_offset))
    return found[:max_num]


async def _pull_range(
    api: MQClientAPI,
    addr: str,
    mq: MessageQueue,
    start: int,
    stop: int,
    begin_ms: int,
    end_ms: int,
    max_num: int,
) -> list[MessageExt]:
    out: list[MessageExt] = []
    offset = start
    while offset < stop and len(out) < max_num:
        header = h.PullMessageRequestHeader(
            consumer_group=TOOLS_CONSUMER_GROUP,
            topic=mq.topic,
            queue_id=mq.queue_id,
            queue_offset=offset,
            max_msg_nums=min(_PULL_BATCH, stop - offset),
            sys_flag=int(PullSysFlag.SUBSCRIPTION),
            commit_offset=0,
            suspend_timeout_millis=0,
            subscription=SUB_ALL,
            sub_version=0,
            expression_type=str(ExpressionType.TAG),
        )
        try:
            result = await api.pull_message(addr, header, _PULL_TIMEOUT_MS)
        except MQBrokerError:
            break
        msgs = result.messages
        if not msgs or result.next_begin_offset <= offset:
            break
        out += [m for m in msgs if begin_ms <= m.store_timestamp <= end_ms and m.queue_offset < stop]
        offset = result.next_begin_offset
    return out[:max_num]
