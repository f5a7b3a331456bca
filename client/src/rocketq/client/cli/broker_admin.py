"""mqadmin's broker and connection commands: brokerStatus, wipeWritePerm, addWritePerm,
topicClusterList, consumerConnection and producerConnection (RocketMQ's names, letters, layout).

``brokerStatus -b addr`` prints the broker's runtime table as ``key<32>: value`` lines (sorted);
with ``-c cluster`` every broker of the cluster, each line led by its address.
``wipeWritePerm`` / ``addWritePerm -b brokerName`` change the broker's write permission on every
NameServer of ``-n`` and print one ``... OK, <topics changed>`` line per NameServer.
``topicClusterList -t topic`` prints the clusters holding the topic, one a line.
``consumerConnection -g group`` prints the group's connected clients, its subscriptions and
consume type, message model and where it starts; ``producerConnection -g group -t topic`` the
producers of the group connected to the topic's brokers.  Versions print as the number the
client sent (Java prints its ``MQVersion`` name).
"""

from __future__ import annotations

import argparse

from rocketq.client.admin import AsyncAdmin
from rocketq.client.admin_brokers import (
    add_write_perm,
    producer_connections,
    topic_cluster_list,
    wipe_write_perm,
)
from rocketq.client.cli.common import CommandGroup, Handler, namesrv_usage_error, out
from rocketq.client.errors import MQClientError

__all__ = ["GROUP"]


async def _broker_status(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    if a.broker_addr:
        for key, value in sorted((await admin.broker_runtime_info(a.broker_addr)).items()):
            out(f"{key:<32}: {value}")
        return
    info = await admin.cluster_list()
    names = info.cluster_addr_table.get(a.cluster)
    if names is None:
        raise MQClientError(
            f"the cluster {a.cluster!r} does not exist; known: {sorted(info.cluster_addr_table)}"
        )
    for name in sorted(names):
        bd = info.broker_addr_table.get(name)
        for _, addr in sorted(bd.broker_addrs.items()) if bd is not None else ():
            for key, value in sorted((await admin.broker_runtime_info(addr)).items()):
                out(f"{addr:<24} {key:<32}: {value}")


async def _wipe_write_perm(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    for ns, count in (await wipe_write_perm(admin, a.broker_name)).items():
        out(f"wipe write perm of broker[{a.broker_name}] in name server[{ns}] OK, {count}")


async def _add_write_perm(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    for ns, count in (await add_write_perm(admin, a.broker_name)).items():
        out(f"add write perm of broker[{a.broker_name}] in name server[{ns}] OK, {count}")


async def _topic_cluster_list(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    for cluster in await topic_cluster_list(admin, a.topic):
        out(cluster)


async def _consumer_connection(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    cc = await admin.consumer_connections(a.group)
    if not cc.online:
        raise MQClientError(f"the consumer group[{a.group}] not online")
    for i, c in enumerate(cc.connections, 1):
        out(f"{i:03d}  {c.client_id:<32} {c.client_addr:<22} {c.language:<8} {c.version}")
    out()
    out("Below is subscription:")
    for i, (topic, expression) in enumerate(cc.subscriptions, 1):
        out(f"{i:03d}  Topic: {topic:<40} SubExpression: {expression}")
    out()
    out(f"ConsumeType: {cc.consume_type}")
    out(f"MessageModel: {cc.message_model}")
    out(f"ConsumeFromWhere: {cc.consume_from_where}")


async def _producer_connection(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    for i, c in enumerate(await producer_connections(admin, a.group, a.topic), 1):
        out(f"{i:04d}  {c.client_id:<32} {c.client_addr:<22} {c.language:<8} {c.version}")


def _usage_error(a: argparse.Namespace) -> str | None:
    problem = namesrv_usage_error(a)
    if problem is None and a.command == "brokerStatus" and not a.broker_addr and not a.cluster:
        problem = "brokerStatus: give -b brokerAddr (one broker) or -c clusterName (every broker)"
    return problem


def _add_options(name: str, p: argparse.ArgumentParser) -> None:
    if name == "brokerStatus":
        p.add_argument("-b", "--brokerAddr", dest="broker_addr", help="Broker address")
        p.add_argument("-c", "--clusterName", dest="cluster", help="which cluster")
    elif name in ("wipeWritePerm", "addWritePerm"):
        p.add_argument("-b", "--brokerName", dest="broker_name", required=True, help="broker name")
    elif name == "topicClusterList":
        p.add_argument("-t", "--topic", required=True, help="topic name")
    else:
        p.add_argument("-g", "--" + ("consumerGroup" if name == "consumerConnection" else "producerGroup"),
                       dest="group", required=True, help="group name")  # fmt: skip
        if name == "producerConnection":
            p.add_argument("-t", "--topic", required=True, help="topic name")


_COMMANDS: dict[str, tuple[Handler, str]] = {
    "brokerStatus": (_broker_status, "Fetch broker runtime status data"),
    "wipeWritePerm": (
        _wipe_write_perm,
        "Wipe write perm of broker in all name server you defined in the -n param",
    ),
    "addWritePerm": (
        _add_write_perm,
        "Add write perm of broker in all name server you defined in the -n param",
    ),
    "topicClusterList": (_topic_cluster_list, "Get cluster info for topic"),
    "consumerConnection": (
        _consumer_connection,
        "Query consumer's socket connection, client version and subscription",
    ),
    "producerConnection": (_producer_connection, "Query producer's socket connection and client version"),
}

GROUP = CommandGroup(commands=_COMMANDS, add_options=_add_options, usage_error=_usage_error)
