"""Adapters between the wire bodies of :mod:`rocketq.client.remoting.route` and the route registry.

The codecs themselves (RegisterBrokerBody in its JSON and zlib forms, TopicRouteData,
ClusterInfo, KVTable, TopicList, DataVersion) live in the client's remoting package, shared with
the broker and the clients; this module only converts between them and the registry's own
types, and turns any decoding failure of a broker-supplied body into ``RegisterBodyError`` (which
the transport answers as ``SYSTEM_ERROR`` with the reason).  Output is standard JSON with sorted
keys, as a Java NameServer sends to clients of version >= 401.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from rocketq.client.errors import ProtocolError
from rocketq.client.remoting.route import (
    BrokerData,
    ClusterInfo,
    DataVersion,
    KVTable,
    QueueData,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicList,
    TopicRouteData,
    body_crc32,
)
from rocketq.namesrv.errors import RegisterBodyError
from rocketq.namesrv.routeinfo import BrokerRoute, ClusterSnapshot, DataVersionKey, QueueConf, TopicRoute

__all__ = [
    "RegisterBody",
    "body_crc32",
    "data_version_json",
    "decode_data_version",
    "decode_register_body",
    "encode_cluster_info",
    "encode_kv_table",
    "encode_register_body",
    "encode_topic_list",
    "encode_topic_route",
]

_DECODE_ERRORS = (ProtocolError, ValueError, TypeError, KeyError, AttributeError, UnicodeDecodeError)


@dataclass(frozen=True, slots=True)
class RegisterBody:
    """What a broker registration carries, in the route registry's terms."""

    data_version: DataVersionKey
    topic_queues: dict[str, QueueConf]
    filter_server_list: list[str]


def _version_key(version: DataVersion) -> DataVersionKey:
    return (version.timestamp, version.counter, version.state_version)


def decode_register_body(body: bytes, *, compressed: bool) -> RegisterBody | None:
    """Decode a REGISTER_BROKER body; None for an empty body (no topic configs sent)."""
    if not body:
        return None
    try:
        decoded = RegisterBrokerBody.decode(body, compressed)
    except _DECODE_ERRORS as exc:
        form = "compressed" if compressed else "JSON"
        raise RegisterBodyError(f"bad {form} REGISTER_BROKER body: {exc}") from exc
    wrapper = decoded.topic_config_serialize_wrapper
    topics = {
        name: QueueConf(tc.read_queue_nums, tc.write_queue_nums, tc.perm, tc.topic_sys_flag)
        for name, tc in wrapper.topic_config_table.items()
    }
    return RegisterBody(_version_key(wrapper.data_version), topics, list(decoded.filter_server_list))


def decode_data_version(body: bytes) -> DataVersionKey:
    """The DataVersion of a QUERY_DATA_VERSION request ((0, 0, 0) when the body is empty)."""
    if not body:
        return (0, 0, 0)
    try:
        return _version_key(DataVersion.from_json(body))
    except _DECODE_ERRORS as exc:
        raise RegisterBodyError(f"QUERY_DATA_VERSION body is not a DataVersion: {exc}") from exc


def data_version_json(key: DataVersionKey) -> bytes:
    timestamp, counter, state_version = key
    return DataVersion(timestamp, counter, state_version).to_json()


def encode_register_body(
    data_version: DataVersionKey,
    topics: Mapping[str, QueueConf],
    filter_server_list: list[str] | None = None,
    *,
    compressed: bool = False,
) -> bytes:
    """A RegisterBrokerBody as a broker sends it (used by tests and fake brokers)."""
    table = {
        name: TopicConfig(
            name, q.read_queue_nums, q.write_queue_nums, q.perm, topic_sys_flag=q.topic_sys_flag
        )
        for name, q in topics.items()
    }
    timestamp, counter, state_version = data_version
    wrapper = TopicConfigSerializeWrapper(table, DataVersion(timestamp, counter, state_version))
    return RegisterBrokerBody(wrapper, list(filter_server_list or [])).encode(compressed)


def _broker_data(b: BrokerRoute) -> BrokerData:
    return BrokerData(b.cluster, b.broker_name, dict(b.broker_addrs))


def encode_topic_route(route: TopicRoute, order_topic_conf: str | None) -> bytes:
    """TopicRouteData as standard JSON (quoted keys, sorted, ASCII escapes)."""
    data = TopicRouteData(
        [
            QueueData(name, q.read_queue_nums, q.write_queue_nums, q.perm, q.topic_sys_flag)
            for name, q in sorted(route.queue_datas.items())
        ],
        [_broker_data(b) for b in sorted(route.broker_datas, key=lambda b: b.broker_name)],
        {addr: list(servers) for addr, servers in route.filter_server_table.items()},
        order_topic_conf,
    )
    return data.to_json()


def encode_cluster_info(info: ClusterSnapshot) -> bytes:
    return ClusterInfo(
        {name: _broker_data(b) for name, b in info.broker_addr_table.items()},
        {cluster: list(names) for cluster, names in info.cluster_addr_table.items()},
    ).to_json()


def encode_topic_list(topics: list[str]) -> bytes:
    return TopicList(list(topics)).to_json()


def encode_kv_table(table: Mapping[str, str]) -> bytes:
    return KVTable(dict(table)).to_json()
