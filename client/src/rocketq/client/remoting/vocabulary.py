"""The wire vocabulary of RocketMQ: the one definition of every name both ends must agree on.

Request and response codes (re-exported from :mod:`rocketq.client.remoting.codes`), broker and
topic permissions (``PermName``), the master's broker id, PULL_MESSAGE's sys flag bits
(``PullSysFlag``), subscription expression types, the system topics and group-topic prefixes
(``TopicValidator`` / ``MixAll``), and the small value types exchanged in request bodies:
``MessageQueue``, ``TopicConfig``, ``DataVersion`` and ``SubscriptionData``.  The NameServer, the
broker and the connector import these and extend them with behaviour; they never redefine them
(``integration_tests/test_vocabulary_ownership.py`` checks it).

Theory of operation.  Everything here is a constant, an enum or a frozen dataclass with
``to_obj``/``from_obj`` in RocketMQ's camelCase JSON field names (``to_json``/``from_json`` where
the value also travels alone as a body).  Mutable tables (the broker's topic table, the
subscription groups) keep their state elsewhere and replace their ``DataVersion`` with
:meth:`DataVersion.bumped`.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntFlag, StrEnum
from typing import Any, Final, Self

from rocketq.client.errors import ProtocolError
from rocketq.client.remoting.codes import LocalCode, RequestCode, ResponseCode
from rocketq.client.remoting.javahash import java_string_hash
from rocketq.client.remoting.lenient_json import JSONFormatError, dumps, loads

__all__ = [
    "AUTO_CREATE_TOPIC_KEY_TOPIC",
    "BENCHMARK_TOPIC",
    "DEFAULT_CLUSTER",
    "DLQ_GROUP_TOPIC_PREFIX",
    "MASTER_ID",
    "MAX_GROUP_LENGTH",
    "MAX_TOPIC_LENGTH",
    "NAMESPACE_ORDER_TOPIC_CONFIG",
    "NAME_PATTERN",
    "OFFSET_MOVED_EVENT",
    "PERM_RW",
    "RETRY_GROUP_TOPIC_PREFIX",
    "REVIVE_GROUP",
    "REVIVE_TOPIC_PREFIX",
    "SCHEDULE_TOPIC",
    "SELF_TEST_TOPIC",
    "SUB_ALL",
    "SYSTEM_GROUPS",
    "SYSTEM_TOPIC_PREFIX",
    "TIMER_TOPIC",
    "TOOLS_CONSUMER_GROUP",
    "TRACE_TOPIC",
    "TRANS_CHECK_MAX_TIME_TOPIC",
    "TRANS_HALF_TOPIC",
    "TRANS_OP_HALF_TOPIC",
    "DataVersion",
    "ExpressionType",
    "LocalCode",
    "MessageQueue",
    "Perm",
    "PullSysFlag",
    "RequestCode",
    "ResponseCode",
    "SubscriptionData",
    "TopicConfig",
    "build_subscription",
    "dlq_topic",
    "is_group_topic",
    "is_internal_topic",
    "is_readable",
    "is_system_topic",
    "is_writeable",
    "json_object",
    "parse_expression_type",
    "perm_to_string",
    "retry_topic",
    "revive_topic",
    "validate_group",
    "validate_topic",
]

#: Broker id of a group's master; slaves have ids > 0.
MASTER_ID: Final = 0
#: the NameServer KV namespace of order configurations (Java's ``NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG``):
#: topic name to ``brokerName:queueNums;...``, returned as a route's ``orderTopicConf``
NAMESPACE_ORDER_TOPIC_CONFIG: Final = "ORDER_TOPIC_CONFIG"


class Perm(IntFlag):
    """``PermName`` bits of a topic or broker."""

    INHERIT = 1
    WRITE = 2
    READ = 4
    PRIORITY = 8


PERM_RW: Final = Perm.READ | Perm.WRITE


def is_readable(perm: int) -> bool:
    return bool(perm & Perm.READ)


def is_writeable(perm: int) -> bool:
    return bool(perm & Perm.WRITE)


def perm_to_string(perm: int) -> str:
    """Java's ``PermName.perm2String``: e.g. ``"RW-"``."""
    return (
        ("R" if perm & Perm.READ else "-")
        + ("W" if perm & Perm.WRITE else "-")
        + ("X" if perm & Perm.INHERIT else "-")
    )


