"""Typed request and response headers, converted to and from a command's ``extFields``.

Java flattens a "custom header" object into ``extFields`` by field name, writing every non-null
field with ``toString()``; the receiver parses them back with ``Integer.parseInt``,
``Long.parseLong`` and ``Boolean.parseBoolean`` and rejects a missing ``@CFNotNull`` field.

Theory of operation: a header here is a frozen keyword-only dataclass declared with
:func:`command_header`; each field is declared with :func:`jstr`, :func:`jint`, :func:`jlong` or
:func:`jbool`, which record the Java wire name and type.  Three kinds of field follow from the
declaration: *required* (no default: must be present on decode, never None on encode),
*optional* (default None: omitted from the wire when None) and *always sent* (a non-None default,
like Java's primitive fields: always encoded, and the default is used when a peer omits it).
Python attributes use RocketMQ's vocabulary in snake_case; the wire keeps the Java spelling,
including the one-letter names of ``SendMessageRequestHeaderV2``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from enum import Enum
from typing import Any, ClassVar, Self, TypeVar, cast, dataclass_transform

from rocketq.client.errors import HeaderError

_T = TypeVar("_T")
_MISSING: Any = dataclasses.MISSING


class JavaType(Enum):
    """The Java type of a header field, which fixes its string conversion."""

    STRING = "String"
    INTEGER = "Integer"
    LONG = "Long"
    BOOLEAN = "Boolean"


_RANGES = {JavaType.INTEGER: (-(1 << 31), (1 << 31) - 1), JavaType.LONG: (-(1 << 63), (1 << 63) - 1)}
_JAVA_DECIMAL = re.compile(r"[+-]?[0-9]+")


@dataclasses.dataclass(frozen=True, slots=True)
class WireField:
    """How one dataclass attribute travels in extFields."""

    attr: str
    wire: str
    java: JavaType
    required: bool


def _spec(java: JavaType, wire: str, default: Any) -> Any:
    metadata = {"wire": wire, "java": java}
    if default is dataclasses.MISSING:
        return dataclasses.field(metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def jstr(wire: str, *, default: Any = _MISSING) -> Any:
    """A Java ``String`` field named ``wire`` on the wire."""
    return _spec(JavaType.STRING, wire, default)


def jint(wire: str, *, default: Any = _MISSING) -> Any:
    """A Java ``Integer`` field (decimal, int32 range)."""
    return _spec(JavaType.INTEGER, wire, default)


def jlong(wire: str, *, default: Any = _MISSING) -> Any:
    """A Java ``Long`` field (decimal, int64 range)."""
    return _spec(JavaType.LONG, wire, default)


def jbool(wire: str, *, default: Any = _MISSING) -> Any:
    """A Java ``Boolean`` field ("true"/"false"; parsed like ``Boolean.parseBoolean``)."""
    return _spec(JavaType.BOOLEAN, wire, default)


class CommandHeader:
    """Base of all typed headers: conversion to and from extFields driven by ``wire_fields``."""

    __slots__ = ()
    wire_fields: ClassVar[tuple[WireField, ...]] = ()

    def to_ext_fields(self) -> dict[str, str]:
        """The extFields for this header; None-valued optional fields are omitted."""
        ext: dict[str, str] = {}
        for f in self.wire_fields:
            value = getattr(self, f.attr)
            if value is None:
                if f.required:
                    raise HeaderError(f"{type(self).__name__}: required field {f.wire!r} ({f.attr}) is None")
                continue
            if f.java is JavaType.STRING:
                ext[f.wire] = value
            elif f.java is JavaType.BOOLEAN:
                ext[f.wire] = "true" if value else "false"
            else:
                low, high = _RANGES[f.java]
                if not low <= value <= high:
                    raise HeaderError(
                        f"{type(self).__name__}: field {f.wire!r} ({f.attr}) = {value} is outside"
                        f" the Java {f.java.value} range"
                    )
                ext[f.wire] = str(int(value))
        return ext

    @classmethod
    def from_ext_fields(cls, ext: Mapping[str, str]) -> Self:
        """Parse extFields; raise HeaderError naming the field when one is missing or malformed."""
        return cls(**_parse_fields(cls.__name__, cls.wire_fields, ext))

    def replace(self, **changes: Any) -> Self:
        """A copy with some attributes changed."""
        return dataclasses.replace(self, **changes)  # type: ignore[type-var]


def _parse_fields(owner: str, fields: tuple[WireField, ...], ext: Mapping[str, str]) -> dict[str, Any]:
    """The constructor arguments ``fields`` give for ``ext`` (every request header goes through here)."""
    kwargs: dict[str, Any] = {}
    string = JavaType.STRING
    for f in fields:
        raw = ext.get(f.wire)
        if raw is None:
            if f.required:
                raise HeaderError(f"{owner}: required field {f.wire!r} is missing")
        elif f.java is string:
            kwargs[f.attr] = raw
        else:
            kwargs[f.attr] = _parse(owner, f, raw)
    return kwargs


def _parse(owner: str, f: WireField, raw: str) -> Any:
    if f.java is JavaType.STRING:
        return raw
    if f.java is JavaType.BOOLEAN:
        return raw.lower() == "true"
    # plain ASCII digits are the common case; signs (and anything else) go through the pattern
    if not (raw.isascii() and raw.isdigit()) and not _JAVA_DECIMAL.fullmatch(raw):
        raise HeaderError(f"{owner}: field {f.wire!r} is not a Java {f.java.value}: {raw!r}")
    value = int(raw)
    low, high = _RANGES[f.java]
    if not low <= value <= high:
        raise HeaderError(f"{owner}: field {f.wire!r} = {raw} is outside the Java {f.java.value} range")
    return value


_H = TypeVar("_H", bound=CommandHeader)


@dataclass_transform(kw_only_default=True, frozen_default=True, field_specifiers=(jstr, jint, jlong, jbool))
def command_header(cls: type[_H]) -> type[_H]:
    """Class decorator: make ``cls`` a frozen keyword-only dataclass and record its wire fields."""
    dc = dataclasses.dataclass(frozen=True, kw_only=True, slots=True)(cls)
    wire: list[WireField] = []
    for f in dataclasses.fields(cast(Any, dc)):
        if "wire" not in f.metadata:
            raise TypeError(f"{cls.__name__}.{f.name} must be declared with jstr/jint/jlong/jbool")
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        wire.append(WireField(f.name, f.metadata["wire"], f.metadata["java"], required))
    dc.wire_fields = tuple(wire)
    return dc


# --------------------------------------------------------------------------- send


@command_header
class SendMessageRequestHeader(CommandHeader):
    """SEND_MESSAGE (10) request header, long field names."""

    producer_group: str = jstr("producerGroup")
    topic: str = jstr("topic")
    default_topic: str = jstr("defaultTopic")
    default_topic_queue_nums: int = jint("defaultTopicQueueNums")
    queue_id: int = jint("queueId")
    sys_flag: int = jint("sysFlag")
    born_timestamp: int = jlong("bornTimestamp")
    flag: int = jint("flag")
    properties: str | None = jstr("properties", default=None)
    reconsume_times: int | None = jint("reconsumeTimes", default=None)
    unit_mode: bool = jbool("unitMode", default=False)
    batch: bool = jbool("batch", default=False)
    max_reconsume_times: int | None = jint("maxReconsumeTimes", default=None)
    broker_name: str | None = jstr("bname", default=None)

    def to_v2(self) -> SendMessageRequestHeaderV2:
        return SendMessageRequestHeaderV2(**_attrs(self))


@command_header
class SendMessageRequestHeaderV2(CommandHeader):
    """SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320), SEND_REPLY_MESSAGE_V2 (325): names a..n."""

    producer_group: str = jstr("a")
    topic: str = jstr("b")
    default_topic: str = jstr("c")
    default_topic_queue_nums: int = jint("d")
    queue_id: int = jint("e")
    sys_flag: int = jint("f")
    born_timestamp: int = jlong("g")
    flag: int = jint("h")
    properties: str | None = jstr("i", default=None)
    reconsume_times: int | None = jint("j", default=None)
    unit_mode: bool = jbool("k", default=False)
    max_reconsume_times: int | None = jint("l", default=None)
    batch: bool = jbool("m", default=False)
    broker_name: str | None = jstr("n", default=None)

    def to_v1(self) -> SendMessageRequestHeader:
        return SendMessageRequestHeader(**_attrs(self))


def _attrs(header: CommandHeader) -> dict[str, Any]:
    return {f.attr: getattr(header, f.attr) for f in header.wire_fields}


_V2_SEND_CODES = frozenset({310, 320, 325})  # SEND_MESSAGE_V2, SEND_BATCH_MESSAGE, SEND_REPLY_MESSAGE_V2


def parse_send_message_request(code: int, ext: Mapping[str, str]) -> SendMessageRequestHeader:
    """The send header of a request of any send code, as the long-name (V1) header."""
    if code in _V2_SEND_CODES:  # the same attributes under the short wire names: no V2 object
        owner = SendMessageRequestHeaderV2.__name__
        return SendMessageRequestHeader(**_parse_fields(owner, SendMessageRequestHeaderV2.wire_fields, ext))
    return SendMessageRequestHeader.from_ext_fields(ext)


@command_header
class SendMessageResponseHeader(CommandHeader):
    msg_id: str = jstr("msgId")
    queue_id: int = jint("queueId")
    queue_offset: int = jlong("queueOffset")
    transaction_id: str | None = jstr("transactionId", default=None)
    batch_uniq_id: str | None = jstr("batchUniqId", default=None)
    recall_handle: str | None = jstr("recallHandle", default=None)
    msg_region: str | None = jstr("MSG_REGION", default=None)
    trace_on: bool | None = jbool("TRACE_ON", default=None)


@command_header
class RecallMessageRequestHeader(CommandHeader):
    """RECALL_MESSAGE (370, RocketMQ 5.3.2): cancel a timer message by the handle its send answered."""

    producer_group: str | None = jstr("producerGroup", default=None)
    topic: str = jstr("topic")
    recall_handle: str = jstr("recallHandle")
    broker_name: str | None = jstr("brokerName", default=None)


@command_header
class RecallMessageResponseHeader(CommandHeader):
    msg_id: str = jstr("msgId")


# --------------------------------------------------------------------------- pull and offsets


@command_header
class PullMessageRequestHeader(CommandHeader):
    consumer_group: str = jstr("consumerGroup")
    topic: str = jstr("topic")
    queue_id: int = jint("queueId")
    queue_offset: int = jlong("queueOffset")
    max_msg_nums: int = jint("maxMsgNums")
    sys_flag: int = jint("sysFlag")
    commit_offset: int = jlong("commitOffset")
    suspend_timeout_millis: int = jlong("suspendTimeoutMillis")
    subscription: str | None = jstr("subscription", default=None)
    sub_version: int = jlong("subVersion")
    expression_type: str | None = jstr("expressionType", default=None)
    max_msg_bytes: int | None = jint("maxMsgBytes", default=None)
    request_source: int | None = jint("requestSource", default=None)
    proxy_forward_client_id: str | None = jstr("proxyFrowardClientId", default=None)  # sic


@command_header
class PullMessageResponseHeader(CommandHeader):
    suggest_which_broker_id: int = jlong("suggestWhichBrokerId")
    next_begin_offset: int = jlong("nextBeginOffset")
    min_offset: int = jlong("minOffset")
    max_offset: int = jlong("maxOffset")
    offset_delta: int | None = jlong("offsetDelta", default=None)
    topic_sys_flag: int | None = jint("topicSysFlag", default=None)
    group_sys_flag: int | None = jint("groupSysFlag", default=None)
    forbidden_type: int | None = jint("forbiddenType", default=None)


@command_header
class QueryConsumerOffsetRequestHeader(CommandHeader):
    consumer_group: str = jstr("consumerGroup")
    topic: str = jstr("topic")
    queue_id: int = jint("queueId")
    set_zero_if_not_found: bool | None = jbool("setZeroIfNotFound", default=None)


@command_header
class QueryConsumerOffsetResponseHeader(CommandHeader):
    offset: int = jlong("offset")


@command_header
class UpdateConsumerOffsetRequestHeader(CommandHeader):
    consumer_group: str = jstr("consumerGroup")
    topic: str = jstr("topic")
    queue_id: int = jint("queueId")
    commit_offset: int = jlong("commitOffset")


@command_header
class GetMaxOffsetRequestHeader(CommandHeader):
    topic: str = jstr("topic")
    queue_id: int = jint("queueId")
    committed: bool | None = jbool("committed", default=None)


@command_header
class GetMaxOffsetResponseHeader(CommandHeader):
    offset: int = jlong("offset")


@command_header
class GetMinOffsetRequestHeader(CommandHeader):
    topic: str = jstr("topic")
    queue_id: int = jint("queueId")


@command_header
class GetMinOffsetResponseHeader(CommandHeader):
    offset: int = jlong("offset")


@command_header
class SearchOffsetRequestHeader(CommandHeader):
    topic: str = jstr("topic")
    queue_id: int = jint("queueId")
    timestamp: int = jlong("timestamp")
    boundary_type: str | None = jstr("boundaryType", default=None)


@command_header
class SearchOffsetResponseHeader(CommandHeader):
    offset: int = jlong("offset")


@command_header
class GetEarliestMsgStoretimeRequestHeader(CommandHeader):
    topic: str = jstr("topic")
    queue_id: int = jint("queueId")


@command_header
class GetEarliestMsgStoretimeResponseHeader(CommandHeader):
    timestamp: int = jlong("timestamp")


# --------------------------------------------------------------------------- query and view


@command_header
class QueryMessageRequestHeader(CommandHeader):
    topic: str = jstr("topic")
    key: str = jstr("key")
    max_num: int = jint("maxNum")
    begin_timestamp: int = jlong("beginTimestamp")
    end_timestamp: int = jlong("endTimestamp")
    unique_key_query: bool | None = jbool("_UNIQUE_KEY_QUERY", default=None)


@command_header
class QueryMessageResponseHeader(CommandHeader):
    index_last_update_timestamp: int = jlong("indexLastUpdateTimestamp")
    index_last_update_phyoffset: int = jlong("indexLastUpdatePhyoffset")


@command_header
class ViewMessageRequestHeader(CommandHeader):
    offset: int = jlong("offset")
    topic: str | None = jstr("topic", default=None)


# --------------------------------------------------------------------------- clients and groups


@command_header
class UnregisterClientRequestHeader(CommandHeader):
    client_id: str = jstr("clientID")
    producer_group: str | None = jstr("producerGroup", default=None)
    consumer_group: str | None = jstr("consumerGroup", default=None)


@command_header
class GetConsumerListByGroupRequestHeader(CommandHeader):
    consumer_group: str = jstr("consumerGroup")


@command_header
class NotifyConsumerIdsChangedRequestHeader(CommandHeader):
    consumer_group: str = jstr("consumerGroup")


@command_header
class GetConsumerConnectionListRequestHeader(CommandHeader):
    consumer_group: str = jstr("consumerGroup")


@command_header
class ConsumerSendMsgBackRequestHeader(CommandHeader):
    offset: int = jlong("offset")
    group: str = jstr("group")
    delay_level: int = jint("delayLevel")
    origin_msg_id: str | None = jstr("originMsgId", default=None)
    origin_topic: str | None = jstr("originTopic", default=None)
    unit_mode: bool = jbool("unitMode", default=False)
    max_reconsume_times: int | None = jint("maxReconsumeTimes", default=None)


@command_header
class GetConsumeStatsRequestHeader(CommandHeader):
    consumer_group: str = jstr("consumerGroup")
    topic: str | None = jstr("topic", default=None)


@command_header
class GetTopicStatsInfoRequestHeader(CommandHeader):
    topic: str = jstr("topic")


@command_header
class ResetOffsetRequestHeader(CommandHeader):
    """INVOKE_BROKER_TO_RESET_OFFSET (222) request header."""

    topic: str = jstr("topic")
    group: str = jstr("group")
    timestamp: int = jlong("timestamp")
    is_force: bool = jbool("isForce", default=False)


@command_header
class ResetConsumerClientOffsetRequestHeader(ResetOffsetRequestHeader):
    """RESET_CONSUMER_CLIENT_OFFSET (220, broker -> consumer): Java reuses ResetOffsetRequestHeader."""


# --------------------------------------------------------------------------- topics and transactions


@command_header
class CreateTopicRequestHeader(CommandHeader):
    """UPDATE_AND_CREATE_TOPIC (17) request header."""

    topic: str = jstr("topic")
    default_topic: str = jstr("defaultTopic")
    read_queue_nums: int = jint("readQueueNums")
    write_queue_nums: int = jint("writeQueueNums")
    perm: int = jint("perm")
    topic_filter_type: str = jstr("topicFilterType", default="SINGLE_TAG")
    topic_sys_flag: int | None = jint("topicSysFlag", default=None)
    order: bool = jbool("order", default=False)
    attributes: str | None = jstr("attributes", default=None)
    force: bool | None = jbool("force", default=None)


@command_header
class DeleteTopicRequestHeader(CommandHeader):
    """DELETE_TOPIC_IN_BROKER (215) request header."""

    topic: str = jstr("topic")


@command_header
class EndTransactionRequestHeader(CommandHeader):
    producer_group: str = jstr("producerGroup")
    tran_state_table_offset: int = jlong("tranStateTableOffset")
    commit_log_offset: int = jlong("commitLogOffset")
    commit_or_rollback: int = jint("commitOrRollback")  # 0 unknown, 8 commit, 12 rollback
    from_transaction_check: bool = jbool("fromTransactionCheck", default=False)
    msg_id: str = jstr("msgId")
    transaction_id: str | None = jstr("transactionId", default=None)
    topic: str | None = jstr("topic", default=None)


@command_header
class CheckTransactionStateRequestHeader(CommandHeader):
    tran_state_table_offset: int = jlong("tranStateTableOffset")
    commit_log_offset: int = jlong("commitLogOffset")
    msg_id: str | None = jstr("msgId", default=None)
    transaction_id: str | None = jstr("transactionId", default=None)
    offset_msg_id: str | None = jstr("offsetMsgId", default=None)
    topic: str | None = jstr("topic", default=None)


# --------------------------------------------------------------------------- NameServer


@command_header
class GetRouteInfoRequestHeader(CommandHeader):
    topic: str = jstr("topic")
    accept_standard_json_only: bool | None = jbool("acceptStandardJsonOnly", default=None)


@command_header
class RegisterBrokerRequestHeader(CommandHeader):
    broker_name: str = jstr("brokerName")
    broker_addr: str = jstr("brokerAddr")
    cluster_name: str = jstr("clusterName")
    ha_server_addr: str = jstr("haServerAddr")
    broker_id: int = jlong("brokerId")
    heartbeat_timeout_millis: int | None = jlong("heartbeatTimeoutMillis", default=None)
    enable_acting_master: bool | None = jbool("enableActingMaster", default=None)
    compressed: bool = jbool("compressed", default=False)
    body_crc32: int = jint("bodyCrc32", default=0)
    zone_name: str | None = jstr("__ZONE_NAME", default=None)


@command_header
class RegisterBrokerResponseHeader(CommandHeader):
    ha_server_addr: str | None = jstr("haServerAddr", default=None)
    master_addr: str | None = jstr("masterAddr", default=None)


@command_header
class UnRegisterBrokerRequestHeader(CommandHeader):
    broker_name: str = jstr("brokerName")
    broker_addr: str = jstr("brokerAddr")
    cluster_name: str = jstr("clusterName")
    broker_id: int = jlong("brokerId")


@command_header
class QueryDataVersionRequestHeader(CommandHeader):
    broker_name: str = jstr("brokerName")
    broker_addr: str = jstr("brokerAddr")
    cluster_name: str = jstr("clusterName")
    broker_id: int = jlong("brokerId")


@command_header
class QueryDataVersionResponseHeader(CommandHeader):
    changed: bool = jbool("changed")


@command_header
class DeleteTopicFromNamesrvRequestHeader(CommandHeader):
    topic: str = jstr("topic")
    cluster_name: str | None = jstr("clusterName", default=None)


@command_header
class GetTopicsByClusterRequestHeader(CommandHeader):
    cluster: str = jstr("cluster")


@command_header
class WipeWritePermOfBrokerRequestHeader(CommandHeader):
    broker_name: str = jstr("brokerName")


@command_header
class WipeWritePermOfBrokerResponseHeader(CommandHeader):
    wipe_topic_count: int = jint("wipeTopicCount")


@command_header
class AddWritePermOfBrokerRequestHeader(CommandHeader):
    broker_name: str = jstr("brokerName")


@command_header
class AddWritePermOfBrokerResponseHeader(CommandHeader):
    add_topic_count: int = jint("addTopicCount")


@command_header
class PutKVConfigRequestHeader(CommandHeader):
    namespace: str = jstr("namespace")
    key: str = jstr("key")
    value: str = jstr("value")


@command_header
class GetKVConfigRequestHeader(CommandHeader):
    namespace: str = jstr("namespace")
    key: str = jstr("key")


@command_header
class GetKVConfigResponseHeader(CommandHeader):
    value: str | None = jstr("value", default=None)


@command_header
class DeleteKVConfigRequestHeader(CommandHeader):
    namespace: str = jstr("namespace")
    key: str = jstr("key")


@command_header
class GetKVListByNamespaceRequestHeader(CommandHeader):
    namespace: str = jstr("namespace")
