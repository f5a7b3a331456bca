"""A consumer's choice of allocation strategy: a built-in one by name, or any callable.

The strategies themselves are in :mod:`rocketq.client.remoting.allocate` (the broker's
QUERY_ASSIGNMENT runs them too) and are re-exported here, where consumers look for them.
"""

from __future__ import annotations

from rocketq.client.config import AllocateStrategy
from rocketq.client.errors import ClientError
from rocketq.client.remoting.allocate import (
    AllocateFn,
    AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle,
    AllocateMessageQueueConsistentHash,
    mq_sort_key,
    mq_to_java_string,
)

__all__ = [
    "AllocateFn",
    "AllocateMessageQueueAveragely",
    "AllocateMessageQueueAveragelyByCircle",
    "AllocateMessageQueueConsistentHash",
    "allocate_strategy",
    "mq_sort_key",
    "mq_to_java_string",
]


def allocate_strategy(strategy: AllocateStrategy | AllocateFn) -> AllocateFn:
    """The callable for a built-in strategy name, or ``strategy`` itself if it is callable."""
    if isinstance(strategy, AllocateStrategy):
        if strategy is AllocateStrategy.AVG:
            return AllocateMessageQueueAveragely()
        if strategy is AllocateStrategy.AVG_BY_CIRCLE:
            return AllocateMessageQueueAveragelyByCircle()
        return AllocateMessageQueueConsistentHash()
    if not callable(strategy):
        raise ClientError(f"not an allocation strategy: {strategy!r}")
    return strategy
