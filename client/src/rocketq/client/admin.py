"""Admin API: topics, clusters, consumer progress, message queries and offset resets.

:class:`AsyncAdmin` is what ``mqadmin`` runs (RocketMQ's DefaultMQAdminExt, reduced to the
subcommands rocketq ships).  Each operation is a few MQClientAPI requests:

* topics: UPDATE_AND_CREATE_TOPIC on every master of a cluster (or one broker), deletion on the
  masters then on every NameServer, the topic list and routes from the NameServer;
* ``topic_status`` / ``consumer_progress``: per queue GET_MIN/MAX_OFFSET, the group's committed
  offset (QUERY_CONSUMER_OFFSET) and the difference, the lag (asked of the master, of a slave
  while the master is absent from the route);
* ``topic_stats`` (and :func:`topic_stats_info` for callers holding an MQClientAPI): one
  GET_TOPIC_STATS_INFO to one broker, the min and max offsets of every queue of a topic there;
* ``query_msg_by_key``: QUERY_MESSAGE on every master of the topic; ``query_msg_by_id``: decode
  an offset msgId and VIEW_MESSAGE_BY_ID at its store host, or a UNIQ_KEY query in the topic;
* ``reset_offset_by_time``: INVOKE_BROKER_TO_RESET_OFFSET on each master (the broker tells live
  consumers); a broker without it gets the offsets written directly (SEARCH_OFFSET_BY_TIMESTAMP
  then UPDATE_CONSUMER_OFFSET), which takes effect for consumers that are offline;
* groups (:mod:`rocketq.client.admin_groups`): ``group_list``, ``consumer_connections``
  (GET_CONSUMER_CONNECTION_LIST), ``consume_stats`` (GET_CONSUME_STATS, lag per queue of every
  topic of a group); ``query_msg_by_time``: a topic's messages stored in a time window;
* replication: ``ha_status`` (GET_BROKER_HA_STATUS, a master's slaves or a slave's replication)
  and ``cluster_replicas`` (every broker of every group with role, figures and slave lag, what
  ``mqadmin clusterList`` prints).

:class:`Admin` is the blocking facade over the background loop.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from rocketq.client import admin_assignment, admin_groups, admin_pop
from rocketq.client.admin_groups import (
    ConsumerConnection,
    GroupConnections,
    QueueProgress,
    QueueStatus,
)
from rocketq.client.api import MQClientAPI
from rocketq.client.config import ClientConfig
from rocketq.client.errors import (
    MQBrokerError,
    MQClientError,
    NoRouteError,
    ProtocolError,
    RemotingError,
    RocketQError,
)
from rocketq.client.instance import pick_replica
from rocketq.client.loop import acquire_loop, release_loop
from rocketq.client.model import MessageExt
from rocketq.client.remoting import headers as h
from rocketq.client.remoting.admin_bodies import parse_offset_table
from rocketq.client.remoting.assignment import MessageRequestMode, QueryAssignmentResponseBody
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.ha_status import HAClientInfo, HAConnectionInfo, HAStatus, slave_lag
from rocketq.client.remoting.lenient_json import loads as lenient_loads
from rocketq.client.remoting.lenient_json import thaw
from rocketq.client.remoting.msgid import decode_offset_msg_id
from rocketq.client.remoting.route import PERM_RW, ClusterInfo, KVTable, MessageQueue, TopicRouteData
from rocketq.client.remoting.vocabulary import AUTO_CREATE_TOPIC_KEY_TOPIC, MASTER_ID

__all__ = [
    "Admin",
    "AsyncAdmin",
    "BrokerReplica",
    "ConsumerConnection",
    "GroupConnections",
    "HAClientInfo",
    "HAConnectionInfo",
    "HAStatus",
    "QueueProgress",
    "QueueStatus",
    "parse_topic_stats",
    "slave_lag",
    "topic_stats_info",
]

_T = TypeVar("_T")
_QUERY_WINDOW_MS = 365 * 24 * 3600 * 1000


@dataclass(frozen=True, slots=True)
class BrokerReplica:
    """One broker of ``mqadmin clusterList``: its place in the group, its figures and, for a
    slave, how far it is behind its master (None when it could not be measured)."""

    cluster: str
    broker_name: str
    broker_id: int
    addr: str
    role: str  # from the broker's runtime info; "?" when it did not answer
    version: str
    in_tps: str
    out_tps: str
    lag_bytes: int | None = None
    lag_ms: int | None = None
    error: str | None = None  # why the broker's figures are missing

    @property
    def slave(self) -> bool:
        return self.broker_id != MASTER_ID


def parse_topic_stats(body: bytes) -> list[QueueStatus]:
    """TopicStatsTable ``{"offsetTable": {<MessageQueue object>: {"minOffset", "maxOffset",
    "lastUpdateTimestamp"}}}`` (fastjson object keys, read frozen or as JSON text)."""
    doc = lenient_loads(body) if body else {}
    rows: list[QueueStatus] = []
    for key, value in (doc.get("offsetTable") or {}).items():
        obj = thaw(key) if isinstance(key, tuple) else key
        if isinstance(obj, str):
            with contextlib.suppress(ValueError):
                obj = json.loads(obj)
        if isinstance(obj, Mapping) and isinstance(value, Mapping):
            mq = MessageQueue.from_obj(obj)
            rows.append(QueueStatus(mq, int(value.get("minOffset", 0)), int(value.get("maxOffset", 0))))
    return sorted(rows, key=lambda st: st.message_queue)


async def topic_stats_info(
    api: MQClientAPI, broker_addr: str, topic: str, timeout_ms: int | None = None
) -> list[QueueStatus]:
    """GET_TOPIC_STATS_INFO (202): the min and max offsets of every queue of ``topic`` on the broker
    at ``broker_addr`` in one request.  A broker without it answers REQUEST_CODE_NOT_SUPPORTED
    (raised as MQBrokerError with that code)."""
    header = h.GetTopicStatsInfoRequestHeader(topic=topic)
    cmd = RemotingCommand.request(RequestCode.GET_TOPIC_STATS_INFO, header.to_ext_fields())
    response = api.check(await api.invoke(broker_addr, cmd, timeout_ms), broker_addr)
    return parse_topic_stats(response.body)


class AsyncAdmin:
    """Administrative operations (asyncio)."""

    def __init__(
        self,
        namesrv_addr: str | Sequence[str],
        *,
        config: ClientConfig | None = None,
        api: MQClientAPI | None = None,
    ) -> None:
        self.api = api or MQClientAPI(namesrv_addr, config=config)

    async def close(self) -> None:
        await self.api.close()

    async def __aenter__(self) -> AsyncAdmin:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ------------------------------------------------------------------ cluster / routes

    async def cluster_list(self) -> ClusterInfo:
        return await self.api.get_broker_cluster_info()

    async def topic_list(self) -> list[str]:
        return await self.api.get_all_topic_list()

    async def topic_route(self, topic: str) -> TopicRouteData:
        return await self.api.get_topic_route(topic)

    async def ha_status(self, broker_addr: str, timeout_ms: int | None = None) -> HAStatus:
        """GET_BROKER_HA_STATUS (907) of one broker: a master's connected slaves with their acked
        offsets and lag, or a slave's replication state (docs/replication.md, "Admin API")."""
        cmd = RemotingCommand.request(RequestCode.GET_BROKER_HA_STATUS)
        response = self.api.check(await self.api.invoke(broker_addr, cmd, timeout_ms), broker_addr)
        return HAStatus.from_json(response.body)

    async def broker_runtime_info(self, broker_addr: str, timeout_ms: int | None = None) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO: the broker's KV table (version, role, TPS, store figures)."""
        cmd = RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO)
        response = self.api.check(await self.api.invoke(broker_addr, cmd, timeout_ms), broker_addr)
        return KVTable.from_json(response.body).table if response.body else {}

    async def cluster_replicas(self, timeout_ms: int = 3000) -> list[BrokerReplica]:
        """Every broker of every cluster with its role and figures, slaves with their lag.

        A broker that does not answer is listed with ``error`` set (the NameServer may still
        list a master that was just killed)."""
        info = await self.cluster_list()
        rows: list[BrokerReplica] = []
        for cluster in sorted(info.cluster_addr_table):
            for name in sorted(info.cluster_addr_table[cluster]):
                bd = info.broker_addr_table.get(name)
                if bd is not None:
                    rows += await self._group_replicas(cluster, name, bd.broker_addrs, timeout_ms)
        return rows

    async def _group_replicas(
        self, cluster: str, name: str, addrs: Mapping[int, str], timeout_ms: int
    ) -> list[BrokerReplica]:
        master_ha: HAStatus | None = None
        if MASTER_ID in addrs:
            with contextlib.suppress(RocketQError):
                master_ha = await self.ha_status(addrs[MASTER_ID], timeout_ms)
        rows = []
        for bid, addr in sorted(addrs.items()):
            try:
                table = await self.broker_runtime_info(addr, timeout_ms)
            except RocketQError as exc:
                rows.append(BrokerReplica(cluster, name, bid, addr, "?", "", "", "", error=str(exc)))
                continue
            lag: tuple[int | None, int | None] = (None, None)
            if bid != MASTER_ID and master_ha is not None:
                with contextlib.suppress(RocketQError):
                    lag = slave_lag(master_ha, await self.ha_status(addr, timeout_ms), addr)
            role = table.get("brokerRole") or ("SLAVE" if bid != MASTER_ID else "ASYNC_MASTER")
            version = table.get("brokerVersionDesc", "")
            in_tps, out_tps = table.get("putTps", ""), table.get("getTransferedTps", "")
            rows.append(BrokerReplica(cluster, name, bid, addr, role, version, in_tps, out_tps, *lag))
        return rows

    async def master_addrs(self, cluster: str | None) -> dict[str, str]:
        """brokerName -> master address, for one cluster (or all brokers)."""
        info = await self.cluster_list()
        if cluster is not None:
            names = info.cluster_addr_table.get(cluster)
            if names is None:
                raise MQClientError(
                    f"the cluster {cluster!r} does not exist; known: {sorted(info.cluster_addr_table)}"
                )
        else:
            names = list(info.broker_addr_table)
        result = {}
        for name in sorted(names):
            bd = info.broker_addr_table.get(name)
            if bd is not None and bd.master_addr:
                result[name] = bd.master_addr
        if not result:
            raise MQClientError(f"no master broker found in cluster {cluster or '(any)'}")
        return result

    async def _route_masters(self, topic: str) -> dict[str, str]:
        route = await self.topic_route(topic)
        result = {bd.broker_name: bd.master_addr for bd in route.broker_datas if bd.master_addr}
        if not result:
            raise NoRouteError(topic, "no master broker in the route")
        return result

    # ------------------------------------------------------------------ topics

    async def create_topic(
        self,
        topic: str,
        *,
        cluster: str | None = None,
        broker_addr: str | None = None,
        read_queue_nums: int = 8,
        write_queue_nums: int = 8,
        perm: int = int(PERM_RW),
        order: bool = False,
        attributes: str | None = None,
    ) -> list[str]:
        """UPDATE_AND_CREATE_TOPIC on one broker or every master of ``cluster``; the addresses.
        ``attributes``: RocketMQ 5 attribute changes, ``+message.type=FIFO`` (set), ``-key`` (remove)."""
        header = h.CreateTopicRequestHeader(
            topic=topic,
            default_topic=AUTO_CREATE_TOPIC_KEY_TOPIC,
            read_queue_nums=read_queue_nums,
            write_queue_nums=write_queue_nums,
            perm=perm,
            order=order,
            attributes=attributes,
        )
        addrs = [broker_addr] if broker_addr else list((await self.master_addrs(cluster)).values())
        for addr in addrs:
            cmd = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext_fields())
            self.api.check(await self.api.invoke(addr, cmd), addr)
        return addrs

    async def delete_topic(self, topic: str, *, cluster: str | None = None) -> list[str]:
        """DELETE_TOPIC_IN_BROKER on the cluster's masters, then DELETE_TOPIC_IN_NAMESRV everywhere."""
        masters = await self.master_addrs(cluster)
        for addr in masters.values():
            cmd = RemotingCommand.request(
                RequestCode.DELETE_TOPIC_IN_BROKER, h.DeleteTopicRequestHeader(topic=topic).to_ext_fields()
            )
            self.api.check(await self.api.invoke(addr, cmd), addr)
        ns_header = h.DeleteTopicFromNamesrvRequestHeader(topic=topic, cluster_name=cluster)
        for ns in self.api.namesrv_addrs:
            cmd = RemotingCommand.request(RequestCode.DELETE_TOPIC_IN_NAMESRV, ns_header.to_ext_fields())
            self.api.check(await self.api.invoke(ns, cmd), ns)
        return list(masters.values())

    # ------------------------------------------------------------------ NameServer KV store

    async def update_kv_config(self, namespace: str, key: str, value: str) -> None:
        """PUT_KV_CONFIG on every NameServer (Java's ``createAndUpdateKvConfig``)."""
        header = h.PutKVConfigRequestHeader(namespace=namespace, key=key, value=value)
        await self._every_namesrv(RequestCode.PUT_KV_CONFIG, header.to_ext_fields())

    async def delete_kv_config(self, namespace: str, key: str) -> None:
        """DELETE_KV_CONFIG on every NameServer (Java's ``deleteKvConfig``)."""
        header = h.DeleteKVConfigRequestHeader(namespace=namespace, key=key)
        await self._every_namesrv(RequestCode.DELETE_KV_CONFIG, header.to_ext_fields())

    async def get_kv_config(self, namespace: str, key: str) -> str | None:
        """GET_KV_CONFIG of one NameServer: the value, or None when the item does not exist."""
        header = h.GetKVConfigRequestHeader(namespace=namespace, key=key)
        cmd = RemotingCommand.request(RequestCode.GET_KV_CONFIG, header.to_ext_fields())
        response = await self.api.invoke_namesrv(cmd)
        if response.code == ResponseCode.QUERY_NOT_FOUND:
            return None
        self.api.check(response, None)
        return h.GetKVConfigResponseHeader.from_ext_fields(response.ext_fields).value

    async def _every_namesrv(self, code: int, fields: dict[str, str]) -> None:
        for ns in self.api.namesrv_addrs:
            self.api.check(await self.api.invoke(ns, RemotingCommand.request(code, fields)), ns)

    async def topic_status(self, topic: str) -> list[QueueStatus]:
        route = await self.topic_route(topic)
        result = []
        for mq in route.readable_queues(topic):
            addr = _read_addr(route, mq.broker_name)
            if addr is None:
                continue
            low = await self.api.get_min_offset(addr, topic, mq.queue_id)
            high = await self.api.get_max_offset(addr, topic, mq.queue_id)
            result.append(QueueStatus(mq, low, high))
        return result

    async def topic_stats(self, broker_addr: str, topic: str) -> list[QueueStatus]:
        """The min and max offsets of every queue of ``topic`` on one broker (GET_TOPIC_STATS_INFO)."""
        return await topic_stats_info(self.api, broker_addr, topic)

    # ------------------------------------------------------------------ groups

    async def consumer_progress(self, group: str, topic: str) -> list[QueueProgress]:
        route = await self.topic_route(topic)
        result = []
        for mq in route.readable_queues(topic):
            addr = _read_addr(route, mq.broker_name)
            if addr is None:
                continue
            broker_offset = await self.api.get_max_offset(addr, topic, mq.queue_id)
            committed = await self.api.query_consumer_offset(addr, group, topic, mq.queue_id)
            result.append(QueueProgress(mq, broker_offset, -1 if committed is None else committed))
        return result

    async def query_assignment(
        self, broker_addr: str, topic: str, group: str, client_id: str, **kwargs: Any
    ) -> QueryAssignmentResponseBody:
        """QUERY_ASSIGNMENT at one broker (:func:`rocketq.client.admin_assignment.query_assignment`)."""
        api = self.api
        return await admin_assignment.query_assignment(api, broker_addr, topic, group, client_id, **kwargs)

    async def set_message_request_mode(
        self, broker_addr: str, topic: str, group: str, mode: MessageRequestMode, **kwargs: Any
    ) -> None:
        """SET_MESSAGE_REQUEST_MODE at one broker (:mod:`rocketq.client.admin_assignment`)."""
        await admin_assignment.set_message_request_mode(self.api, broker_addr, topic, group, mode, **kwargs)

    async def pop_status(
        self, group: str, topic: str | None = None, *, broker_addr: str | None = None
    ) -> list[admin_pop.BrokerPopStatus]:
        """POP in-flight counts and retry backlog of ``group`` on every master (or one broker)."""
        masters = {broker_addr: broker_addr} if broker_addr else await self.master_addrs(None)
        return await admin_pop.pop_status(self.api, masters, group, topic)

    async def group_list(self) -> list[str]:
        """The consumer groups the masters know (configs and committed offsets), system groups left out."""
        return await admin_groups.group_list(self.api, await self.master_addrs(None))

    async def consumer_connections(self, group: str) -> GroupConnections:
        """The consumers of ``group`` connected now, their subscriptions (empty when offline)."""
        return await admin_groups.consumer_connections(self.api, await self.master_addrs(None), group)

    async def consume_stats(self, group: str, topic: str | None = None) -> list[QueueProgress]:
        """Per queue: broker offset, committed offset and lag of ``group`` (one topic or all of its)."""
        return await admin_groups.consume_stats(self.api, await self.master_addrs(None), group, topic)

    async def reset_offset_by_time(
        self, group: str, topic: str, timestamp_ms: int, *, force: bool = True
    ) -> dict[MessageQueue, int]:
        """Move ``group`` on ``topic`` to the first message stored at/after ``timestamp_ms``."""
        route = await self.topic_route(topic)
        header = h.ResetOffsetRequestHeader(topic=topic, group=group, timestamp=timestamp_ms, is_force=force)
        result: dict[MessageQueue, int] = {}
        for bd in route.broker_datas:
            addr = bd.master_addr
            if addr is None:
                continue
            cmd = RemotingCommand.request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, header.to_ext_fields())
            response = await self.api.invoke(addr, cmd, 15_000)
            if response.code == ResponseCode.SUCCESS:
                result.update(parse_offset_table(response.body))
                continue
            if response.code not in (
                ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                ResponseCode.CONSUMER_NOT_ONLINE,
            ):
                raise MQBrokerError.for_code(response.code, response.remark, addr)
            for mq in route.readable_queues(topic):
                if mq.broker_name == bd.broker_name:
                    offset = await self.api.search_offset(addr, topic, mq.queue_id, timestamp_ms)
                    await self.api.update_consumer_offset(addr, group, topic, mq.queue_id, offset)
                    result[mq] = offset
        return result

    # ------------------------------------------------------------------ messages

    async def query_msg_by_key(
        self,
        topic: str,
        key: str,
        *,
        max_num: int = 64,
        begin_ms: int = 0,
        end_ms: int | None = None,
        unique_key: bool = False,
    ) -> list[MessageExt]:
        end = end_ms if end_ms is not None else int(time.time() * 1000) + _QUERY_WINDOW_MS
        found: list[MessageExt] = []
        for addr in (await self._route_masters(topic)).values():
            found.extend(
                await self.api.query_message(addr, topic, key, max_num, begin_ms, end, unique_key=unique_key)
            )
        if unique_key:
            found = [m for m in found if m.uniq_key == key]
        return sorted(found, key=lambda m: m.store_timestamp)[:max_num]

    async def query_msg_by_time(
        self, topic: str, begin_ms: int, end_ms: int, *, max_num: int = 64
    ) -> list[MessageExt]:
        """Messages of ``topic`` stored between ``begin_ms`` and ``end_ms`` (inclusive), oldest first."""
        route = await self.topic_route(topic)
        addrs = {bd.broker_name: a for bd in route.broker_datas if (a := _read_addr(route, bd.broker_name))}
        return await admin_groups.query_msg_by_time(self.api, route, addrs, topic, begin_ms, end_ms, max_num)

    async def query_msg_by_id(self, msg_id: str, topic: str | None = None) -> MessageExt:
        """An offset msgId (decoded to store host + offset), or a UNIQ_KEY when ``topic`` is given.

        Both ids are 32 hex digits, so a UNIQ_KEY also decodes as a (bogus) store host and
        offset.  With ``topic`` the decoded host is only asked when it is one of the topic's
        brokers; otherwise, and when that lookup fails, the id is looked up as a UNIQ_KEY.
        """
        try:
            host, port, offset = decode_offset_msg_id(msg_id)
        except ProtocolError:
            host, port, offset = "", 0, 0
        store_addr = f"{host}:{port}" if host and 0 < port < 65536 else ""
        if store_addr and topic is not None:
            try:
                routed = set((await self._route_masters(topic)).values())
            except NoRouteError:
                routed = set()
            if store_addr not in routed:
                store_addr = ""
        if store_addr:
            try:
                return await self.api.view_message(store_addr, offset)
            except (MQBrokerError, ProtocolError, MQClientError, RemotingError) as exc:
                if topic is None:
                    raise MQClientError(
                        f"no message at offset {offset} of the store host {store_addr} decoded from "
                        f"{msg_id} ({exc}); if {msg_id} is a client msgId (UNIQ_KEY), give the topic"
                    ) from exc
        if topic is None:
            raise MQClientError(
                f"{msg_id} is not an offset msgId of a reachable broker; give the topic to look it "
                "up as a client msgId (UNIQ_KEY)"
            )
        msgs = await self.query_msg_by_key(topic, msg_id, unique_key=True)
        if not msgs:
            raise MQClientError(f"no message with id {msg_id} in topic {topic}")
        return msgs[0]


