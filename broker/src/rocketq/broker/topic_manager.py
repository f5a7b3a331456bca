"""The broker's topic table (``config/topics.json``) and topic auto-creation.

Holds one :class:`TopicConfig` per topic, the table's ``dataVersion`` (bumped on every change, sent
to the NameServer in REGISTER_BROKER) and the system topics every broker has (``TBW102``,
``SELF_TEST_TOPIC``, the cluster and broker-name topics, ``OFFSET_MOVED_EVENT`` …).

Theory of operation of auto-creation (RocketMQ A.3.1): a producer that finds no route for a new
topic sends to a broker that carries the template topic ``TBW102`` (perm includes INHERIT), naming
it as ``defaultTopic``.  The broker then creates the topic with ``min(request's
defaultTopicQueueNums, TBW102's writeQueueNums)`` queues and the template's perm minus INHERIT, and
registers with the NameServers at once.  RocketMQ's well-known over-creation under concurrent first
sends comes from two races: the check-then-create in the broker ran on several threads, and every
concurrent creator applied *its own* queue count.  Here every table mutation happens on the event
loop thread (the manager is not thread-safe on purpose), so the first send creates the topic and
every later one — whatever queue count it asks for — gets the existing config back: one creation per
broker that actually received a send, with a consistent queue count.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from rocketq.broker.config import PERM_INHERIT, PERM_READ, PERM_WRITE, BrokerConfig

__all__ = [
    "AUTO_CREATE_TOPIC_KEY_TOPIC",
    "DataVersion",
    "TopicConfig",
    "TopicConfigManager",
    "is_system_topic",
    "validate_topic",
]

AUTO_CREATE_TOPIC_KEY_TOPIC = "TBW102"
SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
RMQ_SYS_TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
RMQ_SYS_TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
RMQ_SYS_TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
MAX_TOPIC_LENGTH = 127
_TOPIC_RE = re.compile(r"^[%|a-zA-Z0-9_-]+$")
_SYSTEM_TOPICS = frozenset(
    {AUTO_CREATE_TOPIC_KEY_TOPIC, SELF_TEST_TOPIC, OFFSET_MOVED_EVENT, SCHEDULE_TOPIC,
     RMQ_SYS_TRANS_HALF_TOPIC, RMQ_SYS_TRANS_OP_HALF_TOPIC, TRANS_CHECK_MAX_TIME_TOPIC}
)


def is_system_topic(topic: str) -> bool:
    """Topics users may not send to directly (``TBW102`` is only valid as ``defaultTopic``)."""
    return topic in _SYSTEM_TOPICS or topic.startswith("rmq_sys_")


def validate_topic(topic: str | None) -> str | None:
    """None if ``topic`` is a legal name, else the remark explaining why not."""
    if not topic:
        return "The specified topic is blank."
    if len(topic) > MAX_TOPIC_LENGTH:
        return f"The specified topic is longer than topic max length {MAX_TOPIC_LENGTH}: {len(topic)}."
    if not _TOPIC_RE.match(topic):
        return f"The specified topic[{topic}] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    return None


@dataclass(frozen=True, kw_only=True, slots=True)
class TopicConfig:
    """One topic on this broker (RocketMQ's ``TopicConfig``)."""

    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = PERM_READ | PERM_WRITE
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False

    @property
    def is_readable(self) -> bool:
        return bool(self.perm & PERM_READ)

    @property
    def is_writeable(self) -> bool:
        return bool(self.perm & PERM_WRITE)

    @property
    def is_inherited(self) -> bool:
        return bool(self.perm & PERM_INHERIT)

    def to_json(self) -> dict[str, Any]:
        """The fastjson field names and order RocketMQ writes to topics.json and the wire."""
        return {
            "attributes": {},
            "order": self.order,
            "perm": self.perm,
            "readQueueNums": self.read_queue_nums,
            "topicFilterType": self.topic_filter_type,
            "topicName": self.topic_name,
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> TopicConfig:
        return cls(
            topic_name=str(obj["topicName"]),
            read_queue_nums=int(obj.get("readQueueNums", 16)),
            write_queue_nums=int(obj.get("writeQueueNums", 16)),
            perm=int(obj.get("perm", PERM_READ | PERM_WRITE)),
            topic_filter_type=str(obj.get("topicFilterType", "SINGLE_TAG")),
            topic_sys_flag=int(obj.get("topicSysFlag", 0)),
            order=bool(obj.get("order", False)),
        )


@dataclass(slots=True)
class DataVersion:
    """RocketMQ's ``DataVersion``: a timestamp and a counter bumped on every change."""

    timestamp: int
    counter: int = 0
    state_version: int = 0

    def next_version(self) -> None:
        self.timestamp = int(time.time() * 1000)
        self.counter += 1

    def to_json(self) -> dict[str, int]:
        return {"counter": self.counter, "stateVersion": self.state_version, "timestamp": self.timestamp}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any] | None) -> DataVersion:
        obj = obj or {}
        return cls(
            timestamp=int(obj.get("timestamp", int(time.time() * 1000))),
            counter=int(obj.get("counter", 0)),
            state_version=int(obj.get("stateVersion", 0)),
        )


ChangeListener = Callable[[TopicConfig | None], None]


