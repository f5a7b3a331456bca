"""Ranged END_TRANSACTION by bytes: the committed records rebuilt from the stored half records.

A Spark micro-batch commit ends tens of thousands of half messages per queue.  The column reader
(:mod:`.half_read`) turns each into Python values that the store then encodes again; this module
skips both for the records rocketq's prepared batches store, and costs about as much as the
original append did.

Theory of operation.  :func:`load_bulk` copies the half records of every range out of the
CommitLog (:meth:`MessageStore.copy_queue_records`: one slice per run of records written by one
append) and checks all of them at once with numpy: MAGIC_V1, IPv4 hosts, one store host, sizes
agreeing with the ConsumeQueue, the half topic, and properties that all end with the same tail
from their last ``PGROUP`` on: ``PGROUP`` = the request's group, ..., ``REAL_TOPIC``,
``REAL_QID`` (one destination for the whole request).  None may hold
``TRAN_PREPARED_QUEUE_OFFSET`` (a check-back copy, whose origin differs) or ``DELAY`` (the
schedule topic rewrite); those keys are looked for in the whole copy, bodies included, so a body
that happens to hold one only costs the fast path.  (The broker writes every half message's
properties from one map, or through :func:`.ranged.half_properties`, which takes a batch only
when each message has ``PGROUP`` once and no ``REAL_*`` before the broker appends them: those
keys are never there twice.)  Anything else returns None and the caller takes the general path
(:func:`.ranged.load_ranges`), which also gives the precise refusal.

:func:`committed_batches` then writes each committed record as four parts for the store
(:func:`~rocketq.broker.store.record_batch.prepare_parts`): the half's header with TOTALSIZE,
QUEUEID, SYSFLAG (commit) and PREPAREDTRANSACTIONOFFSET (the half's CommitLog offset) patched
in bulk; the body as stored; a *middle* of the real topic, PROPERTIESLENGTH and
``TRAN_PREPARED_QUEUE_OFFSET=<half offset>``, made for all records as one byte matrix; and the
stored properties without the ``REAL_*`` suffix.  That is the message :func:`.ranged.committed_message`
makes, with the origin property first instead of last (property order carries no meaning; the
tests compare the two paths record by record).  The body CRC is the half's (same body).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import TYPE_CHECKING, Final

import numpy as np
import numpy.typing as npt

from rocketq.broker.store.record_batch import HEADER_DTYPES, PreparedBatch, prepare_parts
from rocketq.broker.transaction.half_message import HALF_QUEUE_ID, HALF_TOPIC, parse_real_queue
from rocketq.broker.transaction.op_log import decimal_columns, decimal_digits
from rocketq.broker.transaction.ranged import RangedRefused
from rocketq.client.remoting.codes import ResponseCode
from rocketq.client.remoting.msgid import bytes_to_ip
from rocketq.client.remoting.properties import MessageConst, find_property
from rocketq.client.remoting.record_layout import (
    HOST_V6_FLAGS,
    IPV4_HEADER_SIZE,
    MAGIC_V1,
    MAX_PROPERTIES_SIZE,
    MAX_TOPIC_LENGTH_V1,
    MIN_TAIL_SIZE,
    PORT_SIZE,
    PROPERTIES_LENGTH_SIZE,
    PROPERTY_SEPARATOR,
    TOPIC_LENGTH_SIZE_V1,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_TYPE_MASK,
)

if TYPE_CHECKING:
    from rocketq.broker.store.message_store import MessageStore

__all__ = ["BulkHalves", "committed_batches", "load_bulk"]

I64 = npt.NDArray[np.int64]

#: Below this many records the column reader is as fast.
BULK_MIN: Final = 64
_HDR: Final = IPV4_HEADER_SIZE
_HDR_DTYPE: Final = HEADER_DTYPES[0]
assert _HDR_DTYPE.itemsize == _HDR and _HDR % 8 == 0  # gathered as whole 8-byte words
_COMMIT: Final = TRANSACTION_COMMIT_TYPE
_PS_CODE: Final = ord(PROPERTY_SEPARATOR)
_HALF_TOPIC_B: Final = HALF_TOPIC.encode()
_ORIGIN_PREFIX: Final = f"{MessageConst.TRANSACTION_PREPARED_QUEUE_OFFSET}\x01".encode()


def _needle(key: str) -> bytes:
    return f"\x02{key}\x01".encode()


_GROUP_NEEDLE: Final = _needle(MessageConst.PRODUCER_GROUP)
_ABSENT: Final = (
    _needle(MessageConst.TRANSACTION_PREPARED_QUEUE_OFFSET),
    _needle(MessageConst.DELAY_TIME_LEVEL),
)


def _word_prefix(key: bytes) -> tuple[np.uint64, np.uint64]:
    """(value, mask) matching a word (8 bytes, native order) that starts with ``key``'s first 8 bytes."""
    head = key[:8]
    value = np.frombuffer(head.ljust(8, b"\0"), dtype=np.uint64)[0]
    mask = np.frombuffer(b"\xff" * len(head) + b"\0" * (8 - len(head)), dtype=np.uint64)[0]
    return value, mask


