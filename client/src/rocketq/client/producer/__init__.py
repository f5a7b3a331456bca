"""Producers: :class:`AsyncProducer` (asyncio) and :class:`Producer` (blocking), their transactional
kinds :class:`AsyncTransactionProducer` / :class:`TransactionProducer`, selectors, results."""

from rocketq.client.model import (
    LocalTransactionState,
    Message,
    SendResult,
    SendStatus,
    TransactionSendResult,
)
from rocketq.client.producer.blocking import Producer, TransactionProducer
from rocketq.client.producer.core import AsyncProducer
from rocketq.client.producer.selector import (
    MessageQueueSelector,
    SelectMessageQueueByHash,
    SelectMessageQueueByRandom,
    SelectMessageQueueByRoundRobin,
)
from rocketq.client.producer.transaction import AsyncTransactionProducer, TransactionListener
from rocketq.client.producer.transaction_batch import HalfBatchResult, PreparedHalfBatch

__all__ = [
    "AsyncProducer",
    "AsyncTransactionProducer",
    "HalfBatchResult",
    "LocalTransactionState",
    "Message",
    "MessageQueueSelector",
    "PreparedHalfBatch",
    "Producer",
    "SelectMessageQueueByHash",
    "SelectMessageQueueByRandom",
    "SelectMessageQueueByRoundRobin",
    "SendResult",
    "SendStatus",
    "TransactionListener",
    "TransactionProducer",
    "TransactionSendResult",
]
