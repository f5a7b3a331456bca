"""The message type a topic accepts (its ``message.type`` attribute), checked on every send.

RocketMQ 5's proxy reads a topic's config from a broker (GET_TOPIC_CONFIG) and, with
``enableTopicMessageTypeCheck``, refuses a message whose type is not the topic's (a MIXED topic
takes every type) with MESSAGE_PROPERTY_CONFLICT_WITH_TYPE.  rocketq does the same for topics that
have the attribute (``mqadmin updateTopic -a +message.type=FIFO``); a topic without it takes every
type, as 4.x topics always have (RocketMQ 5 counts it as NORMAL).  The type is read from a master
of the topic's first broker and cached for ``topicConfigCacheRefreshSeconds``; when no broker
answers, the send is not checked.
"""

from __future__ import annotations

import logging
import time

from rocketq.client.admin_topic_config import query_topic_config
from rocketq.client.errors import RocketQError
from rocketq.client.instance import ClientInstance
from rocketq.client.remoting.topic_attributes import TopicMessageType, topic_message_type
from rocketq.proxy.config import ProxyConfig
from rocketq.proxy.convert import Refusal
from rocketq.proxy.v2 import definition_pb2 as pb

__all__ = ["TopicTypes", "message_type_of"]

log = logging.getLogger("rocketq.proxy")

_BY_GRPC = {
    pb.MessageType.NORMAL: TopicMessageType.NORMAL,
    pb.MessageType.FIFO: TopicMessageType.FIFO,
    pb.MessageType.DELAY: TopicMessageType.DELAY,
    pb.MessageType.TRANSACTION: TopicMessageType.TRANSACTION,
}


def message_type_of(message: pb.Message) -> TopicMessageType | None:
    """The SDK's message type; from the message itself when the SDK left it unspecified."""
    props = message.system_properties
    if props.message_type in _BY_GRPC:
        return _BY_GRPC[props.message_type]
    if props.message_type != pb.MessageType.MESSAGE_TYPE_UNSPECIFIED:
        return None  # LITE, PRIORITY: no topic type of rocketq's takes them
    if props.HasField("message_group"):
        return TopicMessageType.FIFO
    if props.HasField("delivery_timestamp"):
        return TopicMessageType.DELAY
    return TopicMessageType.NORMAL


class TopicTypes:
    """``await refusal(topic, message)``: None when the topic takes the message's type."""

    def __init__(self, instance: ClientInstance, config: ProxyConfig) -> None:
        self.instance = instance
        self.config = config
        self._cache: dict[str, tuple[float, TopicMessageType | None]] = {}

    async def topic_type(self, topic: str) -> TopicMessageType | None:
        cached = self._cache.get(topic)
        refresh_s = self.config.topic_config_cache_refresh_seconds
        if cached is not None and time.monotonic() - cached[0] < refresh_s:
            return cached[1]
        try:
            route = await self.instance.get_route(topic)
            names = sorted({q.broker_name for q in route.queue_datas})
            if not names:
                return None
            addr = await self.instance.find_master_addr_or_refresh(names[0], topic)
            tc = await query_topic_config(self.instance.api, addr, topic)
        except RocketQError as exc:
            log.warning("cannot read the config of topic %s from a broker: %s", topic, exc)
            return cached[1] if cached is not None else None
        kind = topic_message_type(tc.attributes) if tc is not None else None
        self._cache[topic] = (time.monotonic(), kind)
        return kind

    async def refusal(self, topic: str, message: pb.Message) -> Refusal | None:
        if not self.config.enable_topic_message_type_check:
            return None
        expected = await self.topic_type(topic)
        if expected is None or expected is TopicMessageType.MIXED:
            return None
        actual = message_type_of(message)
        if actual is expected:
            return None
        kind = message.system_properties.message_type
        name = actual.value if actual is not None else pb.MessageType.Name(kind)
        return Refusal(
            pb.Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
            f"topic {topic} takes {expected.value} messages (message.type), not {name}",
        )
