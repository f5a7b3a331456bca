"""Push-consumer listener types: statuses, contexts and the two listener signatures.

A *concurrent* listener gets a batch of messages (``consume_message_batch_max_size``, 1 by
default) and returns CONSUME_SUCCESS, or RECONSUME_LATER to have the broker redeliver them later
through the group's retry topic (an exception counts as RECONSUME_LATER).  An *orderly* listener
is called for one queue at a time, in offset order, by one task; SUSPEND_CURRENT_QUEUE_A_MOMENT
retries the same messages locally after ``suspend_current_queue_time_ms``.  Listeners may be
plain functions (run in the consumer's thread pool of ``consume_thread_nums`` threads) or
coroutine functions (awaited on the event loop).
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from rocketq.client.model import MessageExt
from rocketq.client.remoting.route import MessageQueue

__all__ = [
    "ConsumeConcurrentlyContext",
    "ConsumeConcurrentlyStatus",
    "ConsumeOrderlyContext",
    "ConsumeOrderlyStatus",
    "MessageListenerConcurrently",
    "MessageListenerOrderly",
]


class ConsumeConcurrentlyStatus(enum.Enum):
    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


class ConsumeOrderlyStatus(enum.Enum):
    SUCCESS = "SUCCESS"
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"


@dataclass
class ConsumeConcurrentlyContext:
    """Per-call context; set ``delay_level_when_next_consume`` (0 = broker decides, -1 = DLQ)."""

    message_queue: MessageQueue
    delay_level_when_next_consume: int = 0
    ack_index: int = 2**31 - 1


@dataclass
class ConsumeOrderlyContext:
    message_queue: MessageQueue
    auto_commit: bool = True
    suspend_current_queue_time_ms: int = -1  # -1: the consumer's suspend_current_queue_time_ms


ConcurrentResult = ConsumeConcurrentlyStatus | Awaitable[ConsumeConcurrentlyStatus]
OrderlyResult = ConsumeOrderlyStatus | Awaitable[ConsumeOrderlyStatus]
MessageListenerConcurrently = Callable[[list[MessageExt], ConsumeConcurrentlyContext], ConcurrentResult]
MessageListenerOrderly = Callable[[list[MessageExt], ConsumeOrderlyContext], OrderlyResult]
