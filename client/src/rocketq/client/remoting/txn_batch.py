"""The rocketq batched-transaction extension: field names and the ranged END_TRANSACTION body.

rocketq brokers accept two additions to RocketMQ's transactional messages (docs/transactions.md,
"rocketq extensions: batched transactions"), advertised by ``"rocketqTransactionBatch": "1"`` in
the KVTable of GET_BROKER_RUNTIME_INFO (:data:`FEATURE_KEY`):

* a SEND_BATCH_MESSAGE whose sysFlag has TRANSACTION_PREPARED stores all its inner messages as
  half messages in one append; the response carries ``rqHalfCount`` (:data:`HALF_COUNT_FIELD`);
* an END_TRANSACTION with ``rqRanges=true`` (:data:`RANGES_FIELD`) ends every half message named
  by its JSON body, ``{"ranges": [[firstHalfQueueOffset, count], ...]}``, and answers
  ``rqEnded`` / ``rqSkipped`` (:data:`ENDED_FIELD`, :data:`SKIPPED_FIELD`).

This module is the sans-IO part both sides share: the names, the limits' defaults, and the codec
of the ranges body (which validates shape and values and raises :class:`MessageFormatError`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from itertools import pairwise
from typing import Final

from rocketq.client.errors import MessageFormatError

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_MESSAGES",
    "ENDED_FIELD",
    "FEATURE_KEY",
    "HALF_COUNT_FIELD",
    "RANGES_FIELD",
    "SKIPPED_FIELD",
    "decode_ranges_body",
    "encode_ranges_body",
]

#: GET_BROKER_RUNTIME_INFO table key; value "1" when the broker serves the extension.
FEATURE_KEY: Final = "rocketqTransactionBatch"
#: SEND_BATCH_MESSAGE response ext field: how many half messages the batch stored.
HALF_COUNT_FIELD: Final = "rqHalfCount"
#: END_TRANSACTION request ext field ("true"): the body lists half-offset ranges.
RANGES_FIELD: Final = "rqRanges"
#: Ranged END_TRANSACTION response ext fields: half messages ended now / already ended before.
ENDED_FIELD: Final = "rqEnded"
SKIPPED_FIELD: Final = "rqSkipped"
#: Broker defaults of ``transactionBatchMaxMessages`` / ``transactionBatchMaxBytes``.
DEFAULT_MAX_MESSAGES: Final = 100_000
DEFAULT_MAX_BYTES: Final = 64 * 1024 * 1024

_MAX_OFFSET: Final = 2**63 - 1


def encode_ranges_body(ranges: Iterable[tuple[int, int]]) -> bytes:
    """``{"ranges":[[first,count],...]}`` as compact UTF-8 JSON (validated like the decoder)."""
    items = [[int(first), int(count)] for first, count in ranges]
    body = json.dumps({"ranges": items}, separators=(",", ":")).encode()
    decode_ranges_body(body)
    return body


def decode_ranges_body(body: bytes | bytearray | memoryview) -> list[tuple[int, int]]:
    """The ``(first half-queue offset, count)`` pairs of a ranged END_TRANSACTION body.

    Raises MessageFormatError when the body is not that JSON shape, is empty, or holds a negative
    offset, a count < 1 or overlapping ranges.
    """
    try:
        doc = json.loads(bytes(body).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise MessageFormatError(f"ranged END_TRANSACTION body is not JSON: {exc}") from exc
    raw = doc.get("ranges") if isinstance(doc, dict) else None
    if not isinstance(raw, list) or not raw:
        raise MessageFormatError('ranged END_TRANSACTION body needs a non-empty "ranges" list')
    out: list[tuple[int, int]] = []
    for item in raw:
        if (
            not isinstance(item, list)
            or len(item) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in item)
        ):
            raise MessageFormatError(f"bad range {item!r}: expected [firstHalfQueueOffset, count]")
        first, count = item
        if first < 0 or count < 1 or first + count > _MAX_OFFSET:
            raise MessageFormatError(f"bad range {item!r}: offset must be >= 0 and count >= 1")
        out.append((first, count))
    spans = sorted(out)
    for (a, n), (b, _) in pairwise(spans):
        if a + n > b:
            raise MessageFormatError(f"ranges [{a}, {n}] and [{b}, ...] overlap")
    return out
