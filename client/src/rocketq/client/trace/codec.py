"""RocketMQ's message-trace text format (``TraceDataEncoder``): encode and decode trace lines.

A trace message's body is UTF-8 text: lines ended by FIELD_SPLITOR (char 2), fields separated by
CONTENT_SPLITOR (char 1).  The first field names the :class:`TraceType`; the rest, by position::

    Pub            type ts region group topic msgId tags keys storeHost bodyLen cost msgType
                   offsetMsgId success                                  (14 fields; 13 without
                   offsetMsgId in old clients, a 15th clientHost in some versions)
    SubBefore      type ts region group requestId msgId retryTimes keys  (8 fields)
    SubAfter       type requestId msgId cost success keys contextCode ts group
                   (9 fields; 6, 7 and 8 in older clients)
    EndTransaction type ts region group topic msgId tags keys storeHost msgType transactionId
                   transactionState fromTransactionCheck               (13 fields)

Booleans are ``true``/``false``, enums by ordinal (msgType, contextCode) or name (transaction
state); absent tags, keys and transaction ids are written as Java writes a null, ``null``.  The
encoder writes the newest 4.x forms (14-field Pub, 9-field SubAfter), which every 4.x decoder
reads; the decoder accepts the older lengths too and skips lines of unknown types, as Java does.
Separator characters inside a value would break the line, so the encoder writes them as spaces.

The trace message's keys (what QUERY_MESSAGE by key finds) are each line's msgId and keys
(:func:`trace_keys`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

from rocketq.client.errors import MessageFormatError
from rocketq.client.trace.model import (
    ConsumeReturnType,
    LocalTransactionState,
    MessageType,
    TraceRecord,
    TraceType,
)

__all__ = [
    "CONTENT_SPLITOR",
    "FIELD_SPLITOR",
    "decode_trace_data",
    "encode_record",
    "encode_records",
    "trace_keys",
]

CONTENT_SPLITOR: Final = "\x01"
FIELD_SPLITOR: Final = "\x02"
_NULL: Final = "null"

_PUB_MIN_FIELDS: Final = 13
_SUB_BEFORE_FIELDS: Final = 8
_SUB_AFTER_MIN_FIELDS: Final = 6
_END_TX_FIELDS: Final = 13


def _text(value: str | None) -> str:
    if value is None:
        return _NULL
    if CONTENT_SPLITOR in value or FIELD_SPLITOR in value:
        return value.replace(CONTENT_SPLITOR, " ").replace(FIELD_SPLITOR, " ")
    return value


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _fields(r: TraceRecord) -> list[str]:
    t = r.trace_type
    if t is TraceType.Pub:
        return [
            t.value, str(r.timestamp_ms), _text(r.region_id), _text(r.group_name), _text(r.topic),
            _text(r.msg_id), _text(r.tags), _text(r.keys), _text(r.store_host), str(r.body_length),
            str(r.cost_time_ms), str(int(r.msg_type)), _text(r.offset_msg_id), _bool(r.success),
        ]  # fmt: skip
    if t is TraceType.SubBefore:
        return [
            t.value, str(r.timestamp_ms), _text(r.region_id), _text(r.group_name), _text(r.request_id),
            _text(r.msg_id), str(r.retry_times), _text(r.keys),
        ]  # fmt: skip
    if t is TraceType.SubAfter:
        return [
            t.value, _text(r.request_id), _text(r.msg_id), str(r.cost_time_ms), _bool(r.success),
            _text(r.keys), str(int(r.context_code)), str(r.timestamp_ms), _text(r.group_name),
        ]  # fmt: skip
    state = r.transaction_state or LocalTransactionState.UNKNOW
    return [
        t.value, str(r.timestamp_ms), _text(r.region_id), _text(r.group_name), _text(r.topic),
        _text(r.msg_id), _text(r.tags), _text(r.keys), _text(r.store_host), str(int(r.msg_type)),
        _text(r.transaction_id), state.value, _bool(r.from_transaction_check),
    ]  # fmt: skip


def encode_record(record: TraceRecord) -> str:
    """One trace line, FIELD_SPLITOR included."""
    return CONTENT_SPLITOR.join(_fields(record)) + FIELD_SPLITOR


def encode_records(records: Iterable[TraceRecord]) -> str:
    """The body text of a trace message carrying ``records``."""
    return "".join(encode_record(r) for r in records)


def trace_keys(records: Iterable[TraceRecord]) -> list[str]:
    """The keys of a trace message: each record's msgId and its keys, first occurrence order."""
    seen: dict[str, None] = {}
    for r in records:
        if r.msg_id:
            seen[r.msg_id] = None
        if r.keys:
            seen[r.keys] = None
    return list(seen)


