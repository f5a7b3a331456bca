"""The op log: which half messages are finished (committed or rolled back).

Every END_TRANSACTION that commits or rolls back appends one op message to
``RMQ_SYS_TRANS_OP_HALF_TOPIC`` queue 0, tag ``d`` (RocketMQ's ``REMOVETAG``), whose body is the
half-queue offset(s) it finishes as ASCII decimals separated by commas (the 5.x form; a 4.x op
holds a single offset, which is the same text without a comma).  rocketq writes the offset of the
half copy the producer named *and*, when it differs, the offset of the transaction's first copy
(its origin, see ``service``), so every copy of that transaction reads as finished.

Theory of operation.  The op log is the only persistent record of "finished"; the in-memory
:class:`DoneOffsets` bitmap (one bit per half-queue offset, trimmed at the half queue's minimum
offset) is rebuilt from it at start by :func:`read_op_offsets` and then kept current by the service
as it appends ops.  A bitmap keeps memory at one bit per retained half message however long the
broker runs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Final, TypeVar

import numpy as np
import numpy.typing as npt

from rocketq.broker.store.message_store import MessageStore
from rocketq.broker.store.record_batch import MessageToStore
from rocketq.broker.store.status import GetMessageStatus
from rocketq.broker.transaction.half_message import OP_TOPIC, SYS_TRANS_GROUP
from rocketq.client.errors import MessageFormatError
from rocketq.client.remoting.message import StoredMessage, decode_stored_message
from rocketq.client.remoting.msgid import new_uniq_key
from rocketq.client.remoting.properties import MessageConst

__all__ = [
    "REMOVE_TAG",
    "DoneOffsets",
    "decimal_columns",
    "decimal_digits",
    "encode_op_body",
    "iter_queue_reads",
    "iter_queue_records",
    "make_op_message",
    "parse_op_body",
    "read_op_offsets",
]

log = logging.getLogger(__name__)

REMOVE_TAG: Final = "d"
OP_QUEUE_ID: Final = 0
_READ_BATCH: Final = 256
_READ_BYTES: Final = 4 * 1024 * 1024
_BULK_OP_BODY: Final = 256
_POW10: Final = 10 ** np.arange(1, 19, dtype=np.int64)


def encode_op_body(half_offsets: Iterable[int]) -> bytes:
    """``b"12"`` or ``b"12,3"``: the distinct offsets (their order carries no meaning: a reader marks
    each as finished).  Short lists keep their first-occurrence order; long ones (a ranged commit
    ends tens of thousands) are written sorted, with numpy."""
    seen = list(dict.fromkeys(half_offsets))  # distinct, first occurrence order
    if not seen:
        raise ValueError("an op message needs at least one half offset")
    if len(seen) < _BULK_OP_BODY or min(seen) < 0:
        return ",".join(map(str, seen)).encode("ascii")
    offsets = np.sort(np.asarray(seen, dtype=np.int64))
    digits = decimal_digits(offsets)
    parts = []
    for d in np.unique(digits).tolist():
        m = np.empty((int((digits == d).sum()), d + 1), dtype=np.uint8)
        m[:, :d] = decimal_columns(offsets[digits == d], d)
        m[:, d] = 44  # ","
        parts.append(m.tobytes())
    return b"".join(parts)[:-1]


def decimal_digits(values: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """The number of decimal digits of each (non-negative) value."""
    out: npt.NDArray[np.int64] = np.searchsorted(_POW10, values, side="right") + 1
    return out


def decimal_columns(values: npt.NDArray[np.int64], digits: int) -> npt.NDArray[np.uint8]:
    """The ASCII decimals of values that all have ``digits`` digits, one row each."""
    m = np.empty((len(values), digits), dtype=np.uint8)
    rest = values.copy()
    for k in range(digits - 1, -1, -1):
        m[:, k] = 48 + rest % 10
        rest //= 10
    return m


def parse_op_body(body: bytes) -> list[int]:
    """The half offsets of an op body; items that are not integers are skipped (as Java does)."""
    out: list[int] = []
    for item in body.decode("utf-8", "replace").split(","):
        item = item.strip()
        if item.lstrip("-").isdigit():
            value = int(item)
            if value >= 0:
                out.append(value)
    return out


def make_op_message(
    half_offsets: Sequence[int], *, store_host: tuple[str, int], now_ms: int
) -> MessageToStore:
    """The op message finishing ``half_offsets`` (born and stored by the broker itself)."""
    props = {
        MessageConst.TAGS: REMOVE_TAG,
        MessageConst.UNIQ_KEY: new_uniq_key(),
        MessageConst.WAIT_STORE_MSG_OK: "false",
    }
    return MessageToStore(
        topic=OP_TOPIC,
        queue_id=OP_QUEUE_ID,
        body=encode_op_body(half_offsets),
        properties=props,
        born_timestamp=now_ms,
        born_host=store_host,
        store_host=store_host,
    )


class DoneOffsets:
    """A growable bitmap of finished half-queue offsets, starting at ``base``."""

    def __init__(self, base: int = 0) -> None:
        self._base = base
        self._bits = bytearray()

    @property
    def base(self) -> int:
        return self._base

    def add(self, offset: int) -> None:
        if offset < self._base:
            return  # below the retained half queue: nothing can reference it any more
        idx = offset - self._base
        byte = idx >> 3
        if byte >= len(self._bits):
            self._bits.extend(bytes(max(byte + 1 - len(self._bits), len(self._bits) // 2, 64)))
        self._bits[byte] |= 1 << (idx & 7)

    def __contains__(self, offset: object) -> bool:
        if not isinstance(offset, int) or offset < self._base:
            return False
        idx = offset - self._base
        byte = idx >> 3
        return byte < len(self._bits) and bool(self._bits[byte] & (1 << (idx & 7)))

    def add_many(self, offsets: Sequence[int] | npt.NDArray[np.int64]) -> None:
        """:meth:`add` of each of ``offsets`` (vectorised)."""
        if not len(offsets):
            return
        idx = np.asarray(offsets, dtype=np.int64) - self._base
        idx = idx[idx >= 0]
        if not len(idx):
            return
        need = int(idx.max() >> 3) + 1
        if need > len(self._bits):
            self._bits.extend(bytes(max(need - len(self._bits), len(self._bits) // 2, 64)))
        bits = np.frombuffer(self._bits, dtype=np.uint8)  # a view: released before the next resize
        np.bitwise_or.at(bits, idx >> 3, (1 << (idx & 7)).astype(np.uint8))
        del bits

    def contains_many(self, offsets: Sequence[int]) -> list[bool]:
        """``offset in self`` for each of ``offsets`` (vectorised)."""
        if not len(offsets):
            return []
        result: list[bool] = self.mask(np.asarray(offsets, dtype=np.int64)).tolist()
        return result

    def mask(self, offsets: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        """``offset in self`` for each of ``offsets``, as a boolean array."""
        idx = offsets - self._base
        byte = idx >> 3
        ok = (idx >= 0) & (byte < len(self._bits))
        if not self._bits:
            return np.zeros(len(offsets), dtype=bool)
        bits = np.frombuffer(self._bits, dtype=np.uint8)  # a view, released before returning
        hit = (bits[np.where(ok, byte, 0)] >> (idx & 7).astype(np.uint8)) & 1
        del bits
        out: npt.NDArray[np.bool_] = ok & (hit == 1)
        return out

    def trim(self, new_base: int) -> None:
        """Forget offsets below ``new_base`` (rounded down to a byte boundary)."""
        drop = (new_base - self._base) >> 3
        if drop <= 0:
            return
        del self._bits[:drop]
        self._base += drop * 8

    def __len__(self) -> int:
        return sum(bin(b).count("1") for b in self._bits)


T = TypeVar("T")


def iter_queue_records(
    store: MessageStore, topic: str, queue_id: int, start: int, end: int
) -> Iterator[StoredMessage]:
    """Decoded records (bodies as stored, not decompressed) of ``topic``/``queue_id`` in ``[start, end)``."""
    for batch in iter_queue_reads(store, topic, queue_id, start, end, _decode_as_stored):
        yield from batch


def _decode_as_stored(buffers: Sequence[memoryview]) -> list[StoredMessage]:
    out: list[StoredMessage] = []
    for buf in buffers:
        try:
            out.append(decode_stored_message(buf, decompress=False))
        except MessageFormatError as exc:
            log.error("unreadable record skipped: %s", exc)
    return out


def iter_queue_reads(
    store: MessageStore,
    topic: str,
    queue_id: int,
    start: int,
    end: int,
    decode: Callable[[Sequence[memoryview]], T],
    *,
    batch: int = _READ_BATCH,
) -> Iterator[T]:
    """``decode(buffers)`` of each read of ``topic``/``queue_id`` over ``[start, end)``, in order.

    ``decode`` gets the record buffers of one read (valid only during the call: it must copy what
    it keeps) and should skip unreadable records.  A read never returns records at or past
    ``end``; a read takes at most ``batch`` records and 4 MiB.  Holes (expired segments, removed
    records) are skipped; the iteration ends early if the queue cannot be read further.
    """
    offset = start
    while offset < end:
        res = store.get_message(
            SYS_TRANS_GROUP, topic, queue_id, offset, min(batch, end - offset), _READ_BYTES
        )
        if res.status is not GetMessageStatus.FOUND:
            if res.next_begin_offset > offset:
                offset = res.next_begin_offset
                continue
            return
        try:
            decoded = decode(res.buffers)
        finally:
            res.release()
        yield decoded
        offset = max(res.next_begin_offset, offset + 1)


def read_op_offsets(store: MessageStore, done: DoneOffsets) -> int:
    """Mark every half offset found in the op queue; return the number of op records read."""
    start = store.get_min_offset_in_queue(OP_TOPIC, OP_QUEUE_ID)
    end = store.get_max_offset_in_queue(OP_TOPIC, OP_QUEUE_ID)
    n = 0
    for rec in iter_queue_records(store, OP_TOPIC, OP_QUEUE_ID, start, end):
        if rec.properties.get(MessageConst.TAGS) != REMOVE_TAG:
            log.warning(
                "op record at op offset %d has tag %r, not %r: ignored",
                rec.queue_offset,
                rec.properties.get(MessageConst.TAGS),
                REMOVE_TAG,
            )
            continue
        for off in parse_op_body(rec.body):
            done.add(off)
        n += 1
    return n
