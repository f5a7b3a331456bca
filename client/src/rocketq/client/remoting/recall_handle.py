"""The recall handle (RocketMQ's ``RecallMessageHandle.HandleV1``).

``Base64URL("v1 <topic> <brokerName> <timestampMs> <uniqId>")`` with padding, as Java's
``Base64.getUrlEncoder()``; the timestamp is the message's ``TIMER_OUT_MS + 1``, so that the
tombstone of a recall, floored to the precision, lands in the slot of the message it recalls.
Decoding accepts the handle with or without padding, as Java's decoder does.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

__all__ = ["RecallHandle", "RecallHandleError", "build_recall_handle", "decode_recall_handle"]

_VERSION_1 = "v1"


class RecallHandleError(ValueError):
    """The handle is not a recall handle (``DecoderException("recall handle is invalid")``)."""


@dataclass(frozen=True, slots=True)
class RecallHandle:
    topic: str
    broker_name: str
    timestamp: str
    message_id: str


def build_recall_handle(topic: str, broker_name: str, timestamp_ms: int | str, message_id: str) -> str:
    raw = " ".join((_VERSION_1, topic, broker_name, str(timestamp_ms), message_id))
    return base64.urlsafe_b64encode(raw.encode("utf-8")).decode("ascii")


def decode_recall_handle(handle: str | None) -> RecallHandle:
    if not handle:
        raise RecallHandleError("recall handle is invalid")
    try:
        padded = handle + "=" * (-len(handle) % 4)
        raw = base64.b64decode(padded.encode("ascii"), altchars=b"-_", validate=True).decode("utf-8")
    except (binascii.Error, UnicodeError, ValueError):
        raise RecallHandleError("recall handle is invalid") from None
    items = raw.split(" ")
    if items[0] != _VERSION_1 or len(items) < 5:
        raise RecallHandleError("recall handle is invalid")
    return RecallHandle(items[1], items[2], items[3], items[4])
