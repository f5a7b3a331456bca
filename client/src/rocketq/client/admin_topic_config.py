"""One topic's config on one broker, with its RocketMQ 5 attributes (GET_TOPIC_CONFIG, 351).

The broker answers Java's ``TopicConfigAndQueueMapping``: the topic config's fields, its
``attributes`` map (``message.type``, :mod:`rocketq.client.remoting.topic_attributes`) and a
static-topic ``mappingDetail`` that rocketq leaves null; TOPIC_NOT_EXIST when the broker has no
such topic.  The RocketMQ 5 proxy reads a topic's message type this way.
"""

from __future__ import annotations

from rocketq.client.api import MQClientAPI
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.vocabulary import TopicConfig

__all__ = ["query_topic_config"]


async def query_topic_config(api: MQClientAPI, broker_addr: str, topic: str) -> TopicConfig | None:
    """The topic's config on ``broker_addr``; None when the broker has no such topic."""
    cmd = RemotingCommand.request(RequestCode.GET_TOPIC_CONFIG, {"topic": topic})
    response = await api.invoke(broker_addr, cmd)
    if response.code == ResponseCode.TOPIC_NOT_EXIST:
        return None
    api.check(response, broker_addr)
    return TopicConfig.from_json(response.body)
