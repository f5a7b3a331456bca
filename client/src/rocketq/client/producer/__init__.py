"""Producers: :class:`AsyncProducer` (asyncio) and :class:`Producer` (blocking), selectors, results."""

from rocketq.client.model import Message, SendResult, SendStatus
from rocketq.client.producer.blocking import Producer
from rocketq.client.producer.core import AsyncProducer
from rocketq.client.producer.selector import (
    MessageQueueSelector,
    SelectMessageQueueByHash,
    SelectMessageQueueByRandom,
    SelectMessageQueueByRoundRobin,
)

__all__ = [
    "AsyncProducer",
    "Message",
    "MessageQueueSelector",
    "Producer",
    "SelectMessageQueueByHash",
    "SelectMessageQueueByRandom",
    "SelectMessageQueueByRoundRobin",
    "SendResult",
    "SendStatus",
]