def _opt(value: str) -> str | None:
    return None if value == _NULL or value == "" else value


def _parse_bool(value: str) -> bool:
    return value.strip().lower() == "true"  # Java's Boolean.parseBoolean


def _pub(f: Sequence[str]) -> TraceRecord:
    n = len(f)
    return TraceRecord(
        trace_type=TraceType.Pub,
        timestamp_ms=int(f[1]),
        region_id=f[2],
        group_name=f[3],
        topic=f[4],
        msg_id=f[5],
        tags=_opt(f[6]),
        keys=_opt(f[7]),
        store_host=f[8],
        body_length=int(f[9]),
        cost_time_ms=int(f[10]),
        msg_type=MessageType(int(f[11])),
        offset_msg_id=f[12] if n >= 14 else "",
        success=_parse_bool(f[13] if n >= 14 else f[12]),
        client_host=f[14] if n >= 15 else "",
    )


def _sub_before(f: Sequence[str]) -> TraceRecord:
    return TraceRecord(
        trace_type=TraceType.SubBefore,
        timestamp_ms=int(f[1]),
        region_id=f[2],
        group_name=f[3],
        request_id=f[4],
        msg_id=f[5],
        retry_times=int(f[6]),
        keys=_opt(f[7]),
    )


def _sub_after(f: Sequence[str]) -> TraceRecord:
    n = len(f)
    return TraceRecord(
        trace_type=TraceType.SubAfter,
        request_id=f[1],
        msg_id=f[2],
        cost_time_ms=int(f[3]),
        success=_parse_bool(f[4]),
        keys=_opt(f[5]),
        context_code=ConsumeReturnType(int(f[6])) if n >= 7 else ConsumeReturnType.SUCCESS,
        timestamp_ms=int(f[7]) if n >= 8 else 0,
        group_name=f[8] if n >= 9 else "",
    )


def _end_transaction(f: Sequence[str]) -> TraceRecord:
    return TraceRecord(
        trace_type=TraceType.EndTransaction,
        timestamp_ms=int(f[1]),
        region_id=f[2],
        group_name=f[3],
        topic=f[4],
        msg_id=f[5],
        tags=_opt(f[6]),
        keys=_opt(f[7]),
        store_host=f[8],
        msg_type=MessageType(int(f[9])),
        transaction_id=_opt(f[10]),
        transaction_state=LocalTransactionState(f[11]),
        from_transaction_check=_parse_bool(f[12]),
    )


_DECODERS = {
    TraceType.Pub.value: (_PUB_MIN_FIELDS, _pub),
    TraceType.SubBefore.value: (_SUB_BEFORE_FIELDS, _sub_before),
    TraceType.SubAfter.value: (_SUB_AFTER_MIN_FIELDS, _sub_after),
    TraceType.EndTransaction.value: (_END_TX_FIELDS, _end_transaction),
}


def decode_trace_data(text: str) -> list[TraceRecord]:
    """The records of a trace message body; lines of unknown types are skipped.

    Raises MessageFormatError (with the line) for a line of a known type that is too short or
    has a field that does not parse.
    """
    records: list[TraceRecord] = []
    for line in text.split(FIELD_SPLITOR):
        if not line:
            continue
        f = line.split(CONTENT_SPLITOR)
        entry = _DECODERS.get(f[0])
        if entry is None:
            continue
        min_fields, decode = entry
        if len(f) < min_fields:
            raise MessageFormatError(f"a {f[0]} trace line needs {min_fields} fields, got {len(f)}: {line!r}")
        try:
            records.append(decode(f))
        except ValueError as exc:
            raise MessageFormatError(f"bad {f[0]} trace line {line!r}: {exc}") from exc
    return records