#: the same keys at the start of a record's properties (a key longer than 8 bytes is matched by its
#: first 8: another key starting alike only sends the request the general way)
_ABSENT_AT_START: Final = tuple(_word_prefix(n[1:]) for n in _ABSENT)


@dataclass(slots=True, eq=False)
class BulkHalves:
    """The half records of a ranged request, in range order, as one copy (see the module)."""

    data: bytes
    hdr: npt.NDArray[np.void]  # the stored headers
    starts: I64
    phys: I64
    queue_offsets: I64
    body_len: I64
    props_start: I64  # where each record's properties start in ``data``
    prefix_len: I64  # their length without the REAL_* suffix
    real: tuple[str, int]
    store_host: tuple[str, int]
    wait_store: bool

    def __len__(self) -> int:
        return len(self.queue_offsets)


def load_bulk(
    store: MessageStore, ranges: Sequence[tuple[int, int]], producer_group: str, *, max_bytes: int
) -> BulkHalves | None:
    """The half records of ``ranges`` when all are the usual ones (see the module), else None.

    Raises :class:`RangedRefused` when they add up to more than ``max_bytes``.
    """
    n = sum(count for _, count in ranges)
    if n < BULK_MIN or min(count for _, count in ranges) <= 0:
        return None
    spans = sorted(ranges)
    if any(f0 + c0 > f1 for (f0, c0), (f1, _) in pairwise(spans)):
        return None  # overlapping ranges: the general path ends each once
    qos = np.concatenate([np.arange(first, first + count, dtype=np.int64) for first, count in ranges])
    rec = store.copy_queue_records(HALF_TOPIC, HALF_QUEUE_ID, ranges)
    if rec is None:
        return None
    if len(rec.data) > max_bytes:
        raise RangedRefused(
            ResponseCode.MESSAGE_ILLEGAL,
            (
                f"ranged END_TRANSACTION loads more than transactionBatchMaxBytes={max_bytes} bytes of "
                f"messages: split it into several requests"
            ),
        )
    data, starts, sizes, phys = rec.data, rec.starts, rec.sizes, rec.phys
    return _check(data, starts, sizes, phys, qos, producer_group)


def _words(data: bytes) -> npt.NDArray[np.uint64]:
    """A read-only view where element ``p`` is the 8 bytes at ``data[p:p + 8]``: gathering words
    instead of bytes moves a record's field in one step."""
    return np.ndarray(shape=(len(data) - 7,), dtype=np.uint64, buffer=data, strides=(1,))


def _same(words: npt.NDArray[np.uint64], pos: I64, expected: bytes) -> bool:
    """True if ``expected`` (at least 8 bytes) is at every ``pos``: compared a word at a time."""
    at = np.append(np.arange(0, len(expected) - 7, 8), len(expected) - 8)
    want = np.frombuffer(b"".join(expected[k : k + 8] for k in at.tolist()), dtype=np.uint64)
    return bool((words[pos[:, None] + at] == want).all())


