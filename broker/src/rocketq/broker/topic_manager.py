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

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from rocketq.broker.config import BrokerConfig
from rocketq.client.remoting.vocabulary import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    DLQ_GROUP_TOPIC_PREFIX,
    OFFSET_MOVED_EVENT,
    PERM_RW,
    RETRY_GROUP_TOPIC_PREFIX,
    SCHEDULE_TOPIC,
    SELF_TEST_TOPIC,
    TRACE_TOPIC,
    TRANS_CHECK_MAX_TIME_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
    DataVersion,
    Perm,
    TopicConfig,
    is_system_topic,
    validate_topic,
)

# Vocabulary names re-exported for the broker's modules.
__all__ = [
    "AUTO_CREATE_TOPIC_KEY_TOPIC",
    "DLQ_GROUP_TOPIC_PREFIX",
    "OFFSET_MOVED_EVENT",
    "RETRY_GROUP_TOPIC_PREFIX",
    "SCHEDULE_TOPIC",
    "SELF_TEST_TOPIC",
    "TRACE_TOPIC",
    "TRANS_CHECK_MAX_TIME_TOPIC",
    "TRANS_HALF_TOPIC",
    "TRANS_OP_HALF_TOPIC",
    "DataVersion",
    "TopicConfig",
    "TopicConfigManager",
    "is_system_topic",
    "validate_topic",
]

ChangeListener = Callable[[TopicConfig | None], None]


class TopicConfigManager:
    """The topic table.  Mutations bump the data version, persist and notify listeners.

    ``persist`` receives the ``topics.json`` document (TopicConfigSerializeWrapper) after every
    change; listeners receive the created/updated config (``None`` for a deletion) and are how the
    server triggers an immediate NameServer registration.
    """

    def __init__(
        self, config: BrokerConfig, *, persist: Callable[[dict[str, Any]], None] | None = None
    ) -> None:
        self._config = config
        self._persist = persist
        self._table: dict[str, TopicConfig] = {}
        self.data_version = DataVersion.now()
        self._listeners: list[ChangeListener] = []
        self._add_system_topics()

    # ------------------------------------------------------------------ state
    def _add_system_topics(self) -> None:
        cfg = self._config
        rw = PERM_RW
        system: list[TopicConfig] = [
            TopicConfig(topic_name=SELF_TEST_TOPIC, read_queue_nums=1, write_queue_nums=1),
            TopicConfig(
                topic_name=cfg.broker_cluster_name,
                read_queue_nums=16,
                write_queue_nums=16,
                perm=rw | Perm.INHERIT,
            ),
            TopicConfig(
                topic_name=cfg.broker_name, read_queue_nums=1, write_queue_nums=1, perm=rw | Perm.INHERIT
            ),
            TopicConfig(topic_name=OFFSET_MOVED_EVENT, read_queue_nums=1, write_queue_nums=1),
            TopicConfig(topic_name=SCHEDULE_TOPIC, read_queue_nums=18, write_queue_nums=18),
            TopicConfig(topic_name=TRANS_HALF_TOPIC, read_queue_nums=1, write_queue_nums=1),
            TopicConfig(topic_name=TRANS_OP_HALF_TOPIC, read_queue_nums=1, write_queue_nums=1),
        ]
        if cfg.trace_topic_enable:  # RocketMQ: one queue, read-write
            trace = cfg.msg_trace_topic_name
            system.append(TopicConfig(topic_name=trace, read_queue_nums=1, write_queue_nums=1))
        if cfg.auto_create_topic_enable:
            n = cfg.default_topic_queue_nums
            system.append(
                TopicConfig(
                    topic_name=AUTO_CREATE_TOPIC_KEY_TOPIC,
                    read_queue_nums=n,
                    write_queue_nums=n,
                    perm=rw | Perm.INHERIT,
                )
            )
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
        self.data_version = self.data_version.bumped()
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
            perm=template.perm & ~Perm.INHERIT,
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

    def replace_all(self, table: Mapping[str, TopicConfig], data_version: DataVersion) -> bool:
        """A slave's copy of its master's table (SlaveSynchronize): replace the whole table and take
        the master's data version, unless that version is the one held already (then False).

        Persisted like any change; listeners are not told: a slave's topics do not feed the
        NameServer's routes, which come from the master's registration.
        """
        if data_version == self.data_version:
            return False
        self._table = dict(table)
        self.data_version = data_version
        if self._persist is not None:
            self._persist(self.encode())
        return True

    # ------------------------------------------------------------------ persistence
    def encode(self) -> dict[str, Any]:
        """The ``topics.json`` / GET_ALL_TOPIC_CONFIG document (TopicConfigSerializeWrapper)."""
        return {
            "dataVersion": self.data_version.to_obj(),
            "topicConfigTable": {name: tc.to_obj() for name, tc in sorted(self._table.items())},
        }

    def load(self, doc: Mapping[str, Any] | None) -> None:
        """Load a ``topics.json`` document; system topics are kept, persisted topics override them."""
        if not doc:
            return
        table = doc.get("topicConfigTable") or {}
        for name, obj in table.items():
            if isinstance(obj, Mapping):
                tc = TopicConfig.from_obj({"topicName": name, **obj})
                if name == AUTO_CREATE_TOPIC_KEY_TOPIC and not self._config.auto_create_topic_enable:
                    continue
                self._table[name] = tc
        if not self._config.auto_create_topic_enable:
            self._table.pop(AUTO_CREATE_TOPIC_KEY_TOPIC, None)
        self.data_version = DataVersion.from_obj(doc.get("dataVersion") or {})
        self.data_version = self.data_version.bumped()