class PullSysFlag(IntFlag):
    """``PullSysFlag`` bits of PULL_MESSAGE's ``sysFlag`` header."""

    COMMIT_OFFSET = 0x1
    SUSPEND = 0x2
    SUBSCRIPTION = 0x4
    CLASS_FILTER = 0x8
    LITE_PULL = 0x10


class ExpressionType(StrEnum):
    """How a subscription's expression is read (``ExpressionType``)."""

    TAG = "TAG"
    SQL92 = "SQL92"


#: The subscription expression that matches every message.
SUB_ALL: Final = "*"
DEFAULT_CLUSTER: Final = "DefaultCluster"

# System topics (TopicValidator) and group topic prefixes (MixAll).
AUTO_CREATE_TOPIC_KEY_TOPIC: Final = "TBW102"
SELF_TEST_TOPIC: Final = "SELF_TEST_TOPIC"
BENCHMARK_TOPIC: Final = "BenchmarkTest"
OFFSET_MOVED_EVENT: Final = "OFFSET_MOVED_EVENT"
SCHEDULE_TOPIC: Final = "SCHEDULE_TOPIC_XXXX"
TRANS_HALF_TOPIC: Final = "RMQ_SYS_TRANS_HALF_TOPIC"
TRANS_OP_HALF_TOPIC: Final = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
TRANS_CHECK_MAX_TIME_TOPIC: Final = "TRANS_CHECK_MAX_TIME_TOPIC"
TRACE_TOPIC: Final = "RMQ_SYS_TRACE_TOPIC"
#: ``TimerMessageStore.TIMER_TOPIC``: timer messages wait here (queue 0) until they are due.
TIMER_TOPIC: Final = "rmq_sys_wheel_timer"
#: Topics starting with this (any case) are system topics too (``TopicValidator.isSystemTopic``).
SYSTEM_TOPIC_PREFIX: Final = "rmq_sys_"
RETRY_GROUP_TOPIC_PREFIX: Final = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX: Final = "%DLQ%"
#: ``PopAckConstants.REVIVE_TOPIC``: POP checkpoints and acks go to ``<prefix><brokerClusterName>``.
REVIVE_TOPIC_PREFIX: Final = "rmq_sys_REVIVE_LOG_"
#: ``PopAckConstants.REVIVE_GROUP``: its consumer offsets are the revive service's progress.
REVIVE_GROUP: Final = "CID_RMQ_SYS_REVIVE_GROUP"

#: ``MixAll.TOOLS_CONSUMER_GROUP``: the group of admin tools that browse a topic.
TOOLS_CONSUMER_GROUP: Final = "TOOLS_CONSUMER"
#: The subscription groups every broker creates at start (``SubscriptionGroupManager.init``).
SYSTEM_GROUPS: Final = (
    TOOLS_CONSUMER_GROUP,
    "FILTERSRV_CONSUMER",
    "SELF_TEST_C_GROUP",
    "CID_ONS-HTTP-PROXY",
    "CID_ONSAPI_PULL",
    "CID_ONSAPI_PERMISSION",
    "CID_ONSAPI_OWNER",
    "CID_RMQ_SYS_TRACE",
)

#: Topics users may not send to directly (``TBW102`` is only valid as ``defaultTopic``).
_SYSTEM_TOPICS: Final = frozenset(
    {
        AUTO_CREATE_TOPIC_KEY_TOPIC,
        SELF_TEST_TOPIC,
        OFFSET_MOVED_EVENT,
        SCHEDULE_TOPIC,
        TRANS_HALF_TOPIC,
        TRANS_OP_HALF_TOPIC,
        TRANS_CHECK_MAX_TIME_TOPIC,
    }
)


