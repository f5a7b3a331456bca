"""Consumers: lite pull (assign/subscribe, seek, poll, commit) and push (listeners), asyncio and blocking."""

from rocketq.client.config import AllocateStrategy, ConsumeFromWhere, ConsumerConfig, MessageModel
from rocketq.client.consumer.allocate import (
    AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle,
    AllocateMessageQueueConsistentHash,
)
from rocketq.client.consumer.blocking import LitePullConsumer, PushConsumer
from rocketq.client.consumer.listener import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
)
from rocketq.client.consumer.lite_pull import AsyncLitePullConsumer
from rocketq.client.consumer.push import AsyncPushConsumer
from rocketq.client.consumer.subscription import ExpressionType, MessageSelector, SubscriptionRefusedError
from rocketq.client.model import MessageExt, PullResult, PullStatus

__all__ = [
    "AllocateMessageQueueAveragely",
    "AllocateMessageQueueAveragelyByCircle",
    "AllocateMessageQueueConsistentHash",
    "AllocateStrategy",
    "AsyncLitePullConsumer",
    "AsyncPushConsumer",
    "ConsumeConcurrentlyContext",
    "ConsumeConcurrentlyStatus",
    "ConsumeFromWhere",
    "ConsumeOrderlyContext",
    "ConsumeOrderlyStatus",
    "ConsumerConfig",
    "ExpressionType",
    "LitePullConsumer",
    "MessageExt",
    "MessageModel",
    "MessageSelector",
    "PullResult",
    "PullStatus",
    "PushConsumer",
    "SubscriptionRefusedError",
]
