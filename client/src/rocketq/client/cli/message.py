"""mqadmin's message commands: queryMsgByKey, queryMsgById, sendMessage, consumeMessage.

``queryMsgById -i id -g group -d clientId`` has that client consume the message instead
(CONSUME_MESSAGE_DIRECTLY) and prints its ConsumeMessageDirectlyResult as Java's ``toString``.

Messages print as RocketMQ's ``printMsg`` does (offset msgId, msgId, queue, offsets, timestamps,
hosts, properties, then the body); ``queryMsgByKey`` prints a table of matches and fails when
there is none.  ``consumeMessage`` pulls with ``TOOLS_CONSUMER`` by default from each readable
queue's master (a slave while the master is absent), committing nothing.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence

from rocketq.client.admin import AsyncAdmin
from rocketq.client.admin_consume_directly import consume_message_directly
from rocketq.client.cli.common import CommandGroup, Handler, fmt_ms, out, parse_timestamp, table
from rocketq.client.errors import MQClientError, RocketQError
from rocketq.client.instance import pick_replica
from rocketq.client.model import Message, MessageExt, PullStatus
from rocketq.client.producer.core import AsyncProducer
from rocketq.client.remoting.headers import PullMessageRequestHeader
from rocketq.client.remoting.route import MessageQueue
from rocketq.client.remoting.vocabulary import SUB_ALL, TOOLS_CONSUMER_GROUP, ExpressionType, PullSysFlag

__all__ = ["GROUP"]


class _NotFound(RocketQError):
    pass


def _print_message(msg: MessageExt, *, show_body: bool = True) -> None:
    rows: list[Sequence[object]] = [
        ("OffsetID:", msg.offset_msg_id),
        ("MsgId:", msg.uniq_key or ""),
        ("Topic:", msg.topic),
        ("Tags:", f"[{msg.tags or ''}]"),
        ("Keys:", f"[{' '.join(msg.keys)}]"),
        ("Queue ID:", msg.queue_id),
        ("Queue Offset:", msg.queue_offset),
        ("CommitLog Offset:", msg.physical_offset),
        ("Reconsume Times:", msg.reconsume_times),
        ("Born Timestamp:", fmt_ms(msg.born_timestamp)),
        ("Store Timestamp:", fmt_ms(msg.store_timestamp)),
        ("Born Host:", f"{msg.born_host[0]}:{msg.born_host[1]}"),
        ("Store Host:", f"{msg.store_host[0]}:{msg.store_host[1]}"),
        ("System Flag:", msg.sys_flag),
        ("Properties:", json.dumps(msg.properties, sort_keys=True)),
    ]
    table(rows)
    if show_body:
        out(f"Message Body: {msg.body.decode('utf-8', 'replace')}")
    out()


async def _query_msg_by_key(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    msgs = await admin.query_msg_by_key(a.topic, a.key, max_num=a.max_num, begin_ms=a.begin, end_ms=a.end)
    rows: list[Sequence[object]] = [("#Message ID", "#QID", "#Offset")]
    rows += [(m.offset_msg_id, m.queue_id, m.queue_offset) for m in msgs]
    table(rows)
    if not msgs:
        raise _NotFound(f"no message with key {a.key} in topic {a.topic}")


async def _query_msg_by_id(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    if (a.consumer_group is None) != (a.client_id is None):
        raise MQClientError("give both -g consumerGroup and -d clientId to have a client consume the message")
    for msg_id in filter(None, (m.strip() for m in a.msg_id.split(","))):
        if a.client_id is not None:
            result = await consume_message_directly(admin, a.consumer_group, a.client_id, msg_id, a.topic)
            out(str(result))
        else:
            _print_message(await admin.query_msg_by_id(msg_id, a.topic))


async def _send_message(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    group, client = a.producer_group, admin.api.config
    producer = AsyncProducer(admin.api.namesrv_addrs, producer_group=group, client=client)
    await producer.start()
    try:
        msg = Message(a.topic, a.body.encode(), tags=a.tags, keys=a.keys)
        queue = None
        if a.broker is not None and a.queue_id is not None:
            queue = MessageQueue(a.topic, a.broker, a.queue_id)
        result = await producer.send(msg, queue=queue)
    finally:
        await producer.shutdown()
    table(
        [
            ("#Broker Name", "#QID", "#Send Result", "#MsgId"),
            (
                result.message_queue.broker_name,
                result.message_queue.queue_id,
                result.send_status.value,
                result.msg_id,
            ),
        ]
    )


def _pull_header(
    a: argparse.Namespace, queue_id: int, offset: int, max_nums: int
) -> PullMessageRequestHeader:
    return PullMessageRequestHeader(
        consumer_group=a.group,
        topic=a.topic,
        queue_id=queue_id,
        queue_offset=offset,
        max_msg_nums=max_nums,
        sys_flag=int(PullSysFlag.SUBSCRIPTION),
        commit_offset=0,
        suspend_timeout_millis=0,
        subscription=SUB_ALL,
        sub_version=0,
        expression_type=ExpressionType.TAG,
    )


async def _consume_message(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    route = await admin.topic_route(a.topic)
    queues = [
        mq
        for mq in route.readable_queues(a.topic)
        if (a.broker is None or mq.broker_name == a.broker)
        and (a.queue_id is None or mq.queue_id == a.queue_id)
    ]
    left = a.count
    replicas = {bd.broker_name: bd.broker_addrs for bd in route.broker_datas}
    for mq in queues:
        found = pick_replica(replicas.get(mq.broker_name, {}))  # the master, else a slave
        if found is None:
            continue
        addr = found.broker_addr
        offset = (
            a.offset if a.offset is not None else await admin.api.get_min_offset(addr, a.topic, mq.queue_id)
        )
        while left > 0:
            header = _pull_header(a, mq.queue_id, offset, min(32, left))
            result = await admin.api.pull_message(addr, header, 10_000)
            if result.status is not PullStatus.FOUND:
                break
            for msg in result.messages[:left]:
                _print_message(msg)
                left -= 1
            offset = result.next_begin_offset
        if left <= 0:
            break
    out(f"Consumed {a.count - left} messages.")


def _add_options(name: str, p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=name != "queryMsgById", help="topic name")
    if name == "queryMsgByKey":
        p.add_argument("-k", "--key", required=True)
        p.add_argument("-m", "--max-num", type=int, default=64)
        p.add_argument("-b", "--begin", type=parse_timestamp, default=0)
        p.add_argument("-e", "--end", type=parse_timestamp, default=None)
    elif name == "queryMsgById":
        p.add_argument(
            "-i", "--msg-id", required=True, help="offset msgId(s) or UNIQ_KEY(s), comma-separated"
        )
        p.add_argument("-g", "--consumerGroup", dest="consumer_group", help="consumer group name (with -d)")
        p.add_argument(
            "-d", "--clientId", dest="client_id", help="the consumer's client id: it consumes the message"
        )
    elif name == "sendMessage":
        p.add_argument("-p", "--body", required=True)
        p.add_argument("-k", "--keys")
        p.add_argument("-c", "--tags")
        p.add_argument("-b", "--broker", help="broker name (with -i)")
        p.add_argument("-i", "--queue-id", type=int)
        p.add_argument("-g", "--producer-group", default="TOOLS_PRODUCER")
    elif name == "consumeMessage":
        p.add_argument("-b", "--broker", help="broker name")
        p.add_argument("-i", "--queue-id", type=int)
        p.add_argument("-o", "--offset", type=int)
        p.add_argument("-c", "--count", type=int, default=128)
        p.add_argument("-g", "--group", default=TOOLS_CONSUMER_GROUP)


_COMMANDS: dict[str, tuple[Handler, str]] = {
    "queryMsgByKey": (_query_msg_by_key, "Query Message by Key"),
    "queryMsgById": (_query_msg_by_id, "Query Message by Id"),
    "sendMessage": (_send_message, "Send a message"),
    "consumeMessage": (_consume_message, "Consume message"),
}

GROUP = CommandGroup(commands=_COMMANDS, add_options=_add_options)
