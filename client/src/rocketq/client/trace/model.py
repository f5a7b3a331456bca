"""The trace record model: RocketMQ 4.x message-trace vocabulary as typed, frozen values.

A Java ``TraceContext`` holds one or more ``TraceBean``s and is written as one text line per
bean; a :class:`TraceRecord` is one such line (a context with its one bean), which is also what
RocketMQ's ``TraceView`` shows.  The enums carry Java's names and ordinals, which the wire
format (:mod:`rocketq.client.trace.codec`) writes: ``TraceType`` by name, ``MessageType`` and
``ConsumeReturnType`` by ordinal, ``LocalTransactionState`` by name.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from rocketq.client.model import LocalTransactionState

__all__ = [
    "DEFAULT_REGION",
    "ConsumeReturnType",
    "LocalTransactionState",
    "MessageType",
    "TraceRecord",
    "TraceType",
]

#: the region id a trace carries when the broker's answer names none (Java's ``DefaultRegion``)
DEFAULT_REGION = "DefaultRegion"


class TraceType(enum.Enum):
    """What a trace line records (``org.apache.rocketmq.client.trace.TraceType``)."""

    Pub = "Pub"  # a send the broker answered
    SubBefore = "SubBefore"  # a consumer is about to hand the message to its listener
    SubAfter = "SubAfter"  # the listener returned: cost and status
    EndTransaction = "EndTransaction"  # a transactional producer committed or rolled back


class MessageType(enum.IntEnum):
    """``org.apache.rocketmq.common.message.MessageType``; the wire carries the ordinal."""

    Normal_Msg = 0
    Trans_Msg_Half = 1
    Trans_msg_Commit = 2
    Delay_Msg = 3


class ConsumeReturnType(enum.IntEnum):
    """How a listener call ended (``ConsumeReturnType``); SubAfter carries the ordinal."""

    SUCCESS = 0
    TIME_OUT = 1
    EXCEPTION = 2
    RETURNNULL = 3
    FAILED = 4


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceRecord:
    """One trace line.  Which fields the wire carries depends on ``trace_type``:

    * Pub: timestamp, region, group, topic, msg_id, tags, keys, store_host, body_length,
      cost_time_ms, msg_type, offset_msg_id, success;
    * SubBefore: timestamp, region, group, request_id, msg_id, retry_times, keys;
    * SubAfter: request_id, msg_id, cost_time_ms, success, keys, context_code, timestamp, group;
    * EndTransaction: timestamp, region, group, topic, msg_id, tags, keys, store_host, msg_type,
      transaction_id, transaction_state, from_transaction_check.

    ``client_host`` is not in the line: it is the born host of the trace message that carried it
    (filled in by :func:`rocketq.client.trace.lookup.query_trace`).  Absent tags and keys are
    ``None`` (Java writes them as the text ``null``).
    """

    trace_type: TraceType
    timestamp_ms: int = 0
    region_id: str = DEFAULT_REGION
    group_name: str = ""
    topic: str = ""
    msg_id: str = ""
    tags: str | None = None
    keys: str | None = None
    store_host: str = ""
    client_host: str = ""
    body_length: int = 0
    cost_time_ms: int = 0
    success: bool = True
    msg_type: MessageType = MessageType.Normal_Msg
    offset_msg_id: str = ""
    request_id: str = ""
    retry_times: int = 0
    context_code: ConsumeReturnType = ConsumeReturnType.SUCCESS
    transaction_id: str | None = None
    transaction_state: LocalTransactionState | None = None
    from_transaction_check: bool = False

    @property
    def status(self) -> str:
        """``success`` or ``failed``, as RocketMQ's TraceView and mqadmin print it."""
        return "success" if self.success else "failed"