def _check(data: bytes, starts: I64, sizes: I64, phys: I64, qos: I64, group: str) -> BulkHalves | None:
    tlen = len(_HALF_TOPIC_B)
    if (sizes < _HDR + MIN_TAIL_SIZE + tlen).any():
        return None
    words = _words(data)
    hdr = words[starts[:, None] + np.arange(0, _HDR, 8)].view(_HDR_DTYPE).ravel()
    if (
        (hdr["total_size"] != sizes).any()
        or (hdr["magic"] != MAGIC_V1).any()
        or (hdr["sys_flag"] & HOST_V6_FLAGS).any()
    ):
        return None  # (an IPv6 host: another header layout)
    store_hosts = hdr["store_host"]
    if (store_hosts != store_hosts[0]).any():
        return None
    body_len = hdr["body_length"].astype(np.int64)
    tpos = starts + _HDR + body_len
    ends = starts + sizes
    if (body_len < 0).any() or (tpos + MIN_TAIL_SIZE + tlen > ends).any():
        return None
    if not _same(words, tpos, bytes((tlen,)) + _HALF_TOPIC_B):
        return None
    a = np.frombuffer(data, dtype=np.uint8)
    plen_pos = tpos + TOPIC_LENGTH_SIZE_V1 + tlen  # PROPERTIESLENGTH, big-endian
    ppos = plen_pos + PROPERTIES_LENGTH_SIZE
    if (ppos + a[plen_pos].astype(np.int64) * 256 + a[plen_pos + 1] != ends).any():
        return None
    first = data[int(ppos[0]) : int(ends[0])]
    real_topic, real_qid = (
        find_property(first, k) for k in (MessageConst.REAL_TOPIC, MessageConst.REAL_QUEUE_ID)
    )
    real = parse_real_queue(real_topic, real_qid)
    if real is None or len(real[0].encode()) > MAX_TOPIC_LENGTH_V1 or not 0 <= real[1] < 2**31:
        return None
    suffix = (
        f"{MessageConst.REAL_TOPIC}\x01{real_topic}\x02{MessageConst.REAL_QUEUE_ID}\x01{real_qid}\x02"
    ).encode()
    # The tail of the first record's properties from its last PGROUP: every record must end with
    # it, so every record's (last) PGROUP is the group and its REAL_* are the destination.
    at = (b"\x02" + first).rfind(_GROUP_NEEDLE)
    tail = (b"\x02" + first)[at:]
    if (
        at < 0
        or not tail.endswith(b"\x02" + suffix)
        or not tail.startswith(_GROUP_NEEDLE + group.encode() + b"\x02")
    ):
        return None
    tail_at = ends - len(tail)
    if (tail_at < ppos - 1).any():
        return None
    # (a tail that starts the properties has PROPERTIESLENGTH before it, not a \x02: not compared)
    if len(tail) < 9 or not _same(words, tail_at + 1, tail[1:]):
        return None
    if ((tail_at >= ppos) & (a[np.maximum(tail_at, 0)] != _PS_CODE)).any():
        return None
    # Renewed copies (their origin differs) and delayed messages take the general path.  Looked for
    # in the whole copy: a body that happens to hold one only sends the request the general way.
    if any(needle in data for needle in _ABSENT):
        return None
    first_words = words[np.minimum(ppos, len(words) - 1)]  # ... and at the start of the properties,
    for value, mask in _ABSENT_AT_START:  # where no \x02 precedes the key
        if ((first_words & mask) == value).any():
            return None
    cut = ends - len(suffix)
    raw_host = bytes(store_hosts[0])
    return BulkHalves(
        data=data,
        hdr=hdr,
        starts=starts,
        phys=phys,
        queue_offsets=qos,
        body_len=body_len,
        props_start=ppos,
        prefix_len=cut - ppos,
        real=real,
        store_host=(
            bytes_to_ip(raw_host[:-PORT_SIZE]),
            int.from_bytes(raw_host[-PORT_SIZE:], "big", signed=True),
        ),
        wait_store=b"WAIT\x01false\x02" not in first,
    )


