"""Topic and group operations of the admin tools: a topic's permission, its order configuration,
a preview of the queue allocation, and copying one group's offsets to another.

* :func:`update_topic_perm`: UPDATE_AND_CREATE_TOPIC with the topic's queue counts from its route
  and the new permission, on one master (``broker_addr``) or every master of a cluster.  Only the
  permission changes; brokers then register the new permission with the NameServers.
* ``*_order_conf``: the ``ORDER_TOPIC_CONFIG`` namespace of the NameServers' KV store, read by
  them to answer routes of ordered topics (``brokerName:queueNums;...``) when
  ``orderMessageEnable`` is on.
* :func:`allocate_mq`: how AllocateMessageQueueAveragely would spread the topic's readable queues
  over the given client ids (Java's ``allocateMQ``); nothing is sent to any broker.
* :func:`clone_group_offset`: the committed offsets of one group on one topic (GET_CONSUME_STATS)
  written for another group with UPDATE_CONSUMER_OFFSET at each queue's master.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rocketq.client.admin import AsyncAdmin
from rocketq.client.errors import MQClientError
from rocketq.client.remoting.allocate import AllocateMessageQueueAveragely
from rocketq.client.remoting.vocabulary import MASTER_ID, NAMESPACE_ORDER_TOPIC_CONFIG, MessageQueue, Perm

__all__ = [
    "NAMESPACE_ORDER_TOPIC_CONFIG",
    "PermChange",
    "allocate_mq",
    "clone_group_offset",
    "delete_order_conf",
    "get_order_conf",
    "put_order_conf",
    "update_topic_perm",
]

_PERMS = (int(Perm.WRITE), int(Perm.READ), int(Perm.READ | Perm.WRITE))


@dataclass(frozen=True, slots=True)
class PermChange:
    """The permission of a topic on one master before and after :func:`update_topic_perm`."""

    broker_addr: str
    old_perm: int
    new_perm: int

    @property
    def changed(self) -> bool:
        return self.old_perm != self.new_perm


async def update_topic_perm(
    admin: AsyncAdmin, topic: str, perm: int, *, broker_addr: str | None = None, cluster: str | None = None
) -> list[PermChange]:
    """Set ``topic``'s permission (2 write, 4 read, 6 both) on one master or a cluster's masters.

    A master whose permission already is ``perm`` is listed unchanged and not asked."""
    if perm not in _PERMS:
        raise MQClientError(f"bad perm {perm}: use 2 (write only), 4 (read only) or 6 (read and write)")
    if (broker_addr is None) == (cluster is None):
        raise MQClientError("give either a broker address or a cluster name")
    route = await admin.topic_route(topic)
    queue_datas = {qd.broker_name: qd for qd in route.queue_datas}
    if broker_addr is not None:
        names = [bd.broker_name for bd in route.broker_datas if bd.broker_addrs.get(MASTER_ID) == broker_addr]
        if not names:
            raise MQClientError(f"{broker_addr} is not the master of a broker holding {topic}")
        targets = {names[0]: broker_addr}
    else:
        info = await admin.cluster_list()
        if cluster not in info.cluster_addr_table:
            known = sorted(info.cluster_addr_table)
            raise MQClientError(f"the cluster {cluster!r} does not exist; known: {known}")
        targets = {
            name: bd.master_addr
            for name in info.cluster_addr_table[cluster]
            if name in queue_datas and (bd := info.broker_addr_table.get(name)) is not None and bd.master_addr
        }
        if not targets:
            raise MQClientError(f"no master of cluster {cluster} holds {topic}")
    changes = []
    for name, addr in sorted(targets.items()):
        qd = queue_datas.get(name) or route.queue_datas[0]
        if qd.perm != perm:
            await admin.create_topic(topic, broker_addr=addr, read_queue_nums=qd.read_queue_nums,
                                     write_queue_nums=qd.write_queue_nums, perm=perm)  # fmt: skip
        changes.append(PermChange(addr, qd.perm, perm))
    return changes


async def put_order_conf(admin: AsyncAdmin, topic: str, order_conf: str) -> None:
    """Store ``brokerName:queueNums;...`` as ``topic``'s order configuration on every NameServer."""
    entries = [e for e in order_conf.split(";") if e.strip()]
    bad = [e for e in entries if not _order_entry_ok(e)]
    if not entries or bad:
        raise MQClientError(f"bad orderConf {order_conf!r}: use brokerName1:queueNums;brokerName2:queueNums")
    await admin.update_kv_config(NAMESPACE_ORDER_TOPIC_CONFIG, topic, order_conf)


def _order_entry_ok(entry: str) -> bool:
    name, sep, nums = entry.strip().partition(":")
    return bool(sep and name and nums.isdigit() and int(nums) > 0)


async def get_order_conf(admin: AsyncAdmin, topic: str) -> str | None:
    """``topic``'s order configuration on the first NameServer that answers, or None."""
    return await admin.get_kv_config(NAMESPACE_ORDER_TOPIC_CONFIG, topic)


async def delete_order_conf(admin: AsyncAdmin, topic: str) -> None:
    """Remove ``topic``'s order configuration from every NameServer."""
    await admin.delete_kv_config(NAMESPACE_ORDER_TOPIC_CONFIG, topic)


async def allocate_mq(
    admin: AsyncAdmin, topic: str, client_ids: Sequence[str]
) -> dict[str, list[MessageQueue]]:
    """client id -> the queues AllocateMessageQueueAveragely gives it (queues in sorted order,
    client ids in the given order)."""
    if not client_ids or any(not c for c in client_ids):
        raise MQClientError(f"bad client id list {list(client_ids)}: give ids separated by commas")
    queues = sorted((await admin.topic_route(topic)).readable_queues(topic))
    strategy = AllocateMessageQueueAveragely()
    return {cid: strategy("aa", cid, queues, list(client_ids)) for cid in client_ids}


async def clone_group_offset(
    admin: AsyncAdmin, src_group: str, dest_group: str, topic: str
) -> dict[MessageQueue, int]:
    """Copy ``src_group``'s committed offsets on ``topic`` to ``dest_group``; what was written."""
    rows = [r for r in await admin.consume_stats(src_group, topic) if r.message_queue.topic == topic]
    masters = {bd.broker_name: bd.master_addr for bd in (await admin.topic_route(topic)).broker_datas}
    written: dict[MessageQueue, int] = {}
    for row in rows:
        mq, addr = row.message_queue, masters.get(row.message_queue.broker_name)
        if row.consumer_offset < 0 or not addr:
            continue
        await admin.api.update_consumer_offset(addr, dest_group, topic, mq.queue_id, row.consumer_offset)
        written[mq] = row.consumer_offset
    return written
