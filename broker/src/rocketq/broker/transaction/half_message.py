"""Half-message rewrites: a prepared send into the half topic, and back out of it.

Theory of operation.  A transactional send (property ``TRAN_MSG=true``, sys flag
TRANSACTION_PREPARED) is not stored under its own topic: :func:`to_half_message` moves it to
``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0, remembering the real topic and queue in ``REAL_TOPIC`` /
``REAL_QID``.  Exactly as RocketMQ's ``TransactionalMessageBridge.parseHalfMessageInner`` does, the
two transaction bits of the sys flag are reset to "not a transaction" so the store dispatches the
record into the half topic's ConsumeQueue (a record whose sys flag says PREPARED never enters a
ConsumeQueue).  That ConsumeQueue is what the check pass walks; the half queue offset is the
``tranStateTableOffset`` the producer sends back in END_TRANSACTION.

On commit, :func:`restore_real_message` rebuilds the real message from the stored half record: real
topic and queue, sys flag with the COMMIT transaction value, ``REAL_*`` properties dropped,
``TRAN_PREPARED_QUEUE_OFFSET`` set, and ``UNIQ_KEY`` kept so the committed message's client msgId is
the transaction id.  :func:`renew_half_message` is the copy re-appended by a check pass (with the
check counter and the *origin* half offset, see ``service``); :func:`to_parked_message` is the copy
written to ``TRANS_CHECK_MAX_TIME_TOPIC`` after too many checks.  Bodies are carried exactly as
stored (compressed bodies stay compressed, with their sys flag bits), so callers must decode half
records with ``decompress=False``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from rocketq.broker.store.record_batch import MessageToStore
from rocketq.broker.store.status import AppendMessageResult
from rocketq.client.remoting.message import StoredMessage, encode_stored_message
from rocketq.client.remoting.properties import MessageConst, decode_properties
from rocketq.client.remoting.record_layout import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_TYPE_MASK,
)
from rocketq.client.remoting.vocabulary import (
    TRANS_CHECK_MAX_TIME_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
)

__all__ = [
    "CHECK_MAX_TIME_TOPIC",
    "HALF_TOPIC",
    "OP_TOPIC",
    "SYS_TRANS_GROUP",
    "check_request_body",
    "check_times",
    "immunity_ms",
    "is_transaction_prepared",
    "origin_offset",
    "parse_real_queue",
    "real_queue",
    "renew_half_message",
    "restore_real_message",
    "to_half_message",
    "to_parked_message",
]

HALF_TOPIC: Final = TRANS_HALF_TOPIC  # the store dispatches it without a property scan
OP_TOPIC: Final = TRANS_OP_HALF_TOPIC
CHECK_MAX_TIME_TOPIC: Final = TRANS_CHECK_MAX_TIME_TOPIC
#: The system consumer group whose offsets hold the check progress (``CID_SYS_RMQ_TRANS``).
SYS_TRANS_GROUP: Final = "CID_SYS_RMQ_TRANS"
HALF_QUEUE_ID: Final = 0

_COMMIT: Final = TRANSACTION_COMMIT_TYPE
#: Broker-owned properties a producer must not be able to preset on a half message.
_BROKER_OWNED: Final = (MessageConst.TRANSACTION_PREPARED_QUEUE_OFFSET, MessageConst.TRANSACTION_CHECK_TIMES)


def _reset_transaction_value(sys_flag: int, value: int) -> int:
    return (sys_flag & ~TRANSACTION_TYPE_MASK) | value


def _props(properties: Mapping[str, str] | str) -> dict[str, str]:
    return decode_properties(properties) if isinstance(properties, str) else dict(properties)


def is_transaction_prepared(properties: Mapping[str, str] | str) -> bool:
    """True when the send must go through the half topic (``TRAN_MSG`` is ``"true"``)."""
    value = _props(properties).get(MessageConst.TRANSACTION_PREPARED, "")
    return value.lower() == "true"


def to_half_message(msg: MessageToStore) -> MessageToStore:
    """The prepared ``msg`` rewritten into the half topic (queue 0, transaction bits reset)."""
    props = _props(msg.properties)
    for key in _BROKER_OWNED:
        props.pop(key, None)
    props[MessageConst.REAL_TOPIC] = msg.topic
    props[MessageConst.REAL_QUEUE_ID] = str(msg.queue_id)
    return MessageToStore.copy_of(
        msg,
        topic=HALF_TOPIC,
        queue_id=HALF_QUEUE_ID,
        properties=props,
        sys_flag=_reset_transaction_value(msg.sys_flag, TRANSACTION_NOT_TYPE),
    )


def real_queue(half: StoredMessage) -> tuple[str, int] | None:
    """(REAL_TOPIC, REAL_QID) of a half record, or None if they are missing or malformed."""
    return parse_real_queue(
        half.properties.get(MessageConst.REAL_TOPIC), half.properties.get(MessageConst.REAL_QUEUE_ID)
    )


def parse_real_queue(topic: str | None, qid: str | None) -> tuple[str, int] | None:
    """(topic, queue id) from the REAL_TOPIC and REAL_QID values, or None if missing or malformed."""
    if not topic or qid is None:
        return None
    try:
        return topic, int(qid)
    except ValueError:
        return None


def _int_property(half: StoredMessage, key: str) -> int | None:
    raw = half.properties.get(key)
    if raw is None:
        return None
    try:
        return int(raw)
    except ValueError:
        return None


def origin_offset(half: StoredMessage) -> int:
    """The half queue offset of the first copy of this transaction (its identity in the op log)."""
    origin = _int_property(half, MessageConst.TRANSACTION_PREPARED_QUEUE_OFFSET)
    if origin is None or origin < 0 or origin > half.queue_offset:
        return half.queue_offset
    return origin


def check_times(half: StoredMessage) -> int:
    """How many check-backs this half message has had (``TRANSACTION_CHECK_TIMES``, 0 if none)."""
    times = _int_property(half, MessageConst.TRANSACTION_CHECK_TIMES)
    return max(times, 0) if times is not None else 0


def immunity_ms(half: StoredMessage, default_ms: int) -> int | None:
    """The per-message first-check delay (``CHECK_IMMUNITY_TIME_IN_SECONDS``), None if not set.

    Like RocketMQ, a value that does not parse (or -1) means "the broker's transaction timeout".
    """
    if MessageConst.CHECK_IMMUNITY_TIME_IN_SECONDS not in half.properties:
        return None
    seconds = _int_property(half, MessageConst.CHECK_IMMUNITY_TIME_IN_SECONDS)
    if seconds is None or seconds < 0:
        return default_ms
    return seconds * 1000


def restore_real_message(
    half: StoredMessage, *, commit_log_offset: int, prepared_queue_offset: int
) -> MessageToStore:
    """The committed message: real topic and queue, COMMIT transaction bits, ``REAL_*`` dropped."""
    real = real_queue(half)
    if real is None:
        raise ValueError(f"half message at {half.physical_offset} has no REAL_TOPIC/REAL_QID")
    props = dict(half.properties)
    props.pop(MessageConst.REAL_TOPIC, None)
    props.pop(MessageConst.REAL_QUEUE_ID, None)
    props[MessageConst.TRANSACTION_PREPARED_QUEUE_OFFSET] = str(prepared_queue_offset)
    return MessageToStore.copy_of(
        half,
        topic=real[0],
        queue_id=real[1],
        properties=props,
        sys_flag=_reset_transaction_value(half.sys_flag, _COMMIT),
        prepared_transaction_offset=commit_log_offset,
    )


def renew_half_message(half: StoredMessage, *, origin: int, check_times: int | None = None) -> MessageToStore:
    """A copy of ``half`` for the end of the half queue, carrying ``origin`` and the check count."""
    props = dict(half.properties)
    props[MessageConst.TRANSACTION_PREPARED_QUEUE_OFFSET] = str(origin)
    if check_times is not None:
        props[MessageConst.TRANSACTION_CHECK_TIMES] = str(check_times)
    return _half_copy(half, HALF_TOPIC, HALF_QUEUE_ID, props)


def to_parked_message(half: StoredMessage, *, origin: int) -> MessageToStore:
    """The copy written to ``TRANS_CHECK_MAX_TIME_TOPIC`` queue 0 when checks are exhausted."""
    props = dict(half.properties)
    props[MessageConst.TRANSACTION_PREPARED_QUEUE_OFFSET] = str(origin)
    return _half_copy(half, CHECK_MAX_TIME_TOPIC, 0, props)


def _half_copy(half: StoredMessage, topic: str, queue_id: int, props: dict[str, str]) -> MessageToStore:
    """``half`` re-stored unchanged but for topic, queue and properties (WAIT_STORE_MSG_OK off)."""
    props[MessageConst.WAIT_STORE_MSG_OK] = "false"
    return MessageToStore.copy_of(half, topic=topic, queue_id=queue_id, properties=props)


def check_request_body(copy: MessageToStore, stored: AppendMessageResult) -> bytes:
    """The CHECK_TRANSACTION_STATE body: the stored half record as the producer should see it.

    As RocketMQ's ``AbstractTransactionalMessageCheckListener.sendCheckMessage`` does, the record
    carries the real topic and queue id (the producer's ``checkLocalTransaction`` sees its own
    topic); offsets, store time and every property (``REAL_*``, ``PGROUP``, ``UNIQ_KEY``,
    ``TRANSACTION_CHECK_TIMES``) are those of the stored half copy.
    """
    props = _props(copy.properties)
    topic = props.get(MessageConst.REAL_TOPIC, copy.topic)
    try:
        queue_id = int(props.get(MessageConst.REAL_QUEUE_ID, copy.queue_id))
    except ValueError:
        queue_id = copy.queue_id
    return encode_stored_message(
        topic=topic,
        queue_id=queue_id,
        flag=copy.flag,
        body=copy.body,
        properties=props,
        sys_flag=copy.sys_flag,
        born_timestamp=copy.born_timestamp,
        born_host=copy.born_host,
        store_host=copy.store_host,
        reconsume_times=copy.reconsume_times,
        prepared_transaction_offset=copy.prepared_transaction_offset,
        queue_offset=stored.queue_offset,
        physical_offset=stored.wrote_offset,
        store_timestamp=stored.store_timestamp,
    )
