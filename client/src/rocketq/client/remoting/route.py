"""Route and topic metadata bodies exchanged with the NameServer, and ``MessageQueue``.

Covers ``TopicRouteData`` (GET_ROUTEINFO_BY_TOPIC), ``ClusterInfo`` (GET_BROKER_CLUSTER_INFO),
``TopicConfig`` and ``RegisterBrokerBody`` (REGISTER_BROKER, JSON and zlib-compressed forms),
``KVTable`` and ``TopicList``, plus the permission bits of ``PermName``.

Theory of operation.  Every class is a frozen dataclass with ``to_json() -> bytes`` writing
standard JSON with RocketMQ's camelCase field names (sorted keys, compact), and
``from_json(bytes)`` reading either standard JSON or fastjson's dialect through
:mod:`rocketq.client.remoting.lenient_json` (so ``brokerAddrs`` may come as ``{0:"ip:port"}`` or
``{"0":"ip:port"}``; broker ids become ints).  Unknown fields are ignored, missing ones take Java's
defaults.  The compressed RegisterBrokerBody (B.10) is a zlib stream of length-prefixed parts::

    int32 len | DataVersion JSON
    int32 topic count, then per topic: int32 len | "name read write perm filterType attributesJSON"
    int32 len | filterServerList JSON
    (5.x, optional) int32 mapping count, then per mapping: int32 len | JSON
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Self

from rocketq.client.errors import ProtocolError
from rocketq.client.remoting.lenient_json import dumps, loads
from rocketq.client.remoting.vocabulary import (
    MASTER_ID,
    PERM_RW,
    DataVersion,
    MessageQueue,
    Perm,
    TopicConfig,
    is_readable,
    is_writeable,
    json_object,
    perm_to_string,
)

__all__ = [
    "MASTER_ID",
    "PERM_RW",
    "BrokerData",
    "ClusterInfo",
    "DataVersion",
    "KVTable",
    "MessageQueue",
    "Perm",
    "QueueData",
    "RegisterBrokerBody",
    "TopicConfig",
    "TopicConfigSerializeWrapper",
    "TopicList",
    "TopicRouteData",
    "is_readable",
    "is_writeable",
    "perm_to_string",
]

_INT32: Final = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class QueueData:
    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int = PERM_RW
    topic_sys_flag: int = 0

    def to_obj(self) -> dict[str, Any]:
        return {
            "brokerName": self.broker_name, "perm": self.perm, "readQueueNums": self.read_queue_nums,
            "topicSysFlag": self.topic_sys_flag, "writeQueueNums": self.write_queue_nums,
        }  # fmt: skip

    @classmethod
    def from_obj(cls, obj: Mapping[str, Any]) -> Self:
        sys_flag = obj.get("topicSysFlag", obj.get("topicSynFlag", 0))  # very old spelling
        return cls(
            str(obj["brokerName"]), int(obj.get("readQueueNums", 0)), int(obj.get("writeQueueNums", 0)),
            int(obj.get("perm", PERM_RW)), int(sys_flag or 0),
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class BrokerData:
    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)
    zone_name: str | None = None
    enable_acting_master: bool = False

    @property
    def master_addr(self) -> str | None:
        return self.broker_addrs.get(MASTER_ID)

    def to_obj(self) -> dict[str, Any]:
        obj: dict[str, Any] = {
            "brokerAddrs": {str(k): v for k, v in sorted(self.broker_addrs.items())},
            "brokerName": self.broker_name, "cluster": self.cluster,
            "enableActingMaster": self.enable_acting_master,
        }  # fmt: skip
        if self.zone_name is not None:
            obj["zoneName"] = self.zone_name
        return obj

    @classmethod
    def from_obj(cls, obj: Mapping[str, Any]) -> Self:
        addrs = {int(k): str(v) for k, v in (obj.get("brokerAddrs") or {}).items()}
        zone = obj.get("zoneName")
        return cls(
            str(obj.get("cluster", "")), str(obj["brokerName"]), addrs, None if zone is None else str(zone),
            bool(obj.get("enableActingMaster", False)),
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class TopicRouteData:
    queue_datas: list[QueueData] = field(default_factory=list)
    broker_datas: list[BrokerData] = field(default_factory=list)
    filter_server_table: dict[str, list[str]] = field(default_factory=dict)
    order_topic_conf: str | None = None

    def master_addr(self, broker_name: str) -> str | None:
        """Address of the master (broker id 0) of ``broker_name``, if known."""
        for broker in self.broker_datas:
            if broker.broker_name == broker_name:
                return broker.master_addr
        return None

    def writable_queues(self, topic: str) -> list[MessageQueue]:
        """Producer view (``topicRouteData2TopicPublishInfo``): writeable brokers with a master."""
        if self.order_topic_conf:
            return _order_conf_queues(topic, self.order_topic_conf)
        return [
            MessageQueue(topic, qd.broker_name, queue_id)
            for qd in sorted(self.queue_datas, key=lambda q: q.broker_name)
            if is_writeable(qd.perm) and self.master_addr(qd.broker_name) is not None
            for queue_id in range(qd.write_queue_nums)
        ]

    def readable_queues(self, topic: str) -> list[MessageQueue]:
        """Consumer view (``topicRouteData2TopicSubscribeInfo``): readable brokers."""
        return [
            MessageQueue(topic, qd.broker_name, queue_id)
            for qd in sorted(self.queue_datas, key=lambda q: q.broker_name)
            if is_readable(qd.perm)
            for queue_id in range(qd.read_queue_nums)
        ]

    def to_obj(self) -> dict[str, Any]:
        obj: dict[str, Any] = {
            "brokerDatas": [b.to_obj() for b in self.broker_datas],
            "filterServerTable": {k: list(v) for k, v in self.filter_server_table.items()},
            "queueDatas": [q.to_obj() for q in self.queue_datas],
        }
        if self.order_topic_conf is not None:
            obj["orderTopicConf"] = self.order_topic_conf
        return obj

    def to_json(self) -> bytes:
        return dumps(self.to_obj())

    @classmethod
    def from_json(cls, data: bytes | str | Mapping[str, Any]) -> Self:
        obj = json_object(data)
        conf = obj.get("orderTopicConf")
        return cls(
            [QueueData.from_obj(q) for q in obj.get("queueDatas") or []],
            [BrokerData.from_obj(b) for b in obj.get("brokerDatas") or []],
            {str(k): [str(a) for a in v] for k, v in (obj.get("filterServerTable") or {}).items()},
            None if conf is None else str(conf),
        )  # fmt: skip


def _order_conf_queues(topic: str, conf: str) -> list[MessageQueue]:
    """Queues from an ``orderTopicConf`` like ``"broker-a:4;broker-b:4"``."""
    queues: list[MessageQueue] = []
    for item in conf.split(";"):
        name, sep, nums = item.partition(":")
        if sep and nums.strip().isdigit():
            queues.extend(MessageQueue(topic, name, i) for i in range(int(nums)))
    return queues


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    broker_addr_table: dict[str, BrokerData] = field(default_factory=dict)
    cluster_addr_table: dict[str, list[str]] = field(default_factory=dict)

    def to_json(self) -> bytes:
        return dumps({
            "brokerAddrTable": {k: v.to_obj() for k, v in self.broker_addr_table.items()},
            "clusterAddrTable": {k: sorted(v) for k, v in self.cluster_addr_table.items()},
        })  # fmt: skip

    @classmethod
    def from_json(cls, data: bytes | str | Mapping[str, Any]) -> Self:
        obj = json_object(data)
        return cls(
            {str(k): BrokerData.from_obj(v) for k, v in (obj.get("brokerAddrTable") or {}).items()},
            {str(k): sorted(str(b) for b in v) for k, v in (obj.get("clusterAddrTable") or {}).items()},
        )


@dataclass(frozen=True, slots=True)
class TopicConfigSerializeWrapper:
    topic_config_table: dict[str, TopicConfig] = field(default_factory=dict)
    data_version: DataVersion = field(default_factory=DataVersion)

    def to_obj(self) -> dict[str, Any]:
        return {
            "dataVersion": self.data_version.to_obj(),
            "topicConfigTable": {k: v.to_obj() for k, v in self.topic_config_table.items()},
        }

    def to_json(self) -> bytes:
        return dumps(self.to_obj())

    @classmethod
    def from_obj(cls, obj: Mapping[str, Any]) -> Self:
        table = {str(k): TopicConfig.from_obj(v) for k, v in (obj.get("topicConfigTable") or {}).items()}
        return cls(table, DataVersion.from_obj(obj.get("dataVersion") or {}))

    @classmethod
    def from_json(cls, data: bytes | str | Mapping[str, Any]) -> Self:
        return cls.from_obj(json_object(data))


def body_crc32(body: bytes | bytearray | memoryview) -> int:
    """``UtilAll.crc32``: the ``bodyCrc32`` header of REGISTER_BROKER (0 means "do not check")."""
    return zlib.crc32(body) & 0x7FFFFFFF


@dataclass(frozen=True, slots=True)
class RegisterBrokerBody:
    """Body of REGISTER_BROKER; ``mapping_infos`` holds 5.x static-topic mappings as raw JSON objects."""

    topic_config_serialize_wrapper: TopicConfigSerializeWrapper = field(
        default_factory=TopicConfigSerializeWrapper
    )
    filter_server_list: list[str] = field(default_factory=list)
    mapping_infos: list[Any] = field(default_factory=list)

    def to_json(self) -> bytes:
        return dumps({
            "filterServerList": list(self.filter_server_list),
            "topicConfigSerializeWrapper": self.topic_config_serialize_wrapper.to_obj(),
        })  # fmt: skip

    @classmethod
    def from_json(cls, data: bytes | str | Mapping[str, Any]) -> Self:
        obj = json_object(data)
        wrapper = TopicConfigSerializeWrapper.from_obj(obj.get("topicConfigSerializeWrapper") or {})
        return cls(wrapper, [str(s) for s in obj.get("filterServerList") or []])

    def encode(self, compressed: bool = False, *, include_mappings: bool = False) -> bytes:
        """The wire body: JSON, or the zlib form (Deflater BEST_COMPRESSION) when ``compressed``.

        ``include_mappings`` appends the 5.x mapping section, which 5.x NameServers read only
        from brokers announcing version >= 5.0.0.
        """
        if not compressed:
            return self.to_json()
        wrapper = self.topic_config_serialize_wrapper
        parts = [_prefixed(wrapper.data_version.to_json()), _INT32.pack(len(wrapper.topic_config_table))]
        parts += [_prefixed(tc.encode_text().encode()) for tc in wrapper.topic_config_table.values()]
        parts.append(_prefixed(dumps(list(self.filter_server_list))))
        if include_mappings:
            parts.append(_INT32.pack(len(self.mapping_infos)))
            parts += [_prefixed(dumps(m)) for m in self.mapping_infos]
        return zlib.compress(b"".join(parts), 9)

    @classmethod
    def decode(cls, body: bytes, compressed: bool = False) -> Self:
        """Parse either wire form; raises ProtocolError on a corrupt compressed body."""
        if not compressed:
            return cls.from_json(body)
        try:
            raw = zlib.decompress(body)
        except zlib.error as exc:
            raise ProtocolError(f"REGISTER_BROKER body is not a zlib stream: {exc}") from exc
        reader = _Reader(raw)
        version = DataVersion.from_json(reader.chunk())
        table: dict[str, TopicConfig] = {}
        for _ in range(reader.int32()):
            config = TopicConfig.decode_text(reader.chunk().decode())
            table[config.topic_name] = config
        filters = [str(s) for s in loads(reader.chunk())]
        mappings = [loads(reader.chunk()) for _ in range(reader.int32())] if reader.remaining() >= 4 else []
        return cls(TopicConfigSerializeWrapper(table, version), filters, mappings)


def _prefixed(data: bytes) -> bytes:
    return _INT32.pack(len(data)) + data


class _Reader:
    """Bounds-checked reader of int32-length-prefixed chunks."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def remaining(self) -> int:
        return len(self.data) - self.pos

    def int32(self) -> int:
        if self.remaining() < 4:
            raise ProtocolError(f"truncated compressed REGISTER_BROKER body at position {self.pos}")
        (value,) = _INT32.unpack_from(self.data, self.pos)
        self.pos += 4
        if value < 0:
            raise ProtocolError(f"negative length {value} in REGISTER_BROKER body at position {self.pos - 4}")
        return int(value)

    def chunk(self) -> bytes:
        size = self.int32()
        if size > self.remaining():
            raise ProtocolError(f"chunk of {size} bytes overruns REGISTER_BROKER body at position {self.pos}")
        self.pos += size
        return self.data[self.pos - size : self.pos]


@dataclass(frozen=True, slots=True)
class KVTable:
    table: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> bytes:
        return dumps({"table": dict(self.table)})

    @classmethod
    def from_json(cls, data: bytes | str | Mapping[str, Any]) -> Self:
        return cls({str(k): str(v) for k, v in (json_object(data).get("table") or {}).items()})


@dataclass(frozen=True, slots=True)
class TopicList:
    topic_list: list[str] = field(default_factory=list)
    broker_addr: str | None = None

    def to_json(self) -> bytes:
        obj: dict[str, Any] = {"topicList": sorted(self.topic_list)}
        if self.broker_addr is not None:
            obj["brokerAddr"] = self.broker_addr
        return dumps(obj)

    @classmethod
    def from_json(cls, data: bytes | str | Mapping[str, Any]) -> Self:
        obj = json_object(data)
        addr = obj.get("brokerAddr")
        return cls([str(t) for t in obj.get("topicList") or []], None if addr is None else str(addr))