def _middles(topic: bytes, props_len: I64, origins: I64, digits: I64) -> list[bytes]:
    """Per record: topic length, topic, PROPERTIESLENGTH, ``TRAN_PREPARED_QUEUE_OFFSET=<origin>``:
    one byte matrix per number of digits."""
    widths = np.unique(digits).tolist()
    if len(widths) == 1:
        return _middle_rows(topic, props_len, origins, widths[0])
    result: list[bytes] = [b""] * len(origins)  # offsets crossing a power of ten: rare
    for d in widths:
        sel = np.flatnonzero(digits == d)
        for i, row in zip(sel.tolist(), _middle_rows(topic, props_len[sel], origins[sel], d), strict=True):
            result[i] = row
    return result


def _middle_rows(topic: bytes, props_len: I64, origins: I64, digits: int) -> list[bytes]:
    head = bytes((len(topic),)) + topic  # V1 topic length, topic
    plen_end = len(head) + PROPERTIES_LENGTH_SIZE
    width = plen_end + len(_ORIGIN_PREFIX) + digits + 1
    m = np.empty((len(origins), width), dtype=np.uint8)
    m[:, : len(head)] = np.frombuffer(head, dtype=np.uint8)
    m[:, len(head) : plen_end] = props_len.astype(">i2").view(np.uint8).reshape(-1, PROPERTIES_LENGTH_SIZE)
    at = plen_end + len(_ORIGIN_PREFIX)
    m[:, plen_end:at] = np.frombuffer(_ORIGIN_PREFIX, dtype=np.uint8)
    m[:, at : at + digits] = decimal_columns(origins, digits)
    m[:, -1] = _PS_CODE
    rows: list[bytes] = m.view(f"V{width}").ravel().tolist()
    return rows


def committed_batches(
    h: BulkHalves, keep: I64, max_batch_bytes: int, max_properties: int
) -> list[PreparedBatch] | None:
    """The real messages of records ``keep`` (indices into ``h``), as store batches of at most
    ``max_batch_bytes`` each, in order; None if a committed message would be unstorable (the
    general path then reports it)."""
    if not len(keep):
        return []
    topic = h.real[0].encode()
    starts = h.starts[keep]
    hdr = h.hdr[keep]  # a copy
    blen = h.body_len[keep]
    prefix_len = h.prefix_len[keep]
    pstart = h.props_start[keep]
    prefixes = list(map(h.data.__getitem__, map(slice, pstart.tolist(), (pstart + prefix_len).tolist())))
    origins = h.queue_offsets[keep]
    digits = decimal_digits(origins)
    props_len = prefix_len + len(_ORIGIN_PREFIX) + digits + 1
    if int(props_len.max()) > min(max_properties, MAX_PROPERTIES_SIZE):
        return None
    middles = _middles(topic, props_len, origins, digits)
    mid_len = MIN_TAIL_SIZE + len(topic) + props_len - prefix_len
    sizes = _HDR + blen + mid_len + prefix_len
    hdr["total_size"] = sizes
    hdr["queue_id"] = h.real[1]
    hdr["sys_flag"] = (hdr["sys_flag"] & ~TRANSACTION_TYPE_MASK) | _COMMIT
    hdr["prepared_transaction_offset"] = h.phys[keep]
    bstart = starts + _HDR
    bodies = list(map(h.data.__getitem__, map(slice, bstart.tolist(), (bstart + blen).tolist())))
    out = []
    cum = np.cumsum(sizes)
    lo, n = 0, len(keep)
    while lo < n:
        before = int(cum[lo - 1]) if lo else 0
        hi = max(lo + 1, int(np.searchsorted(cum, before + max_batch_bytes, side="right")))
        out.append(
            prepare_parts(
                topic=h.real[0],
                queue_id=h.real[1],
                store_host=h.store_host,
                hdr=hdr[lo:hi],
                bodies=bodies[lo:hi],
                middles=middles[lo:hi],
                properties=prefixes[lo:hi],
                properties_len=prefix_len[lo:hi],
                wait_store=h.wait_store,
                want_msg_ids=False,
            )
        )
        lo = hi
    return out
