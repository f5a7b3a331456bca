"""RocketMQ 4.x message traces: records, their text format, the background dispatcher, lookup.

Turn traces on with ``enable_msg_trace=True`` (and optionally ``custom_trace_topic``) in a
producer's or consumer's config; look them up with :func:`rocketq.client.trace.lookup.query_trace`
or ``mqadmin queryMsgTraceById``.  See docs/observability.md "Message traces".
"""

from rocketq.client.trace.codec import CONTENT_SPLITOR, FIELD_SPLITOR, decode_trace_data, encode_records
from rocketq.client.trace.dispatcher import TraceDispatcher
from rocketq.client.trace.model import (
    ConsumeReturnType,
    MessageType,
    TraceRecord,
    TraceType,
)

__all__ = [
    "CONTENT_SPLITOR",
    "FIELD_SPLITOR",
    "ConsumeReturnType",
    "MessageType",
    "TraceDispatcher",
    "TraceRecord",
    "TraceType",
    "decode_trace_data",
    "encode_records",
]
