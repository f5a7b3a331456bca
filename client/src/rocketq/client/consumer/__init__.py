"""Consumers: lite pull (assign/subscribe, seek, poll, commit), push (listeners) and simple (POP:
receive, ack, change invisible duration), asyncio and blocking."""

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
from rocketq.client.consumer.pop_push import AsyncPopPushConsumer, PopPushConsumer
from rocketq.client.consumer.pop_rpc import PopNotSupportedError
from rocketq.client.consumer.push import AsyncPushConsumer
from rocketq.client.consumer.simple import AsyncSimpleConsumer, InvalidReceiptHandleError, SimpleConsumer
from rocketq.client.consumer.subscription import ExpressionType, MessageSelector, SubscriptionRefusedError
from rocketq.client.model import MessageExt, PolledBatch, PullResult, PullStatus

__all__ = [
    "AllocateMessageQueueAveragely",
    "AllocateMessageQueueAveragelyByCircle",
    "AllocateMessageQueueConsistentHash",
    "AllocateStrategy",
    "AsyncLitePullConsumer",
    "AsyncPopPushConsumer",
    "AsyncPushConsumer",
    "AsyncSimpleConsumer",
    "ConsumeConcurrentlyContext",
    "ConsumeConcurrentlyStatus",
    "ConsumeFromWhere",
    "ConsumeOrderlyContext",
    "ConsumeOrderlyStatus",
    "ConsumerConfig",
    "ExpressionType",
    "InvalidReceiptHandleError",
    "LitePullConsumer",
    "MessageExt",
    "MessageModel",
    "MessageSelector",
    "PolledBatch",
    "PopNotSupportedError",
    "PopPushConsumer",
    "PullResult",
    "PullStatus",
    "PushConsumer",
    "SimpleConsumer",
    "SubscriptionRefusedError",
]
