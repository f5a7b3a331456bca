"""A cluster's metadata as one document (Java's ``exportMetadata``): topic configs and
subscription groups read from the brokers (GET_ALL_TOPIC_CONFIG, GET_ALL_SUBSCRIPTIONGROUP_CONFIG).

From one broker the tables are that broker's; from a cluster they are merged over its masters as
Java merges them: a topic on several broker groups gets the sum of their read and write queue
numbers.  System topics, system groups and (unless ``special_topics``) the groups' retry and
dead-letter topics are left out.  The document is what Java writes: ``topicConfigTable``,
``subscriptionGroupTable`` and ``exportTime`` (epoch ms).  :func:`export_configs` is Java's
``exportConfigs``: the masters' main settings and the cluster's size.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from rocketq.client.admin import AsyncAdmin
from rocketq.client.admin_config import get_broker_config
from rocketq.client.errors import MQClientError, ProtocolError
from rocketq.client.remoting.codes import RequestCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.vocabulary import SYSTEM_GROUPS, is_group_topic, is_internal_topic

__all__ = ["EXPORTED_BROKER_KEYS", "export_configs", "export_metadata"]


async def _table(admin: AsyncAdmin, addr: str, code: int, key: str) -> Mapping[str, Any]:
    cmd = RemotingCommand.request(code)
    response = admin.api.check(await admin.api.invoke(addr, cmd), addr)
    try:
        table = json.loads(response.body.decode("utf-8")).get(key) or {}
    except (UnicodeDecodeError, ValueError, AttributeError) as exc:
        raise ProtocolError(f"bad {key} from {addr}: {exc}") from exc
    return dict(table)


def _wanted_topic(topic: str, special_topics: bool) -> bool:
    if is_group_topic(topic):
        return special_topics
    return not is_internal_topic(topic)


async def export_metadata(
    admin: AsyncAdmin,
    *,
    cluster: str | None = None,
    broker_addr: str | None = None,
    special_topics: bool = False,
) -> dict[str, Any]:
    """The metadata document of one broker (``broker_addr``) or of every master of ``cluster``."""
    if broker_addr:
        addrs = [broker_addr]
    elif cluster:
        addrs = sorted((await admin.master_addrs(cluster)).values())
        if not addrs:
            raise MQClientError(f"cluster {cluster} has no master broker")
    else:
        raise MQClientError("give the broker with -b brokerAddr or the cluster with -c clusterName")
    topics: dict[str, dict[str, Any]] = {}
    groups: dict[str, Any] = {}
    for addr in addrs:
        table = await _table(admin, addr, RequestCode.GET_ALL_TOPIC_CONFIG, "topicConfigTable")
        for name, config in sorted(table.items()):
            if not _wanted_topic(name, special_topics):
                continue
            if name in topics:
                merged = topics[name]
                for key in ("readQueueNums", "writeQueueNums"):
                    merged[key] = int(merged.get(key, 0)) + int(config.get(key, 0))
            else:
                topics[name] = dict(config)
        subs = await _table(
            admin, addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, "subscriptionGroupTable"
        )
        for name, config in sorted(subs.items()):
            if name not in SYSTEM_GROUPS and not name.startswith("CID_RMQ_SYS_"):
                groups.setdefault(name, config)
    return {
        "topicConfigTable": topics,
        "subscriptionGroupTable": groups,
        "exportTime": int(time.time() * 1000),
    }


#: the broker config keys Java's exportConfigs keeps
EXPORTED_BROKER_KEYS = (
    "brokerClusterName", "brokerId", "brokerName", "brokerRole", "fileReservedTime",
    "filterServerNums", "flushDiskType", "maxMessageSize", "messageDelayLevel",
    "msgTraceTopicName", "slaveReadEnable", "traceOn", "traceTopicEnable", "useTLS",
    "autoCreateTopicEnable", "autoCreateSubscriptionGroup",
)  # fmt: skip


async def export_configs(admin: AsyncAdmin, cluster: str) -> dict[str, Any]:
    """Java's ``configs.json`` of ``cluster``: each master's main broker settings by broker name
    (``brokerConfigs``) and the cluster's size (``clusterScale``: NameServers, masters, slaves)."""
    info = await admin.cluster_list()
    if cluster not in info.cluster_addr_table:
        raise MQClientError(f"the cluster {cluster} does not exist; known: {sorted(info.cluster_addr_table)}")
    configs: dict[str, dict[str, str]] = {}
    masters = slaves = 0
    for name in sorted(info.cluster_addr_table[cluster]):
        bd = info.broker_addr_table.get(name)
        if bd is None or bd.master_addr is None:
            continue
        masters += 1
        slaves += len(bd.broker_addrs) - 1
        config = await get_broker_config(admin, bd.master_addr)
        configs[config.get("brokerName", name)] = {k: config[k] for k in EXPORTED_BROKER_KEYS if k in config}
    return {
        "brokerConfigs": configs,
        "clusterScale": {
            "namesrvSize": len(admin.api.namesrv_addrs),
            "masterBrokerSize": masters,
            "slaveBrokerSize": slaves,
        },
    }
