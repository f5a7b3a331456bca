"""mqadmin's consumer-group settings commands: setConsumeMode, getConsumerConfig, skipAccumulatedMessage.

``setConsumeMode -t topic -g group -m PULL|POP [-q popShareQueueNum] (-b brokerAddr | -c cluster)``
stores the group's request mode on each broker (SET_MESSAGE_REQUEST_MODE; rocketq's server-side
rebalance hands POP consumers the mode) and prints Java's lines.  ``getConsumerConfig -g group``
prints the group's subscription group config from each broker group that has it, under Java's
``=====cluster:broker=====`` banner, one ``%-40s=  %s`` line per field.
``skipAccumulatedMessage -t topic -g group [-f force]`` moves the group to the end of every queue
of the topic (a reset to timestamp -1) and prints Java's ``#brokerName #queueId #offset`` table.
"""

from __future__ import annotations

import argparse

from rocketq.client.admin import AsyncAdmin
from rocketq.client.admin_subgroup import get_sub_group
from rocketq.client.cli.common import CommandGroup, Handler, out
from rocketq.client.errors import MQClientError
from rocketq.client.remoting.assignment import MessageRequestMode

__all__ = ["GROUP"]

#: Java's resetOffsetByTimestamp with this timestamp resets to each queue's max offset
SKIP_TO_END = -1


def _java(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


async def _set_consume_mode(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    if a.broker_addr:
        addrs = [a.broker_addr]
    elif a.cluster:
        addrs = sorted((await admin.master_addrs(a.cluster)).values())
    else:
        raise MQClientError("give the broker with -b brokerAddr or the cluster with -c clusterName")
    for addr in addrs:
        await admin.set_message_request_mode(
            addr, a.topic, a.group, a.mode, pop_share_queue_num=a.pop_share_queue_num
        )
        out(f"set consume mode to {addr} success.")
    out(
        f"topic[{a.topic}] group[{a.group}] consume mode[{a.mode.value}] "
        f"popShareQueueNum[{a.pop_share_queue_num}]"
    )


async def _get_consumer_config(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    info = await admin.cluster_list()
    cluster_of = {b: c for c, brokers in info.cluster_addr_table.items() for b in brokers}
    found = False
    for broker_name, bd in sorted(info.broker_addr_table.items()):
        addr = bd.master_addr or next(iter(sorted(bd.broker_addrs.values())), None)
        if addr is None:
            continue
        settings = await get_sub_group(admin, addr, a.group)
        if settings is None:
            continue
        found = True
        bar = "=" * 29
        out(f"{bar}{cluster_of.get(broker_name, '')}:{broker_name}{bar}")
        for key, value in settings.to_json().items():
            out(f"{key:<40}=  {_java(value)}")
    if not found:
        raise MQClientError(f"no broker has the subscription group {a.group}")


async def _skip_accumulated(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    offsets = await admin.reset_offset_by_time(a.group, a.topic, SKIP_TO_END, force=a.force)
    out(f"{'#brokerName':<40}  {'#queueId':<40}  {'#offset':<40}")
    for mq, offset in sorted(offsets.items()):
        out(f"{mq.broker_name:<40}  {mq.queue_id:<40}  {offset:<40}")


def _mode(text: str) -> MessageRequestMode:
    try:
        return MessageRequestMode(text.strip().upper())
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad mode {text!r}: PULL or POP") from None


def _bool(text: str) -> bool:
    if text.lower() not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"bad value {text!r}: true or false")
    return text.lower() == "true"


def _add_options(name: str, p: argparse.ArgumentParser) -> None:
    if name == "getConsumerConfig":
        p.add_argument("-g", "--groupName", dest="group", required=True, help="subscription group name")
        return
    if name == "setConsumeMode":
        target = p.add_mutually_exclusive_group()
        target.add_argument("-b", "--brokerAddr", dest="broker_addr", help="set it on this broker")
        target.add_argument(
            "-c", "--clusterName", dest="cluster", help="set it on every master of this cluster"
        )
        p.add_argument("-t", "--topicName", dest="topic", required=True, help="topic name")
        p.add_argument("-g", "--groupName", dest="group", required=True, help="consumer group name")
        p.add_argument("-m", "--mode", type=_mode, required=True, help="consume mode: PULL or POP")
        p.add_argument(
            "-q", "--popShareQueueNum", dest="pop_share_queue_num", type=int, default=0,
            help="num of queue which share in pop mode",
        )  # fmt: skip
        return
    p.add_argument("-g", "--group", required=True, help="the consumer group")
    p.add_argument("-t", "--topic", required=True, help="the topic")
    p.add_argument(
        "-f", "--force", type=_bool, default=True, help="force the rollback: true (default) or false"
    )


_COMMANDS: dict[str, tuple[Handler, str]] = {
    "setConsumeMode": (_set_consume_mode, "Set consume message mode. pull/pop etc."),
    "getConsumerConfig": (_get_consumer_config, "Get consumer config by subscription group name."),
    "skipAccumulatedMessage": (
        _skip_accumulated,
        "Skip all messages that are accumulated (not consumed) currently.",
    ),
}

GROUP = CommandGroup(commands=_COMMANDS, add_options=_add_options)
