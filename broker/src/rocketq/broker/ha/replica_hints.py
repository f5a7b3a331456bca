"""Dispatch hints for replicated CommitLog bytes: a slave dispatches them as cheaply as its master.

A master's appends leave :class:`~rocketq.broker.store.commit_log.DispatchHint`\\ s, so its
dispatch builds ConsumeQueue units and index entries for whole batches at once from columns
instead of decoding every record.  A slave's appends are raw bytes; without hints its dispatch
decodes each record (properties into a dict, one index insert per key), which costs the slave
more CPU per message than the master spends on the whole send, and on a machine shared with its
master that CPU is taken from the master.

Theory of operation.  :func:`replica_hints` gathers, for all records of a chunk at once (numpy
fancy indexing at the record starts that the :class:`~.aligner.RecordAligner`'s walk found), the
fixed header fields dispatch needs, the topic and the properties' span, and splits the records
where the queue changes, the queue offsets stop being consecutive or the store timestamp changes:
each run (one batch of the master, or one message) becomes a hint.  Records
that dispatch treats specially (transactional prepared and rolled-back records, the schedule
topic's delivery times, unscanned topics) and records whose parts do not add up to their size get
no hint: dispatch falls back to decoding records
wherever no hint starts at its offset, so they are dispatched as before.  Hints describe bytes, the
CommitLog stays the truth: the result is what record decoding would build (hint dispatch is tested
byte-identical to it, and ``test_ha_service`` compares a slave's queues with its master's).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from rocketq.broker.store.commit_log import UNSCANNED_TOPICS, DispatchHint
from rocketq.broker.store.props_scan import Buffer, PropsColumn
from rocketq.client.remoting.record_layout import (
    HOST_KIND_SHIFT,
    IPV4_HEADER_SIZE,
    MAGIC_V1,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    TRANSACTION_TYPE_MASK,
    header_dtype_spec,
)
from rocketq.client.remoting.vocabulary import SCHEDULE_TOPIC

__all__ = ["replica_hints"]

I64 = npt.NDArray[np.int64]
Bool = npt.NDArray[np.bool_]
_NO_HINT = frozenset({SCHEDULE_TOPIC, *UNSCANNED_TOPICS})
#: the fixed header of a record with IPv4 hosts, as a numpy record: one gather reads all its fields
#: (records with an IPv6 host are left to decoding)
_HEADER = np.dtype(header_dtype_spec(0))
assert _HEADER.itemsize == IPV4_HEADER_SIZE


def _rows(data: Buffer, pos: I64, width: int) -> npt.NDArray[np.void]:
    """The ``width`` bytes at each of ``pos`` (>= 0; clipped to the end of ``data``: the checks
    below reject what does not fit), as opaque ``V<width>`` items, gathered through a zero-copy
    window of every ``width``-byte run of bytes (built directly: ``as_strided`` costs more than the
    gather for a few hundred rows; whole items copy at about twice the speed of rows of bytes)."""
    n = len(data) - width + 1
    window = np.ndarray((n,), dtype=f"V{width}", buffer=data, strides=(1,))
    out: npt.NDArray[np.void] = window[np.minimum(pos, n - 1)]
    return out


def _tails(
    data: Buffer, u8: npt.NDArray[np.uint8], s: I64, h: npt.NDArray[np.void]
) -> tuple[I64, I64, I64, I64, Bool]:
    """Where each record's topic and properties are and how long, and whether a hint may describe
    it: not for records that dispatch must decode (not in a ConsumeQueue: prepared or rolled back;
    an IPv6 host, a V2 topic) or that are malformed (their parts do not add up to their size)."""
    sys_flag, body_len = h["sys_flag"], h["body_length"]
    t_pos = s + IPV4_HEADER_SIZE + np.maximum(body_len, 0)
    t_len = u8[np.minimum(t_pos, len(u8) - 1)].astype(np.int64)  # a V1 (1-byte) topic length
    p_pos = t_pos + 1 + t_len
    p_len = _rows(data, p_pos, 2).view(">i2").astype(np.int64)
    p_start = p_pos + 2
    tran = sys_flag & TRANSACTION_TYPE_MASK
    ok = (tran != TRANSACTION_PREPARED_TYPE) & (tran != TRANSACTION_ROLLBACK_TYPE)
    ok &= (sys_flag >> HOST_KIND_SHIFT) & 3 == 0
    ok &= (h["magic"] == MAGIC_V1) & (body_len >= 0) & (p_len >= 0) & (p_start + p_len - s == h["total_size"])
    return t_pos + 1, t_len, p_start, p_len, ok


def replica_hints(data: Buffer, base: int, starts: Sequence[int] | I64) -> list[DispatchHint]:
    """Hints for the whole records of ``data`` (CommitLog bytes at offset ``base``) that start at
    ``starts``, in CommitLog order; records that need decoding are left out."""
    if len(starts) == 0 or len(data) < IPV4_HEADER_SIZE:
        return []
    u8 = np.frombuffer(data, dtype=np.uint8)
    s = np.asarray(starts, dtype=np.int64)
    h = _rows(data, s, IPV4_HEADER_SIZE).view(_HEADER)
    size, queue_id, qo, store_ts = h["total_size"], h["queue_id"], h["queue_offset"], h["store_timestamp"]
    t_start, t_len, p_start, p_len, ok = _tails(data, u8, s, h)
    cut = np.ones(len(s), dtype=bool)  # a new run starts at each True
    cut[1:] = (
        (queue_id[1:] != queue_id[:-1])
        | (qo[1:] != qo[:-1] + 1)
        | (store_ts[1:] != store_ts[:-1])
        | (s[1:] != s[:-1] + size[:-1])  # a blank filler in between
        | ~ok[1:]
        | ~ok[:-1]
        | _topic_changes(data, t_start, np.where(ok, t_len, 0))
    )
    runs = itertools.pairwise([*np.flatnonzero(cut).tolist(), len(s)])
    names: dict[bytes, str | None] = {}
    hints: list[DispatchHint] = []
    column = PropsColumn(data, p_start, p_len)  # the runs' columns are parts: scanned once
    for i0, i1 in runs:
        topic = _topic(names, bytes(data[t_start[i0] : t_start[i0] + t_len[i0]])) if ok[i0] else None
        if topic is None or topic in _NO_HINT:
            continue
        # a column over ``data`` (no slice per record): dispatch joins a run with one strided copy
        props = column.part(i0, i1)
        hints.append(
            DispatchHint(
                base=base + int(s[i0]),
                end=base + int(s[i1 - 1] + size[i1 - 1]),
                topic=topic,
                queue_id=int(queue_id[i0]),
                first_queue_offset=int(qo[i0]),
                phys=base + s[i0:i1],
                sizes=size[i0:i1],
                in_cq=[True] * (i1 - i0),
                all_in_cq=True,
                properties=props,
                plen=p_len[i0:i1],
                unindexed=None,
                tags_codes=None,
                keys=None,
                store_timestamp=int(store_ts[i0]),
            )
        )
    return hints


def _topic(names: dict[bytes, str | None], raw: bytes) -> str | None:
    """The topic's name (cached per chunk); None if it is no UTF-8 (decoding reports that)."""
    if raw not in names:
        try:
            names[raw] = raw.decode()
        except UnicodeDecodeError:
            names[raw] = None
    return names[raw]


def _topic_changes(data: Buffer, t_start: I64, t_len: I64) -> Bool:
    """For each record after the first: its topic differs from the previous record's.  Rows of
    the longest topic's width are compared as opaque byte strings: where the lengths are equal the
    rows are exactly the topics; rows of shorter topics carry the bytes after them, which can only
    split a run that need not be split (a hint per part), never join two topics."""
    width = int(t_len.max())
    changed: Bool = t_len[1:] != t_len[:-1]
    if width == 0:
        return changed
    rows = _rows(data, t_start, width)
    changed |= rows[1:] != rows[:-1]
    return changed
