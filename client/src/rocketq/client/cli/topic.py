"""mqadmin's topic commands: updateTopic, deleteTopic, topicList, topicRoute, topicStatus.

``updateTopic`` needs ``-c`` (every master of a cluster) or ``-b`` (one broker); without either
the usage error lists what the NameServer knows, with an example ``-c``.  ``topicRoute`` prints
the route as JSON, the others plain aligned text.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Sequence

from rocketq.client.admin import AsyncAdmin
from rocketq.client.cli.common import CommandGroup, Handler, namesrv_usage_error, out, table
from rocketq.client.errors import RocketQError

__all__ = ["GROUP"]


async def _update_topic(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    addrs = await admin.create_topic(
        a.topic,
        cluster=a.cluster,
        broker_addr=a.broker,
        read_queue_nums=a.read_queue_nums,
        write_queue_nums=a.write_queue_nums,
        perm=a.perm,
        order=a.order,
        attributes=a.attributes,
    )
    for addr in addrs:
        out(f"create topic to {addr} success.")
    out(
        f"TopicConfig [topicName={a.topic}, readQueueNums={a.read_queue_nums}, "
        f"writeQueueNums={a.write_queue_nums}, perm={a.perm}, order={str(a.order).lower()}]"
    )


async def _delete_topic(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    await admin.delete_topic(a.topic, cluster=a.cluster)
    out(f"delete topic [{a.topic}] from cluster [{a.cluster or '(all)'}] success.")
    out(f"delete topic [{a.topic}] from NameServer success.")


async def _topic_list(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    for topic in await admin.topic_list():
        out(topic)


async def _topic_route(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    route = await admin.topic_route(a.topic)
    out(json.dumps(route.to_obj(), indent=2, sort_keys=True))


async def _topic_status(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    rows: list[Sequence[object]] = [("#Broker Name", "#QID", "#Min Offset", "#Max Offset")]
    for st in sorted(await admin.topic_status(a.topic), key=lambda s: s.message_queue):
        rows.append((st.message_queue.broker_name, st.message_queue.queue_id, st.min_offset, st.max_offset))
    table(rows)


async def _known_clusters(namesrv: str) -> str:
    """What the NameServer knows, for a usage error: ``cluster X (broker-a at addr, ...)``."""
    admin = AsyncAdmin(namesrv)
    try:
        info = await admin.api.get_broker_cluster_info(timeout_ms=3000)
    except RocketQError as exc:
        return f"the NameServer at {namesrv} could not be asked for its clusters: {exc}"
    finally:
        await admin.close()
    clusters = []
    for cluster in sorted(info.cluster_addr_table):
        brokers = []
        for name in sorted(info.cluster_addr_table[cluster]):
            bd = info.broker_addr_table.get(name)
            master = bd.master_addr if bd is not None else None
            brokers.append(f"{name} at {master}" if master else f"{name} (no master)")
        clusters.append(f"cluster {cluster} ({', '.join(brokers)})")
    if not clusters:
        return f"the NameServer at {namesrv} knows no broker yet"
    example = sorted(info.cluster_addr_table)[0]
    return f"the NameServer at {namesrv} knows {'; '.join(clusters)}, e.g. -c {example}"


def _usage_error(a: argparse.Namespace) -> str | None:
    problem = namesrv_usage_error(a)
    if problem is None and a.command == "updateTopic" and not a.cluster and not a.broker:
        known = asyncio.run(_known_clusters(a.namesrv))
        problem = f"updateTopic: give -c clusterName or -b brokerAddr; {known}"
    return problem


def _add_options(name: str, p: argparse.ArgumentParser) -> None:
    if name != "topicList":
        p.add_argument("-t", "--topic", required=True, help="topic name")
    if name == "updateTopic":
        p.add_argument("-c", "--cluster", help="create the topic on every master of this cluster")
        p.add_argument("-b", "--broker", help="create the topic on this broker address")
        p.add_argument("-r", "--read-queue-nums", type=int, default=8)
        p.add_argument("-w", "--write-queue-nums", type=int, default=8)
        p.add_argument("-p", "--perm", type=int, default=6, help="2 W, 4 R, 6 RW")
        p.add_argument("-o", "--order", type=lambda s: s.lower() == "true", default=False)
        p.add_argument(
            "-a", "--attributes", help="attribute changes, e.g. +message.type=FIFO (set) or -message.type"
        )
    elif name == "deleteTopic":
        p.add_argument("-c", "--cluster", help="cluster name (default: every broker)")


_COMMANDS: dict[str, tuple[Handler, str]] = {
    "updateTopic": (_update_topic, "Update or create topic"),
    "deleteTopic": (_delete_topic, "Delete topic from broker and NameServer"),
    "topicList": (_topic_list, "Fetch all topic list from name server"),
    "topicRoute": (_topic_route, "Examine topic route info"),
    "topicStatus": (_topic_status, "Examine topic Status info"),
}

GROUP = CommandGroup(commands=_COMMANDS, add_options=_add_options, usage_error=_usage_error)
