"""mqadmin's subscription-group commands: updateSubGroup and deleteSubGroup (RocketMQ's names,
option letters and output lines).

Both need ``-b brokerAddr`` (one broker) or ``-c clusterName`` (every master of the cluster).
``updateSubGroup`` writes the whole group config, as Java's tool does: options not given take
the tool's defaults (``consumeFromMinEnable`` and ``consumeBroadcastEnable`` false, the rest
RocketMQ's ``SubscriptionGroupConfig`` defaults), then prints one ``create subscription group to
<addr> success.`` line per broker and the config.  ``deleteSubGroup -c`` also deletes the group's
retry and DLQ topics from the cluster and the NameServers, as Java's does; ``-r true``
(``removeOffset``) drops the group's committed offsets on those brokers too.
"""

from __future__ import annotations

import argparse

from rocketq.client.admin import AsyncAdmin
from rocketq.client.admin_subgroup import SubscriptionGroupSettings, delete_sub_group, update_sub_group
from rocketq.client.cli.common import CommandGroup, Handler, namesrv_usage_error, out
from rocketq.client.errors import RocketQError
from rocketq.client.remoting.vocabulary import dlq_topic, retry_topic

__all__ = ["GROUP", "parse_bool"]


def parse_bool(text: str) -> bool:
    """``true`` / ``false`` (any case), as RocketMQ's options take them."""
    low = text.strip().lower()
    if low not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
    return low == "true"


async def _update_sub_group(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    settings = SubscriptionGroupSettings(
        group_name=a.group.strip(),
        consume_enable=a.consume_enable,
        consume_from_min_enable=a.consume_from_min_enable,
        consume_broadcast_enable=a.consume_broadcast_enable,
        retry_queue_nums=a.retry_queue_nums,
        retry_max_times=a.retry_max_times,
        broker_id=a.broker_id,
        which_broker_when_consume_slowly=a.which_broker_when_consume_slowly,
        notify_consumer_ids_changed_enable=a.notify_consumer_ids_changed,
        consume_message_orderly=a.consume_message_orderly,
    )
    for addr in await update_sub_group(admin, settings, broker_addr=a.broker_addr, cluster=a.cluster):
        out(f"create subscription group to {addr} success.")
    out(str(settings))


async def _delete_sub_group(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    group = a.group.strip()
    addrs = await delete_sub_group(
        admin, group, broker_addr=a.broker_addr, cluster=a.cluster, clean_offset=a.remove_offset
    )
    for addr in addrs:
        where = f" in cluster [{a.cluster}]" if not a.broker_addr else ""
        out(f"delete subscription group [{group}] from broker [{addr}]{where} success.")
    if a.broker_addr:
        return
    for topic in (retry_topic(group), dlq_topic(group)):
        try:
            await admin.delete_topic(topic, cluster=a.cluster)
        except RocketQError as exc:
            out(f"delete topic [{topic}] from cluster [{a.cluster}] failed: {exc}")
            continue
        out(f"delete topic [{topic}] from cluster [{a.cluster}] success.")
        out(f"delete topic [{topic}] from NameServer success.")


def _usage_error(a: argparse.Namespace) -> str | None:
    problem = namesrv_usage_error(a)
    if problem is None and not a.broker_addr and not a.cluster:
        problem = f"{a.command}: give -b brokerAddr (one broker) or -c clusterName (every master)"
    return problem


def _add_options(name: str, p: argparse.ArgumentParser) -> None:
    verb = "create" if name == "updateSubGroup" else "delete"
    p.add_argument("-b", "--brokerAddr", dest="broker_addr", help=f"{verb} the group on this broker")
    p.add_argument("-c", "--clusterName", dest="cluster", help=f"{verb} the group on every master")
    p.add_argument("-g", "--groupName", dest="group", required=True, help="consumer group name")
    if name != "updateSubGroup":
        _flag(p, "-r", "--removeOffset", "remove_offset", False, "remove the group's committed offsets too")
        return
    _flag(p, "-s", "--consumeEnable", "consume_enable", True, "consume enable")
    _flag(p, "-m", "--consumeFromMinEnable", "consume_from_min_enable", False, "from min offset")
    _flag(p, "-d", "--consumeBroadcastEnable", "consume_broadcast_enable", False, "broadcast")
    _flag(p, "-o", "--consumeMessageOrderly", "consume_message_orderly", False, "consume message orderly")
    p.add_argument(
        "-q", "--retryQueueNums", dest="retry_queue_nums", type=int, default=1, help="retry queue nums"
    )
    p.add_argument(
        "-r", "--retryMaxTimes", dest="retry_max_times", type=int, default=16, help="retry max times"
    )
    p.add_argument(
        "-i", "--brokerId", dest="broker_id", type=int, default=0, help="consumer from which broker id"
    )
    p.add_argument(
        "-w",
        "--whichBrokerWhenConsumeSlowly",
        dest="which_broker_when_consume_slowly",
        type=int,
        default=1,
        help="which broker id when consume slowly",
    )
    _flag(
        p,
        "-a",
        "--notifyConsumerIdsChanged",
        "notify_consumer_ids_changed",
        True,
        "notify consumerId changed",
    )


def _flag(
    p: argparse.ArgumentParser, short: str, long: str, dest: str, default: bool, help_text: str
) -> None:
    p.add_argument(
        short, long, dest=dest, type=parse_bool, default=default, metavar="true|false", help=help_text
    )


_COMMANDS: dict[str, tuple[Handler, str]] = {
    "updateSubGroup": (_update_sub_group, "Update or create subscription group"),
    "deleteSubGroup": (_delete_sub_group, "Delete subscription group from broker."),
}

GROUP = CommandGroup(commands=_COMMANDS, add_options=_add_options, usage_error=_usage_error)
