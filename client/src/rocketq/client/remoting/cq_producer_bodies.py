"""Wire shapes of QUERY_CONSUME_QUEUE (321) and GET_ALL_PRODUCER_INFO (328), RocketMQ's admin
requests behind ``mqadmin queryCq`` and ``mqadmin producer``.

QUERY_CONSUME_QUEUE: request header ``QueryConsumeQueueRequestHeader`` {topic, queueId, index,
count, consumerGroup?}; response body ``QueryConsumeQueueResponseBody``, JSON::

    {"subscriptionData": {...SubscriptionData...},        (only with a consumerGroup online)
     "filterData": "null",                                  (only with a consumerGroup)
     "queueData": [{"physicOffset": 1234, "physicSize": 190, "tagsCode": 2598919,
                    "extendDataJson": ..., "bitMap": ..., "eval": false, "msg": ...}],
     "maxQueueIndex": 10, "minQueueIndex": 0}

Null fields are left out, as fastjson writes them.  ``filterData`` is a string (Java puts the
pretty-printed ``ConsumerFilterData`` JSON there, ``"null"`` for a TAG subscription, or
``"<group>@<topic> is not online!"``).

GET_ALL_PRODUCER_INFO: no header fields; response body ``ProducerTableInfo``::

    {"data": {"<producerGroup>": [{"clientId": "...", "remoteIP": "/127.0.0.1:52144",
              "language": "PYTHON", "version": 0, "lastUpdateTimestamp": 1700000000000}]}}
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Self

from rocketq.client.errors import ProtocolError
from rocketq.client.remoting.headers import CommandHeader, command_header, jint, jlong, jstr
from rocketq.client.remoting.vocabulary import SubscriptionData

__all__ = [
    "CQ_EXT_MAX_ADDR",
    "ConsumeQueueData",
    "GetAllProducerInfoRequestHeader",
    "ProducerInfo",
    "QueryConsumeQueueBody",
    "QueryConsumeQueueRequestHeader",
    "decode_producer_table",
    "encode_producer_table",
]

#: a tags code at or below this is a ConsumeQueueExt address, not a tag hash (Java's ``MAX_ADDR``)
CQ_EXT_MAX_ADDR = -(2**31) - 1


@command_header
class QueryConsumeQueueRequestHeader(CommandHeader):
    topic: str = jstr("topic")
    queue_id: int = jint("queueId")
    index: int = jlong("index")
    count: int = jint("count")
    consumer_group: str | None = jstr("consumerGroup", default=None)


@command_header
class GetAllProducerInfoRequestHeader(CommandHeader):
    """No fields (Java's header is empty)."""


def _loads(body: bytes | None, what: str) -> Any:
    if not body:
        raise ProtocolError(f"{what}: the response has no body")
    try:
        return json.loads(body)
    except ValueError as exc:
        raise ProtocolError(f"{what}: body is not JSON: {exc}") from exc


def _dumps(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True).encode("utf-8")


@dataclass(frozen=True, slots=True)
class ConsumeQueueData:
    """One consume queue unit as QUERY_CONSUME_QUEUE reports it (Java's ``ConsumeQueueData``)."""

    physic_offset: int
    physic_size: int
    tags_code: int
    extend_data_json: str | None = None
    bit_map: str | None = None
    eval: bool = False
    msg: str | None = None

    def to_obj(self) -> dict[str, Any]:
        obj: dict[str, Any] = {
            "physicOffset": self.physic_offset,
            "physicSize": self.physic_size,
            "tagsCode": self.tags_code,
            "eval": self.eval,
        }
        for key, value in (
            ("extendDataJson", self.extend_data_json),
            ("bitMap", self.bit_map),
            ("msg", self.msg),
        ):
            if value is not None:
                obj[key] = value
        return obj

    @classmethod
    def from_obj(cls, obj: dict[str, Any]) -> Self:
        def text(key: str) -> str | None:
            value = obj.get(key)
            return None if value is None else str(value)

        return cls(
            physic_offset=int(obj.get("physicOffset") or 0),
            physic_size=int(obj.get("physicSize") or 0),
            tags_code=int(obj.get("tagsCode") or 0),
            extend_data_json=text("extendDataJson"),
            bit_map=text("bitMap"),
            eval=bool(obj.get("eval")),
            msg=text("msg"),
        )

    def java_str(self) -> str:
        """Java's ``ConsumeQueueData.toString()`` (the line ``mqadmin queryCq`` prints)."""

        def quoted(value: str | None) -> str:
            return "'null'" if value is None else f"'{value}'"

        return (
            f"ConsumeQueueData{{physicOffset={self.physic_offset}, physicSize={self.physic_size},"
            f" tagsCode={self.tags_code}, extendDataJson={quoted(self.extend_data_json)},"
            f" bitMap={quoted(self.bit_map)}, eval={'true' if self.eval else 'false'},"
            f" msg={quoted(self.msg)}}}"
        )


@dataclass(frozen=True, slots=True)
class QueryConsumeQueueBody:
    """Java's ``QueryConsumeQueueResponseBody``."""

    queue_data: tuple[ConsumeQueueData, ...]
    max_queue_index: int
    min_queue_index: int
    subscription_data: SubscriptionData | None = None
    filter_data: str | None = None

    def encode(self) -> bytes:
        obj: dict[str, Any] = {
            "queueData": [d.to_obj() for d in self.queue_data],
            "maxQueueIndex": self.max_queue_index,
            "minQueueIndex": self.min_queue_index,
        }
        if self.subscription_data is not None:
            obj["subscriptionData"] = self.subscription_data.to_obj()
        if self.filter_data is not None:
            obj["filterData"] = self.filter_data
        return _dumps(obj)

    @classmethod
    def decode(cls, body: bytes | None) -> Self:
        obj = _loads(body, "QueryConsumeQueueResponseBody")
        if not isinstance(obj, dict):
            raise ProtocolError("QueryConsumeQueueResponseBody: body is not a JSON object")
        sub = obj.get("subscriptionData")
        filter_data = obj.get("filterData")
        return cls(
            queue_data=tuple(ConsumeQueueData.from_obj(d) for d in obj.get("queueData") or ()),
            max_queue_index=int(obj.get("maxQueueIndex") or 0),
            min_queue_index=int(obj.get("minQueueIndex") or 0),
            subscription_data=SubscriptionData.from_obj(sub) if isinstance(sub, dict) else None,
            filter_data=None if filter_data is None else str(filter_data),
        )


@dataclass(frozen=True, slots=True)
class ProducerInfo:
    """One producer instance of a group (Java's ``ProducerInfo``)."""

    client_id: str
    remote_ip: str
    language: str
    version: int
    last_update_timestamp: int

    def to_obj(self) -> dict[str, Any]:
        return {
            "clientId": self.client_id,
            "remoteIP": self.remote_ip,
            "language": self.language,
            "version": self.version,
            "lastUpdateTimestamp": self.last_update_timestamp,
        }

    @classmethod
    def from_obj(cls, obj: dict[str, Any]) -> Self:
        return cls(
            client_id=str(obj.get("clientId") or ""),
            remote_ip=str(obj.get("remoteIP") or ""),
            language=str(obj.get("language") or ""),
            version=int(obj.get("version") or 0),
            last_update_timestamp=int(obj.get("lastUpdateTimestamp") or 0),
        )

    def java_str(self) -> str:
        """Java's ``ProducerInfo.toString()`` (its missing blank after the first comma included)."""
        return (
            f"clientId={self.client_id},remoteIP={self.remote_ip}, language={self.language},"
            f" version={self.version}, lastUpdateTimestamp={self.last_update_timestamp}"
        )


def encode_producer_table(table: dict[str, list[ProducerInfo]]) -> bytes:
    """A ``ProducerTableInfo`` body."""
    return _dumps({"data": {group: [p.to_obj() for p in infos] for group, infos in table.items()}})


def decode_producer_table(body: bytes | None) -> dict[str, list[ProducerInfo]]:
    """The groups and producers of a ``ProducerTableInfo`` body."""
    obj = _loads(body, "ProducerTableInfo")
    data = obj.get("data") if isinstance(obj, dict) else None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ProtocolError("ProducerTableInfo: 'data' is not a JSON object")
    return {str(g): [ProducerInfo.from_obj(p) for p in infos or ()] for g, infos in data.items()}