def is_system_topic(topic: str) -> bool:
    """A system topic that clients may not send to (``TopicValidator.isSystemTopic`` for sends)."""
    return topic in _SYSTEM_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIX)


def is_group_topic(topic: str) -> bool:
    """A consumer group's retry or dead-letter topic."""
    return topic.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX))


def is_internal_topic(topic: str) -> bool:
    """Any topic that is not a user's data topic: system, group, trace and benchmark topics.

    Listings of user topics (``subscribePattern`` in the Spark source) leave these out.
    """
    return (
        is_system_topic(topic)
        or is_group_topic(topic)
        or topic in (TRACE_TOPIC, BENCHMARK_TOPIC)
        or topic.startswith("RMQ_SYS_")
    )


def retry_topic(group: str) -> str:
    """``MixAll.getRetryTopic``: the retry topic of a consumer group."""
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    """``MixAll.getDLQTopic``: the dead-letter topic of a consumer group."""
    return DLQ_GROUP_TOPIC_PREFIX + group


def revive_topic(cluster: str) -> str:
    """``KeyBuilder.buildClusterReviveTopic``: the revive log of a broker cluster's POP state."""
    return REVIVE_TOPIC_PREFIX + cluster


# --------------------------------------------------------------------------- name rules

#: ``TopicValidator.VALID_PATTERN_STR``: the characters of a topic or group name.
NAME_PATTERN: Final = "^[%|a-zA-Z0-9_-]+$"
_NAME_RE: Final = re.compile(r"[%|a-zA-Z0-9_-]+")
#: ``TopicValidator.TOPIC_MAX_LENGTH``.
MAX_TOPIC_LENGTH: Final = 127
#: ``Validators.CHARACTER_MAX_LENGTH``: the longest group name.
MAX_GROUP_LENGTH: Final = 255


def validate_topic(topic: str | None) -> str | None:
    """None if ``topic`` is a legal name, else the remark explaining why not (``checkTopic``)."""
    if not topic or not topic.strip():
        return "The specified topic is blank."
    if len(topic) > MAX_TOPIC_LENGTH:
        return f"The specified topic is longer than topic max length {MAX_TOPIC_LENGTH}: {len(topic)}."
    if not _NAME_RE.fullmatch(topic):
        return f"The specified topic[{topic[:300]}] contains illegal characters, allowing only {NAME_PATTERN}"
    return None


def validate_group(group: str | None) -> str | None:
    """None if ``group`` is a legal consumer/producer group name, else why not (``checkGroup``).

    Groups become topic names (``%RETRY%group``, ``%DLQ%group``) and file keys, so they follow
    the topic character rules; a name such as ``../../x`` is refused wherever a group enters.
    """
    if not group or not group.strip():
        return "The specified group is blank."
    if len(group) > MAX_GROUP_LENGTH:
        return f"The specified group is longer than group max length {MAX_GROUP_LENGTH}: {len(group)}."
    if not _NAME_RE.fullmatch(group):
        return f"The specified group[{group[:300]}] contains illegal characters, allowing only {NAME_PATTERN}"
    return None


def _now_ms() -> int:
    return int(time.time() * 1000)


def json_object(data: bytes | str | Mapping[str, Any]) -> Mapping[str, Any]:
    """A JSON object body (standard or fastjson dialect), or the mapping itself."""
    value = data if isinstance(data, Mapping) else loads(data)
    if not isinstance(value, Mapping):
        raise JSONFormatError(f"expected a JSON object, got {type(value).__name__}")
    return value