def _read_addr(route: TopicRouteData, broker_name: str) -> str | None:
    """Where to read a group's figures: its master, or a slave while the master is down."""
    for bd in route.broker_datas:
        if bd.broker_name == broker_name:
            found = pick_replica(bd.broker_addrs)
            return found.broker_addr if found is not None else None
    return None


class Admin:
    """Blocking facade of :class:`AsyncAdmin` (same methods, run on the background loop)."""

    def __init__(self, namesrv_addr: str | Sequence[str], *, config: ClientConfig | None = None) -> None:
        self._loop = acquire_loop()

        async def make() -> AsyncAdmin:
            return AsyncAdmin(namesrv_addr, config=config)

        try:
            self.async_admin = self._loop.run(make())
        except BaseException:
            release_loop(self._loop)
            raise
        self._closed = False

    def _run(self, coro: Coroutine[Any, Any, _T]) -> _T:
        return self._loop.run(coro)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            try:
                self._run(self.async_admin.close())
            finally:
                release_loop(self._loop)

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def cluster_list(self) -> ClusterInfo:
        return self._run(self.async_admin.cluster_list())

    def topic_list(self) -> list[str]:
        return self._run(self.async_admin.topic_list())

    def topic_route(self, topic: str) -> TopicRouteData:
        return self._run(self.async_admin.topic_route(topic))

    def create_topic(self, topic: str, **kwargs: Any) -> list[str]:
        return self._run(self.async_admin.create_topic(topic, **kwargs))

    def delete_topic(self, topic: str, *, cluster: str | None = None) -> list[str]:
        return self._run(self.async_admin.delete_topic(topic, cluster=cluster))

    def topic_status(self, topic: str) -> list[QueueStatus]:
        return self._run(self.async_admin.topic_status(topic))

    def topic_stats(self, broker_addr: str, topic: str) -> list[QueueStatus]:
        return self._run(self.async_admin.topic_stats(broker_addr, topic))

    def consumer_progress(self, group: str, topic: str) -> list[QueueProgress]:
        return self._run(self.async_admin.consumer_progress(group, topic))

    def reset_offset_by_time(
        self, group: str, topic: str, timestamp_ms: int, *, force: bool = True
    ) -> dict[MessageQueue, int]:
        return self._run(self.async_admin.reset_offset_by_time(group, topic, timestamp_ms, force=force))

    def query_msg_by_key(self, topic: str, key: str, **kwargs: Any) -> list[MessageExt]:
        return self._run(self.async_admin.query_msg_by_key(topic, key, **kwargs))

    def query_msg_by_id(self, msg_id: str, topic: str | None = None) -> MessageExt:
        return self._run(self.async_admin.query_msg_by_id(msg_id, topic))

    def ha_status(self, broker_addr: str, timeout_ms: int | None = None) -> HAStatus:
        return self._run(self.async_admin.ha_status(broker_addr, timeout_ms))

    def broker_runtime_info(self, broker_addr: str, timeout_ms: int | None = None) -> dict[str, str]:
        return self._run(self.async_admin.broker_runtime_info(broker_addr, timeout_ms))

    def cluster_replicas(self, timeout_ms: int = 3000) -> list[BrokerReplica]:
        return self._run(self.async_admin.cluster_replicas(timeout_ms))

    def group_list(self) -> list[str]:
        return self._run(self.async_admin.group_list())

    def consumer_connections(self, group: str) -> GroupConnections:
        return self._run(self.async_admin.consumer_connections(group))

    def query_assignment(
        self, broker_addr: str, topic: str, group: str, client_id: str, **kwargs: Any
    ) -> QueryAssignmentResponseBody:
        return self._run(self.async_admin.query_assignment(broker_addr, topic, group, client_id, **kwargs))

    def set_message_request_mode(
        self, broker_addr: str, topic: str, group: str, mode: MessageRequestMode, **kwargs: Any
    ) -> None:
        self._run(self.async_admin.set_message_request_mode(broker_addr, topic, group, mode, **kwargs))

    def pop_status(
        self, group: str, topic: str | None = None, *, broker_addr: str | None = None
    ) -> list[admin_pop.BrokerPopStatus]:
        return self._run(self.async_admin.pop_status(group, topic, broker_addr=broker_addr))

    def consume_stats(self, group: str, topic: str | None = None) -> list[QueueProgress]:
        return self._run(self.async_admin.consume_stats(group, topic))

    def query_msg_by_time(
        self, topic: str, begin_ms: int, end_ms: int, *, max_num: int = 64
    ) -> list[MessageExt]:
        return self._run(self.async_admin.query_msg_by_time(topic, begin_ms, end_ms, max_num=max_num))
