"""mqadmin's message reading commands: queryMsgByUniqueKey, queryMsgByOffset, printMsg and
printMsgByQueue (RocketMQ's names, option letters and output layout).

``queryMsgByUniqueKey -i msgId -t topic`` prints the oldest message with that client msgId
(``-a``: every one, at most 32) as ``%-20s %s`` lines and writes its body to
``/tmp/rocketmq/msgbodys/<msgId>`` (``_<n>`` appended for the n-th further one), the path
printed as ``Message Body Path:``.  Java then prints the message's consumption track per group;
rocketq prints none.  ``queryMsgByOffset -t -b brokerName -i queueId -o offset`` prints the
message there with its body (``-f charset``).  ``printMsg -t topic`` prints every readable queue
as ``minOffset=.., maxOffset=.., MessageQueue [...]``, then one ``MSGID: ... BODY: ...`` line per
message (``-s`` a tag expression, ``-b``/``-e`` store-time window, ``-c`` body charset, ``-d
false`` no body), then how the queue ended and a dashed line.  ``printMsgByQueue -t -a brokerName
-i queueId`` reads one queue in the same window and, as Java, prints only what is asked: ``-p
true`` the ``MSGID:`` lines (``-d true`` with bodies), ``-f true`` ``Tag: %-30s Count: %s`` per
tag, most frequent first.
"""

from __future__ import annotations

import argparse
import codecs
from collections import Counter
from pathlib import Path

from rocketq.client.admin import AsyncAdmin
from rocketq.client.admin_messages import browse_topic, message_at_offset, query_msg_by_unique_key
from rocketq.client.cli.common import CommandGroup, Handler, fmt_ms, out, parse_timestamp
from rocketq.client.errors import MQClientError
from rocketq.client.model import MessageExt, PullStatus
from rocketq.client.remoting.vocabulary import SUB_ALL, MessageQueue

__all__ = ["BODY_DIR", "GROUP"]

#: where Java's queryMsgByUniqueKey writes message bodies
BODY_DIR = Path("/tmp/rocketmq/msgbodys")


def _properties(msg: MessageExt) -> str:
    return "{" + ", ".join(f"{k}={v}" for k, v in sorted(msg.properties.items())) + "}"


def _head_lines(msg: MessageExt) -> list[tuple[str, object]]:
    return [
        ("Topic:", msg.topic),
        ("Tags:", f"[{msg.tags}]"),
        ("Keys:", f"[{' '.join(msg.keys) or None}]"),
        ("Queue ID:", msg.queue_id),
        ("Queue Offset:", msg.queue_offset),
        ("CommitLog Offset:", msg.physical_offset),
        ("Reconsume Times:", msg.reconsume_times),
        ("Born Timestamp:", fmt_ms(msg.born_timestamp)),
        ("Store Timestamp:", fmt_ms(msg.store_timestamp)),
        ("Born Host:", f"{msg.born_host[0]}:{msg.born_host[1]}"),
        ("Store Host:", f"{msg.store_host[0]}:{msg.store_host[1]}"),
        ("System Flag:", msg.sys_flag),
        ("Properties:", _properties(msg)),
    ]


def _print_lines(rows: list[tuple[str, object]]) -> None:
    for label, value in rows:
        out(f"{label:<20} {value}")