@dataclass(frozen=True, slots=True, order=True)
class MessageQueue:
    """One queue of a topic on one broker; ordered like Java's (topic, brokerName, queueId)."""

    topic: str
    broker_name: str
    queue_id: int

    @property
    def key(self) -> str:
        return f"{self.broker_name}:{self.queue_id}"

    def to_obj(self) -> dict[str, Any]:
        return {"brokerName": self.broker_name, "queueId": self.queue_id, "topic": self.topic}

    @classmethod
    def from_obj(cls, obj: Mapping[str, Any]) -> Self:
        return cls(str(obj["topic"]), str(obj.get("brokerName", "")), int(obj["queueId"]))


@dataclass(frozen=True, slots=True)
class TopicConfig:
    """``TopicConfig``; Java's defaults are 16 read/write queues and perm RW."""

    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = PERM_RW
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False
    attributes: dict[str, str] = field(default_factory=dict)

    @property
    def is_readable(self) -> bool:
        return is_readable(self.perm)

    @property
    def is_writeable(self) -> bool:
        return is_writeable(self.perm)

    @property
    def is_inherited(self) -> bool:
        return bool(self.perm & Perm.INHERIT)

    def to_obj(self) -> dict[str, Any]:
        return {
            "attributes": dict(self.attributes), "order": self.order, "perm": self.perm,
            "readQueueNums": self.read_queue_nums, "topicFilterType": self.topic_filter_type,
            "topicName": self.topic_name, "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
        }  # fmt: skip

    def to_json(self) -> bytes:
        return dumps(self.to_obj())

    @classmethod
    def from_obj(cls, obj: Mapping[str, Any]) -> Self:
        return cls(
            str(obj["topicName"]), int(obj.get("readQueueNums", 16)), int(obj.get("writeQueueNums", 16)),
            int(obj.get("perm", PERM_RW)), str(obj.get("topicFilterType", "SINGLE_TAG")),
            int(obj.get("topicSysFlag", 0)), bool(obj.get("order", False)),
            {str(k): str(v) for k, v in (obj.get("attributes") or {}).items()},
        )  # fmt: skip

    @classmethod
    def from_json(cls, data: bytes | str | Mapping[str, Any]) -> Self:
        return cls.from_obj(json_object(data))

    def encode_text(self) -> str:
        """``TopicConfig.encode()``: ``name read write perm filterType attributesJSON`` (no ``order``)."""
        attrs = dumps(self.attributes).decode()
        return (
            f"{self.topic_name} {self.read_queue_nums} {self.write_queue_nums} {self.perm} "
            f"{self.topic_filter_type} {attrs}"
        )

    @classmethod
    def decode_text(cls, text: str) -> Self:
        parts = text.split(" ")
        if len(parts) < 5:
            raise ProtocolError(f"topic config text needs at least 5 fields: {text!r}")
        try:
            attrs = loads(" ".join(parts[5:])) if len(parts) > 5 and parts[5] else {}
            return cls(
                parts[0], int(parts[1]), int(parts[2]), int(parts[3]), parts[4],
                attributes={str(k): str(v) for k, v in dict(attrs).items()},
            )  # fmt: skip
        except (ValueError, TypeError) as exc:
            raise ProtocolError(f"bad topic config text {text!r}: {exc}") from exc


@dataclass(frozen=True, slots=True)
class DataVersion:
    timestamp: int = 0
    counter: int = 0
    state_version: int = 0

    def to_obj(self) -> dict[str, Any]:
        return {"counter": self.counter, "stateVersion": self.state_version, "timestamp": self.timestamp}

    def to_json(self) -> bytes:
        return dumps(self.to_obj())

    def next_version(self, timestamp_ms: int, state_version: int | None = None) -> DataVersion:
        """Java's ``nextVersion``: counter + 1 and a fresh timestamp."""
        state = self.state_version if state_version is None else state_version
        return DataVersion(timestamp_ms, self.counter + 1, state)

    @classmethod
    def now(cls) -> DataVersion:
        """A first version stamped with the current time (counter 0)."""
        return cls(_now_ms())

    def bumped(self) -> DataVersion:
        """The next version stamped with the current time (``nextVersion()`` of a mutable table)."""
        return self.next_version(_now_ms())

    @classmethod
    def from_obj(cls, obj: Mapping[str, Any]) -> Self:
        return cls(int(obj.get("timestamp", 0)), int(obj.get("counter", 0)), int(obj.get("stateVersion", 0)))

    @classmethod
    def from_json(cls, data: bytes | str | Mapping[str, Any]) -> Self:
        return cls.from_obj(json_object(data))


