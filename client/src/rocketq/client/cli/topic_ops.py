"""mqadmin's topic and group operations: updateTopicPerm, updateOrderConf, allocateMQ and
cloneGroupOffset (RocketMQ's names, option letters and output lines).

``updateTopicPerm -t topic -p 2|4|6 (-b masterAddr | -c cluster)`` prints ``update topic perm
from <old> to <new> in <addr> success.`` per master (``new perm equals to the old one!`` when
nothing changes).  ``updateOrderConf -t topic -m put|get|delete [-v brokerName:num;...]`` edits the
NameServers' ``ORDER_TOPIC_CONFIG`` item of the topic.  ``allocateMQ -t topic -i id1,id2`` prints
``{"result": {id: [MessageQueue, ...]}}`` as AllocateMessageQueueAveragely would assign the
topic's queues.  ``cloneGroupOffset -s src -d dest -t topic`` copies the source group's committed
offsets on the topic to the destination group (``-o`` is accepted as Java's and not needed).
"""

from __future__ import annotations

import argparse
import json

from rocketq.client.admin import AsyncAdmin
from rocketq.client.admin_topic_ops import (
    allocate_mq,
    clone_group_offset,
    delete_order_conf,
    get_order_conf,
    put_order_conf,
    update_topic_perm,
)
from rocketq.client.cli.common import CommandGroup, Handler, namesrv_usage_error, out

__all__ = ["GROUP"]


async def _update_topic_perm(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    changes = await update_topic_perm(admin, a.topic, a.perm, broker_addr=a.broker_addr, cluster=a.cluster)
    for c in changes:
        if c.changed:
            out(f"update topic perm from {c.old_perm} to {c.new_perm} in {c.broker_addr} success.")
        else:
            out(f"new perm equals to the old one! ({c.broker_addr})")


async def _update_order_conf(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    if a.method == "get":
        conf = await get_order_conf(admin, a.topic)
        out(f"get orderConf success. topic=[{a.topic}], orderConf=[{conf}]")
    elif a.method == "put":
        await put_order_conf(admin, a.topic, a.order_conf)
        out(f"update orderConf success. topic=[{a.topic}], orderConf=[{a.order_conf}]")
    else:
        await delete_order_conf(admin, a.topic)
        out(f"delete orderConf success. topic=[{a.topic}]")


async def _allocate_mq(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    ids = [i.strip() for i in a.ip_list.split(",")]
    result = await allocate_mq(admin, a.topic, ids)
    out(json.dumps({"result": {cid: [mq.to_obj() for mq in mqs] for cid, mqs in result.items()}}))


async def _clone_group_offset(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    written = await clone_group_offset(admin, a.src_group, a.dest_group, a.topic)
    out(f"clone group offset success. srcGroup[{a.src_group}], destGroup=[{a.dest_group}], "
        f"topic[{a.topic}], queues[{len(written)}]")  # fmt: skip


def _usage_error(a: argparse.Namespace) -> str | None:
    problem = namesrv_usage_error(a)
    if problem is None and a.command == "updateTopicPerm" and (a.broker_addr is None) == (a.cluster is None):
        problem = "updateTopicPerm: give -b brokerAddr (one master) or -c clusterName (its masters)"
    if problem is None and a.command == "updateOrderConf" and a.method == "put" and not a.order_conf:
        problem = "updateOrderConf -m put: give the order conf with -v brokerName1:num;brokerName2:num"
    return problem


def _add_options(name: str, p: argparse.ArgumentParser) -> None:
    if name == "updateTopicPerm":
        p.add_argument("-t", "--topic", required=True, help="topic name")
        p.add_argument("-p", "--perm", type=int, required=True, choices=(2, 4, 6),
                       help="set topic's permission(2|4|6), intro[2:W; 4:R; 6:RW]")  # fmt: skip
        p.add_argument("-b", "--brokerAddr", dest="broker_addr", help="master broker address")
        p.add_argument("-c", "--clusterName", dest="cluster", help="cluster name (all its masters)")
    elif name == "updateOrderConf":
        p.add_argument("-t", "--topic", required=True, help="topic name")
        p.add_argument("-v", "--orderConf", dest="order_conf",
                       help="set order conf [eg. brokerName1:num;brokerName2:num]")  # fmt: skip
        p.add_argument("-m", "--method", required=True, choices=("put", "get", "delete"), help="option type")
    elif name == "allocateMQ":
        p.add_argument("-t", "--topic", required=True, help="topic name")
        p.add_argument("-i", "--ipList", dest="ip_list", required=True, help="client ids, comma-separated")
    else:
        p.add_argument("-s", "--srcGroup", dest="src_group", required=True, help="source consumer group")
        p.add_argument("-d", "--destGroup", dest="dest_group", required=True,
                       help="destination consumer group")  # fmt: skip
        p.add_argument("-t", "--topic", required=True, help="the topic")
        p.add_argument("-o", "--offline", help="the group or the topic is offline (accepted, not needed)")


_COMMANDS: dict[str, tuple[Handler, str]] = {
    "updateTopicPerm": (_update_topic_perm, "Update topic perm"),
    "updateOrderConf": (_update_order_conf, "Create or update or delete order conf"),
    "allocateMQ": (_allocate_mq, "Allocate MQ"),
    "cloneGroupOffset": (_clone_group_offset, "Clone offset from other group"),
}

GROUP = CommandGroup(commands=_COMMANDS, add_options=_add_options, usage_error=_usage_error)
