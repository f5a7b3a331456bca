"""Message properties codec and the standard property names (``MessageConst``).

RocketMQ carries message metadata (tags, keys, the client message id, delay level, transaction
markers, ...) as one string of ``key \\x01 value \\x02`` entries, UTF-8 encoded, in the send
request header, in the CommitLog record and in batch bodies.

Theory of operation.  Encoding follows ``MessageDecoder.messageProperties2String``: entries whose
value is ``None`` are skipped and a ``\\x02`` follows *every* entry, including the last.  Decoding
follows ``MessageDecoder.string2messageProperties``: split on ``\\x02``; a segment counts only if
it is at least 3 characters long and holds a ``\\x01`` with a non-empty key before it and a
non-empty value after it (Java drops ``k\\x01`` and ``\\x01v``).  Invalid UTF-8 is replaced by
U+FFFD, as Java's ``new String(bytes, UTF_8)`` does.  Keys or values containing a separator cannot
round-trip, so the encoder rejects them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from rocketq.client.errors import MessageFormatError
from rocketq.client.remoting.record_layout import (
    MAX_PROPERTIES_SIZE,
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
)

__all__ = [
    "KEY_SEPARATOR",
    "MAX_PROPERTIES_SIZE",
    "NAME_VALUE_SEPARATOR",
    "PROPERTY_SEPARATOR",
    "MessageConst",
    "decode_properties",
    "encode_properties",
    "encode_properties_bytes",
    "find_property",
    "split_keys",
]

KEY_SEPARATOR: Final = " "
_PS_BYTES: Final = PROPERTY_SEPARATOR.encode()


class MessageConst:
    """Standard property keys (``org.apache.rocketmq.common.message.MessageConst``).

    Attribute names are Java's ``PROPERTY_*`` names without the prefix; values are the wire keys.
    """

    KEYS: Final = "KEYS"
    TAGS: Final = "TAGS"
    WAIT_STORE_MSG_OK: Final = "WAIT"
    DELAY_TIME_LEVEL: Final = "DELAY"
    RETRY_TOPIC: Final = "RETRY_TOPIC"
    REAL_TOPIC: Final = "REAL_TOPIC"
    REAL_QUEUE_ID: Final = "REAL_QID"
    TRANSACTION_PREPARED: Final = "TRAN_MSG"
    PRODUCER_GROUP: Final = "PGROUP"
    MIN_OFFSET: Final = "MIN_OFFSET"
    MAX_OFFSET: Final = "MAX_OFFSET"
    BUYER_ID: Final = "BUYER_ID"
    ORIGIN_MESSAGE_ID: Final = "ORIGIN_MESSAGE_ID"
    TRANSFER_FLAG: Final = "TRANSFER_FLAG"
    CORRECTION_FLAG: Final = "CORRECTION_FLAG"
    MQ2_FLAG: Final = "MQ2_FLAG"
    RECONSUME_TIME: Final = "RECONSUME_TIME"
    MSG_REGION: Final = "MSG_REGION"
    TRACE_SWITCH: Final = "TRACE_ON"
    UNIQ_CLIENT_MESSAGE_ID_KEYIDX: Final = "UNIQ_KEY"
    UNIQ_KEY: Final = "UNIQ_KEY"
    EXTEND_UNIQ_INFO: Final = "EXTEND_UNIQ_INFO"
    MAX_RECONSUME_TIMES: Final = "MAX_RECONSUME_TIMES"
    CONSUME_START_TIMESTAMP: Final = "CONSUME_START_TIME"
    TRANSACTION_ID: Final = "__transactionId__"
    TRANSACTION_CHECK_TIMES: Final = "TRANSACTION_CHECK_TIMES"
    CHECK_IMMUNITY_TIME_IN_SECONDS: Final = "CHECK_IMMUNITY_TIME_IN_SECONDS"
    TRANSACTION_PREPARED_QUEUE_OFFSET: Final = "TRAN_PREPARED_QUEUE_OFFSET"
    SHARDING_KEY: Final = "__SHARDINGKEY"
    INSTANCE_ID: Final = "INSTANCE_ID"
    CORRELATION_ID: Final = "CORRELATION_ID"
    MESSAGE_REPLY_TO_CLIENT: Final = "REPLY_TO_CLIENT"
    MESSAGE_TTL: Final = "TTL"
    REPLY_MESSAGE_ARRIVE_TIME: Final = "ARRIVE_TIME"
    PUSH_REPLY_TIME: Final = "PUSH_REPLY_TIME"
    CLUSTER: Final = "CLUSTER"
    MESSAGE_TYPE: Final = "MSG_TYPE"
    TIMER_DELIVER_MS: Final = "TIMER_DELIVER_MS"
    TIMER_DELAY_SEC: Final = "TIMER_DELAY_SEC"
    TIMER_DELAY_MS: Final = "TIMER_DELAY_MS"
    TIMER_OUT_MS: Final = "TIMER_OUT_MS"
    TIMER_ENQUEUE_MS: Final = "TIMER_ENQUEUE_MS"
    TIMER_DEQUEUE_MS: Final = "TIMER_DEQUEUE_MS"
    TIMER_ROLL_TIMES: Final = "TIMER_ROLL_TIMES"
    TIMER_DEL_UNIQKEY: Final = "TIMER_DEL_UNIQKEY"
    TIMER_DELAY_LEVEL: Final = "TIMER_DELAY_LEVEL"
    POP_CK: Final = "POP_CK"
    POP_CK_OFFSET: Final = "POP_CK_OFFSET"
    FIRST_POP_TIME: Final = "1ST_POP_TIME"
    INNER_NUM: Final = "INNER_NUM"
    INNER_BASE: Final = "INNER_BASE"
    INNER_MULTI_DISPATCH: Final = "INNER_MULTI_DISPATCH"
    INNER_MULTI_QUEUE_OFFSET: Final = "INNER_MULTI_QUEUE_OFFSET"
    CRC32: Final = "__CRC32#"
    BORN_HOST: Final = "__BORNHOST"
    BORN_TIMESTAMP: Final = "BORN_TIMESTAMP"
    DLQ_ORIGIN_TOPIC: Final = "DLQ_ORIGIN_TOPIC"
    DLQ_ORIGIN_MESSAGE_ID: Final = "DLQ_ORIGIN_MESSAGE_ID"
    #: Prefix of properties that are never stored (``__RMQ.TRANSIENT.*``).
    TRANSIENT_PREFIX: Final = "__RMQ.TRANSIENT."
    DUP_INFO: Final = "DUP_INFO"
    FORWARD_QUEUE_ID: Final = "PROPERTY_FORWARD_QUEUE_ID"
    REDIRECT: Final = "REDIRECT"
    TRACE_CONTEXT: Final = "TRACE_CONTEXT"


def encode_properties(properties: Mapping[str, str | None]) -> str:
    """Return the ``k\\x01v\\x02...`` string; ``None`` values are skipped.

    Raises :class:`MessageFormatError` if a key or value contains a separator character.
    """
    nv, ps = NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR
    parts = [f"{k}{nv}{v}{ps}" for k, v in properties.items() if v is not None]
    text = "".join(parts)
    # One count per separator instead of a per-entry scan: cheap, and catches any stray separator.
    if text.count(nv) != len(parts) or text.count(ps) != len(parts):
        bad = [k for k, v in properties.items() if v is not None and _has_separator(k, v)]
        raise MessageFormatError(f"property key or value contains \\x01 or \\x02: {bad!r}")
    return text


def _has_separator(key: str, value: str) -> bool:
    return any(sep in key or sep in value for sep in (NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR))


def encode_properties_bytes(properties: Mapping[str, str | None]) -> bytes:
    """Return the UTF-8 properties bytes, checking the 32767-byte limit of the record format."""
    data = encode_properties(properties).encode()
    if len(data) > MAX_PROPERTIES_SIZE:
        raise MessageFormatError(f"properties are {len(data)} bytes, more than {MAX_PROPERTIES_SIZE}")
    return data


def decode_properties(data: bytes | bytearray | memoryview | str) -> dict[str, str]:
    """Parse a properties string (or its UTF-8 bytes) the way Java's ``string2messageProperties`` does."""
    text = data if isinstance(data, str) else str(data, "utf-8", "replace")
    result: dict[str, str] = {}
    if not text:
        return result
    for segment in text.split(PROPERTY_SEPARATOR):
        # Non-empty key and value around the first \x01 implies Java's "at least 3 chars" rule.
        key, sep, value = segment.partition(NAME_VALUE_SEPARATOR)
        if key and value and sep:
            result[key] = value
    return result


def find_property(data: bytes, key: str) -> str | None:
    """The value of ``key`` in encoded properties, as :func:`decode_properties` would give it
    (the last non-empty occurrence wins), without decoding the others; None if absent."""
    padded = _PS_BYTES + data
    needle = f"{PROPERTY_SEPARATOR}{key}{NAME_VALUE_SEPARATOR}".encode()
    end = len(padded)
    while (i := padded.rfind(needle, 0, end)) >= 0:
        start = i + len(needle)
        stop = padded.find(_PS_BYTES, start)
        value = padded[start : stop if stop >= 0 else len(padded)]
        if value:
            return str(value, "utf-8", "replace")
        end = i
    return None


def split_keys(keys: str | None) -> list[str]:
    """Split a ``KEYS`` property value on spaces, dropping empty items."""
    if not keys:
        return []
    return [k for k in keys.split(KEY_SEPARATOR) if k]
