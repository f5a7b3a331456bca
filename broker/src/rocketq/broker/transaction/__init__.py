"""Transactional (half) messages, as RocketMQ does them.

Prepared sends live in ``RMQ_SYS_TRANS_HALF_TOPIC``; END_TRANSACTION commits (writes the real
message) or rolls back, and both record an op message in ``RMQ_SYS_TRANS_OP_HALF_TOPIC``; a
periodic check pass asks a live producer of the group about half messages left undecided for longer
than ``transaction_timeout_ms`` and parks them in ``TRANS_CHECK_MAX_TIME_TOPIC`` after
``transaction_check_max`` checks.  All state is rebuilt from the log at start.  See
``docs/transactions.md``.
"""

from rocketq.broker.transaction.check_service import TransactionCheckService
from rocketq.broker.transaction.config import TransactionConfig, TransactionConfigError
from rocketq.broker.transaction.half_message import (
    CHECK_MAX_TIME_TOPIC,
    HALF_TOPIC,
    OP_TOPIC,
    SYS_TRANS_GROUP,
    is_transaction_prepared,
)
from rocketq.broker.transaction.service import CheckStats, SendCheck, TransactionalMessageService

__all__ = [
    "CHECK_MAX_TIME_TOPIC",
    "HALF_TOPIC",
    "OP_TOPIC",
    "SYS_TRANS_GROUP",
    "CheckStats",
    "SendCheck",
    "TransactionCheckService",
    "TransactionConfig",
    "TransactionConfigError",
    "TransactionalMessageService",
    "is_transaction_prepared",
]