async def _query_by_unique_key(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    msgs = await query_msg_by_unique_key(admin, a.topic, a.msg_id)
    if not msgs:
        raise MQClientError(f"no message with msgId {a.msg_id} in topic {a.topic}")
    for i, msg in enumerate(msgs if a.show_all else msgs[:1]):
        BODY_DIR.mkdir(parents=True, exist_ok=True)
        path = BODY_DIR / (a.msg_id + (f"_{i}" if i else ""))
        path.write_bytes(msg.body)
        _print_lines([*_head_lines(msg), ("Message Body Path:", path)])
        out()


async def _query_by_offset(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    msg = await message_at_offset(admin, a.topic, a.broker_name, a.queue_id, a.offset)
    if msg is None:
        raise MQClientError(
            f"no message at offset {a.offset} of queue {a.queue_id} of {a.topic} on {a.broker_name}"
        )
    rows = [("OffsetID:", msg.offset_msg_id), *_head_lines(msg)]
    _print_lines([*rows, ("Message Body:", msg.body.decode(a.body_format, "replace"))])


def _mq_str(mq: MessageQueue) -> str:
    return f"MessageQueue [topic={mq.topic}, brokerName={mq.broker_name}, queueId={mq.queue_id}]"


def _msg_str(msg: MessageExt) -> str:
    return (
        f"MessageExt [queueId={msg.queue_id}, queueOffset={msg.queue_offset}, sysFlag={msg.sys_flag}, "
        f"bornTimestamp={msg.born_timestamp}, bornHost={msg.born_host[0]}:{msg.born_host[1]}, "
        f"storeTimestamp={msg.store_timestamp}, storeHost={msg.store_host[0]}:{msg.store_host[1]}, "
        f"msgId={msg.offset_msg_id}, commitLogOffset={msg.physical_offset}, "
        f"reconsumeTimes={msg.reconsume_times}, topic={msg.topic}, properties={_properties(msg)}]"
    )


async def _print_msg(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    queues = await browse_topic(
        admin, a.topic, sub_expression=a.sub_expression, begin_ms=a.begin, end_ms=a.end
    )
    for q in queues:
        out(f"minOffset={q.min_offset}, maxOffset={q.max_offset}, {_mq_str(q.message_queue)}")
        for msg in q.messages:
            body = msg.body.decode(a.charset, "replace") if a.print_body else "NOT PRINT BODY"
            out(f"MSGID: {msg.msg_id} {_msg_str(msg)} BODY: {body}")
        if q.status is not PullStatus.FOUND:
            end = f"status={q.status.value}, offset={q.next_offset}"
            out(f"{_mq_str(q.message_queue)} print msg finished. {end}")
        out("--------------------------------------------------------")


async def _print_msg_by_queue(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    mq = MessageQueue(a.topic, a.broker_name, a.queue_id)
    browsed = await browse_topic(
        admin, a.topic, sub_expression=a.sub_expression, begin_ms=a.begin, end_ms=a.end, queues=[mq]
    )
    if not browsed:
        raise MQClientError(f"the topic {a.topic} has no readable queue {a.queue_id} on {a.broker_name}")
    tags: Counter[str] = Counter()
    for msg in browsed[0].messages:
        tags[msg.tags or ""] += 1
        if a.print_msg:
            body = msg.body.decode(a.charset, "replace") if a.print_body else "NOT PRINT BODY"
            out(f"MSGID: {msg.msg_id} {_msg_str(msg)} BODY: {body}")
    if a.calculate:
        for tag, count in sorted(tags.items(), key=lambda tc: (-tc[1], tc[0])):
            out(f"Tag: {tag:<30} Count: {count}")


def _charset(text: str) -> str:
    try:
        return codecs.lookup(text).name
    except LookupError:
        raise argparse.ArgumentTypeError(f"unknown charset {text!r} (e.g. UTF-8, GBK)") from None


def _bool(text: str) -> bool:
    if text.lower() not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
    return text.lower() == "true"


def _add_options(name: str, p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True, help="topic name")
    if name == "printMsgByQueue":
        p.add_argument("-a", "--brokerName", dest="broker_name", required=True, help="broker name")
        p.add_argument("-i", "--queueId", dest="queue_id", type=int, required=True, help="queue id")
        p.add_argument("-p", "--printMsg", dest="print_msg", type=_bool, default=False,
                       help="print msg. eg: true | false(default)")  # fmt: skip
        p.add_argument("-d", "--printBody", dest="print_body", type=_bool, default=False,
                       help="print body. eg: true | false(default)")  # fmt: skip
        p.add_argument("-f", "--calculate", type=_bool, default=False,
                       help="calculate by tag. eg: true | false(default)")  # fmt: skip
        _add_window_options(p)
    elif name == "queryMsgByUniqueKey":
        p.add_argument("-i", "--msgId", dest="msg_id", required=True, help="Message Id (UNIQ_KEY)")
        p.add_argument("-a", "--showAll", dest="show_all", action="store_true",
                       help="Print all message, the limit is 32")  # fmt: skip
    elif name == "queryMsgByOffset":
        p.add_argument("-b", "--brokerName", dest="broker_name", required=True, help="Broker Name")
        p.add_argument("-i", "--queueId", dest="queue_id", type=int, required=True, help="Queue Id")
        p.add_argument("-o", "--offset", type=int, required=True, help="Queue Offset")
        p.add_argument("-f", "--bodyFormat", dest="body_format", type=_charset, default="utf-8",
                       help="print message body by the specified format")  # fmt: skip
    else:
        _add_window_options(p)
        p.add_argument("-d", "--printBody", dest="print_body", type=_bool, default=True,
                       help="print body (true|false)")  # fmt: skip


def _add_window_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-c", "--charsetName", dest="charset", type=_charset, default="utf-8",
                   help="CharsetName(eg: UTF-8,GBK)")  # fmt: skip
    p.add_argument("-s", "--subExpression", dest="sub_expression", default=SUB_ALL,
                   help="Subscribe Expression(eg: TagA || TagB)")  # fmt: skip
    p.add_argument("-b", "--beginTimestamp", dest="begin", type=parse_timestamp,
                   help="Begin timestamp[currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]")  # fmt: skip
    p.add_argument("-e", "--endTimestamp", dest="end", type=parse_timestamp,
                   help="End timestamp[currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]")  # fmt: skip


_COMMANDS: dict[str, tuple[Handler, str]] = {
    "queryMsgByUniqueKey": (_query_by_unique_key, "Query Message by Unique key"),
    "queryMsgByOffset": (_query_by_offset, "Query Message by offset"),
    "printMsg": (_print_msg, "Print Message Detail"),
    "printMsgByQueue": (_print_msg_by_queue, "Print Message Detail by queueId."),
}

GROUP = CommandGroup(commands=_COMMANDS, add_options=_add_options)