@dataclass(frozen=True, slots=True)
class SubscriptionData:
    """One topic's subscription of a consumer group (``SubscriptionData``), as in HeartbeatData."""

    topic: str
    sub_string: str = SUB_ALL
    tags_set: frozenset[str] = frozenset()
    code_set: frozenset[int] = frozenset()
    sub_version: int = field(default_factory=_now_ms)
    expression_type: ExpressionType = ExpressionType.TAG

    @property
    def is_all(self) -> bool:
        return self.expression_type is ExpressionType.TAG and self.sub_string.strip() in ("", SUB_ALL)

    def matches_tag(self, tag: str | None) -> bool:
        """The client-side re-check of a pulled message's tag (tag hash codes can collide)."""
        if self.expression_type is not ExpressionType.TAG or self.is_all:
            return True
        return tag is not None and tag in self.tags_set

    def tags_filter(self) -> frozenset[str] | None:
        """The tags a client re-checks after a pull (None = no tag filter)."""
        return None if self.is_all or self.expression_type is not ExpressionType.TAG else self.tags_set

    def to_obj(self) -> dict[str, Any]:
        return {
            "classFilterMode": False,
            "codeSet": sorted(self.code_set),
            "expressionType": self.expression_type.value,
            "subString": self.sub_string,
            "subVersion": self.sub_version,
            "tagsSet": sorted(self.tags_set),
            "topic": self.topic,
        }

    @classmethod
    def from_obj(cls, obj: Mapping[str, Any]) -> Self:
        """Read a HeartbeatData element; an unknown expression type raises ProtocolError."""
        return cls(
            topic=str(obj.get("topic", "")),
            sub_string=str(obj.get("subString") or SUB_ALL),
            tags_set=frozenset(str(t) for t in obj.get("tagsSet") or ()),
            code_set=frozenset(int(c) for c in obj.get("codeSet") or ()),
            sub_version=int(obj.get("subVersion") or 0),
            expression_type=parse_expression_type(obj.get("expressionType")),
        )


def parse_expression_type(value: object) -> ExpressionType:
    """An ``expressionType`` from the wire (missing = TAG, case-insensitive as in Java)."""
    if value is None or value == "":
        return ExpressionType.TAG
    try:
        return ExpressionType(str(value).upper())
    except ValueError:
        raise ProtocolError(f"unknown subscription expression type {value!r}; use TAG or SQL92") from None


def build_subscription(
    topic: str,
    expression: str | None,
    expression_type: ExpressionType = ExpressionType.TAG,
    sub_version: int | None = None,
) -> SubscriptionData:
    """Parse a subscription the way RocketMQ's ``FilterAPI.build`` does.

    TAG: ``*`` (also for ``None`` or blank) or tags separated by ``||``, with their Java hash
    codes in ``code_set``.  SQL92: the expression is kept as it is (the broker compiles it).
    """
    version = _now_ms() if sub_version is None else sub_version
    text = (expression or "").strip()
    if expression_type is ExpressionType.SQL92:
        return SubscriptionData(topic, text, sub_version=version, expression_type=expression_type)
    tags = [t.strip() for t in text.split("||")] if text and text != SUB_ALL else []
    tags = [t for t in tags if t]
    if not tags:
        return SubscriptionData(topic, SUB_ALL, sub_version=version)
    return SubscriptionData(
        topic,
        text,
        tags_set=frozenset(tags),
        code_set=frozenset(java_string_hash(t) for t in tags),
        sub_version=version,
    )