class TopicConfigManager:
    """The topic table.  Mutations bump the data version, persist and notify listeners.

    ``persist`` receives the ``topics.json`` document (TopicConfigSerializeWrapper) after every
    change; listeners receive the created/updated config (``None`` for a deletion) and are how the
    server triggers an immediate NameServer registration.
    """

    def __init__(self, config: BrokerConfig, *, persist: Callable[[dict[str, Any]], None] | None = None) -> None:
        self._config = config
        self._persist = persist
        self._table: dict[str, TopicConfig] = {}
        self.data_version = DataVersion(timestamp=int(time.time() * 1000))
        self._listeners: list[ChangeListener] = []
        self._add_system_topics()

    # ------------------------------------------------------------------ state
    def _add_system_topics(self) -> None:
        cfg = self._config
        rw = PERM_READ | PERM_WRITE
        system: list[TopicConfig] = [
            TopicConfig(topic_name=SELF_TEST_TOPIC, read_queue_nums=1, write_queue_nums=1),
            TopicConfig(topic_name=cfg.broker_cluster_name, read_queue_nums=16, write_queue_nums=16,
                        perm=rw | PERM_INHERIT),
            TopicConfig(topic_name=cfg.broker_name, read_queue_nums=1, write_queue_nums=1, perm=rw | PERM_INHERIT),
            TopicConfig(topic_name=OFFSET_MOVED_EVENT, read_queue_nums=1, write_queue_nums=1),
            TopicConfig(topic_name=SCHEDULE_TOPIC, read_queue_nums=18, write_queue_nums=18),
            TopicConfig(topic_name=RMQ_SYS_TRANS_HALF_TOPIC, read_queue_nums=1, write_queue_nums=1),
            TopicConfig(topic_name=RMQ_SYS_TRANS_OP_HALF_TOPIC, read_queue_nums=1, write_queue_nums=1),
        ]
        if cfg.auto_create_topic_enable:
            n = cfg.default_topic_queue_nums
            system.append(TopicConfig(topic_name=AUTO_CREATE_TOPIC_KEY_TOPIC, read_queue_nums=n,
                                      write_queue_nums=n, perm=rw | PERM_INHERIT))
        for tc in system:
            self._table[tc.topic_name] = tc

    def add_listener(self, listener: ChangeListener) -> None:
        self._listeners.append(listener)

    def select(self, topic: str) -> TopicConfig | None:
        return self._table.get(topic)

    def topics(self) -> list[str]:
        return sorted(self._table)

    def configs(self) -> list[TopicConfig]:
        return [self._table[t] for t in sorted(self._table)]

    def __contains__(self, topic: object) -> bool:
        return topic in self._table

    def __len__(self) -> int:
        return len(self._table)

    # ------------------------------------------------------------------ mutation
    def _changed(self, tc: TopicConfig | None) -> None:
        self.data_version.next_version()
        if self._persist is not None:
            self._persist(self.encode())
        for listener in list(self._listeners):
            listener(tc)

    def update(self, tc: TopicConfig) -> bool:
        """Create or replace ``tc``; False (and no version bump) if nothing changed."""
        if self._table.get(tc.topic_name) == tc:
            return False
        self._table[tc.topic_name] = tc
        self._changed(tc)
        return True

    def delete(self, topic: str) -> bool:
        if self._table.pop(topic, None) is None:
            return False
        self._changed(None)
        return True

    def update_order(self, topic: str, order: bool) -> None:
        tc = self._table.get(topic)
        if tc is not None and tc.order != order:
            self.update(replace(tc, order=order))

    def create_in_send_process(
        self, topic: str, default_topic: str, default_topic_queue_nums: int, topic_sys_flag: int = 0
    ) -> TopicConfig | None:
        """Auto-create ``topic`` from the template ``default_topic`` (see the module docstring).

        Returns the existing config if the topic exists (whatever queue count this caller asks
        for), the new config if it was created, or None if auto-creation is not allowed here.
        """
        existing = self._table.get(topic)
        if existing is not None:
            return existing
        template = self._table.get(default_topic)
        if template is None or not template.is_inherited:
            return None
        if default_topic == AUTO_CREATE_TOPIC_KEY_TOPIC and not self._config.auto_create_topic_enable:
            return None
        queue_nums = max(1, min(default_topic_queue_nums, template.write_queue_nums))
        tc = TopicConfig(
            topic_name=topic,
            read_queue_nums=queue_nums,
            write_queue_nums=queue_nums,
            perm=template.perm & ~PERM_INHERIT,
            topic_sys_flag=topic_sys_flag,
        )
        self._table[topic] = tc
        self._changed(tc)
        return tc

    def create_retry_topic(self, topic: str, queue_nums: int = 1) -> TopicConfig:
        """Create (once) a ``%RETRY%group`` or ``%DLQ%group`` topic; RocketMQ does this on heartbeat."""
        existing = self._table.get(topic)
        if existing is not None:
            return existing
        tc = TopicConfig(topic_name=topic, read_queue_nums=queue_nums, write_queue_nums=queue_nums)
        self._table[topic] = tc
        self._changed(tc)
        return tc

    # ------------------------------------------------------------------ persistence
    def encode(self) -> dict[str, Any]:
        """The ``topics.json`` / GET_ALL_TOPIC_CONFIG document (TopicConfigSerializeWrapper)."""
        return {
            "dataVersion": self.data_version.to_json(),
            "topicConfigTable": {name: tc.to_json() for name, tc in sorted(self._table.items())},
        }

    def load(self, doc: Mapping[str, Any] | None) -> None:
        """Load a ``topics.json`` document; system topics are kept, persisted topics override them."""
        if not doc:
            return
        table = doc.get("topicConfigTable") or {}
        for name, obj in table.items():
            if isinstance(obj, Mapping):
                tc = TopicConfig.from_json({"topicName": name, **obj})
                if name == AUTO_CREATE_TOPIC_KEY_TOPIC and not self._config.auto_create_topic_enable:
                    continue
                self._table[name] = tc
        if not self._config.auto_create_topic_enable:
            self._table.pop(AUTO_CREATE_TOPIC_KEY_TOPIC, None)
        self.data_version = DataVersion.from_json(doc.get("dataVersion"))
        self.data_version.next_version()
