"""Broker-level administration: write permission on the NameServers, a topic's clusters, a
producer group's connections.

* WIPE_WRITE_PERM_OF_BROKER (205) / ADD_WRITE_PERM_OF_BROKER (327) go to every NameServer: the
  broker's queues in the routes lose (or regain) their write permission, so producers stop (or
  resume) sending there while consumers still read, the first step of RocketMQ's rolling restart.
  Each NameServer answers how many topics it changed.
* A topic's clusters (Java's ``getTopicClusterList``): the clusters of the brokers in its route.
* GET_PRODUCER_CONNECTION_LIST (204), asked of the masters of a topic's route: the producers of a
  group connected to them (client id, address, language, version), merged by client id.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from rocketq.client.admin import AsyncAdmin
from rocketq.client.errors import MQBrokerError, MQClientError
from rocketq.client.remoting import headers as h
from rocketq.client.remoting.codes import RequestCode
from rocketq.client.remoting.command import RemotingCommand

__all__ = [
    "ProducerConnection",
    "add_write_perm",
    "producer_connections",
    "topic_cluster_list",
    "wipe_write_perm",
]


@dataclass(frozen=True, slots=True)
class ProducerConnection:
    """One connected producer client of a group."""

    client_id: str
    client_addr: str
    language: str
    version: int


async def wipe_write_perm(admin: AsyncAdmin, broker_name: str) -> dict[str, int]:
    """WIPE_WRITE_PERM_OF_BROKER on every NameServer: address -> topics changed there."""
    fields = h.WipeWritePermOfBrokerRequestHeader(broker_name=broker_name).to_ext_fields()
    counts = {}
    for ns in admin.api.namesrv_addrs:
        cmd = RemotingCommand.request(RequestCode.WIPE_WRITE_PERM_OF_BROKER, fields)
        response = admin.api.check(await admin.api.invoke(ns, cmd), ns)
        counts[ns] = h.WipeWritePermOfBrokerResponseHeader.from_ext_fields(
            response.ext_fields
        ).wipe_topic_count
    return counts


async def add_write_perm(admin: AsyncAdmin, broker_name: str) -> dict[str, int]:
    """ADD_WRITE_PERM_OF_BROKER on every NameServer: address -> topics changed there."""
    fields = h.AddWritePermOfBrokerRequestHeader(broker_name=broker_name).to_ext_fields()
    counts = {}
    for ns in admin.api.namesrv_addrs:
        cmd = RemotingCommand.request(RequestCode.ADD_WRITE_PERM_OF_BROKER, fields)
        response = admin.api.check(await admin.api.invoke(ns, cmd), ns)
        counts[ns] = h.AddWritePermOfBrokerResponseHeader.from_ext_fields(response.ext_fields).add_topic_count
    return counts


async def topic_cluster_list(admin: AsyncAdmin, topic: str) -> list[str]:
    """The clusters holding ``topic`` (raises NoRouteError when no NameServer knows it)."""
    route = await admin.topic_route(topic)
    names = {bd.broker_name for bd in route.broker_datas}
    info = await admin.cluster_list()
    return sorted(c for c, brokers in info.cluster_addr_table.items() if names & set(brokers))


async def producer_connections(admin: AsyncAdmin, group: str, topic: str) -> list[ProducerConnection]:
    """The producers of ``group`` connected to the masters of ``topic``'s route, by client id."""
    route = await admin.topic_route(topic)
    found: dict[str, ProducerConnection] = {}
    refusal: MQBrokerError | None = None
    for bd in route.broker_datas:
        addr = bd.master_addr
        if not addr:
            continue
        cmd = RemotingCommand.request(RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": group})
        try:
            response = admin.api.check(await admin.api.invoke(addr, cmd), addr)
        except MQBrokerError as exc:  # "the producer group[g] not exist" on this broker
            refusal = exc
            continue
        for c in json.loads(response.body.decode("utf-8")).get("connectionSet") or []:
            conn = ProducerConnection(
                str(c.get("clientId", "")), str(c.get("clientAddr", "")), str(c.get("language", "")),
                int(c.get("version", 0)),
            )  # fmt: skip
            found[conn.client_id] = conn
    if not found:
        if refusal is not None:
            raise refusal
        raise MQClientError(f"no master broker in the route of {topic}")
    return sorted(found.values(), key=lambda c: c.client_id)
