"""Read path: pull messages through a ConsumeQueue, fetch records by CommitLog offset or by key.

Theory of operation.  A pull looks up the queue's units from the requested logical offset in one
``numpy`` view over the mapped ConsumeQueue segment (no per-unit objects), filters them in bulk
(blank units, data below the CommitLog minimum, tag codes), applies the message-count and byte
limits with a cumulative sum, then slices ``memoryview``s of the records out of the mapped
CommitLog segments: the returned buffers are the stored bytes, never copies.  Statuses and the
next offset follow RocketMQ's ``DefaultMessageStore.getMessage``.

A ``confirm_offset`` (controller mode, RocketMQ 5's ``readUnCommitted=false``) cuts the read at the
first unit whose record ends beyond it: the units are cut, so ``nextBeginOffset`` never passes an
unconfirmed record, and a read finding nothing confirmed answers as at the queue's end.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from rocketq.broker.store.commit_log import CommitLog
from rocketq.broker.store.consume_queue import UNIT, ConsumeQueue
from rocketq.broker.store.index_file import IndexService
from rocketq.broker.store.status import GetMessageResult, GetMessageStatus, QueryMessageResult

_BLANK_SIZE = 0x7FFFFFFF
#: Up to this many messages per pull, plain struct unpacking beats numpy's per-call overhead.
_FAST_PATH_MAX_MSGS = 128


def _result(status: GetMessageStatus, next_offset: int, min_o: int, max_o: int) -> GetMessageResult:
    return GetMessageResult(status=status, next_begin_offset=next_offset, min_offset=min_o, max_offset=max_o)


def get_message(
    commit_log: CommitLog,
    cq: ConsumeQueue | None,
    offset: int,
    max_msg_nums: int,
    max_total_bytes: int,
    tag_codes: frozenset[int] | None,
    confirm_offset: int | None = None,
) -> GetMessageResult:
    if cq is None:
        return _result(GetMessageStatus.NO_MESSAGE_IN_QUEUE, 0, 0, 0)
    min_o, max_o = cq.min_offset_in_queue, cq.max_offset_in_queue
    if max_o == 0:
        return _result(GetMessageStatus.NO_MESSAGE_IN_QUEUE, 0, min_o, max_o)
    if offset < min_o:
        return _result(GetMessageStatus.OFFSET_TOO_SMALL, min_o, min_o, max_o)
    if offset == max_o:
        return _result(GetMessageStatus.OFFSET_OVERFLOW_ONE, offset, min_o, max_o)
    if offset > max_o:
        return _result(GetMessageStatus.OFFSET_OVERFLOW_BADLY, min_o if min_o == 0 else max_o, min_o, max_o)
    if tag_codes is None and max_msg_nums <= _FAST_PATH_MAX_MSGS:
        fast = _get_unfiltered(
            commit_log, cq, offset, max(max_msg_nums, 1), max_total_bytes, min_o, max_o, confirm_offset
        )
        if fast is not None:
            return fast
    max_units = max(16000, max(max_msg_nums, 1) * 20) // 20
    try:
        units = cq.units_from(offset, max_units)
    except ValueError:  # the segment was deleted under us
        units = None
    if units is None:
        per_file = cq.units_per_file
        return _result(GetMessageStatus.OFFSET_FOUND_NULL, (offset // per_file + 1) * per_file, min_o, max_o)
    if confirm_offset is not None:
        units = units[: _confirmed_count(units, confirm_offset)]
        if not len(units):
            return _result(GetMessageStatus.OFFSET_OVERFLOW_ONE, offset, min_o, max_o)
    offs = units["offset"]
    sizes = units["size"]
    mask = sizes != _BLANK_SIZE
    min_phy = commit_log.min_offset
    removed = mask & (offs < min_phy)
    mask &= offs >= min_phy
    if tag_codes is not None:
        mask &= np.isin(units["tags_code"], np.fromiter(tag_codes, dtype=np.int64, count=len(tag_codes)))
    sel = np.flatnonzero(mask)
    take = min(len(sel), max(max_msg_nums, 1))
    if take:
        cum = np.cumsum(sizes[sel[:take]].astype(np.int64))
        by_bytes = int(np.searchsorted(cum, max_total_bytes, side="right"))
        take = max(1, min(take, by_bytes))
    next_offset = offset + (int(sel[take]) if take < len(sel) else len(units))
    taken_sizes = sizes[sel[:take]].tolist()
    buffers = _views(commit_log, offs[sel[:take]].tolist(), taken_sizes)
    if buffers:
        status = GetMessageStatus.FOUND
    elif removed.any():
        status = GetMessageStatus.MESSAGE_WAS_REMOVING
    else:
        status = GetMessageStatus.NO_MATCHED_MESSAGE
    queue_offsets = (sel[:take] + offset).tolist() if buffers else []
    return GetMessageResult(
        status=status,
        next_begin_offset=next_offset,
        min_offset=min_o,
        max_offset=max_o,
        buffers=buffers,
        msg_count=len(buffers),
        total_bytes=sum(taken_sizes) if len(buffers) == take else sum(len(b) for b in buffers),
        queue_offsets=queue_offsets if len(queue_offsets) == len(buffers) else [],
    )


def _get_unfiltered(
    commit_log: CommitLog,
    cq: ConsumeQueue,
    offset: int,
    max_msgs: int,
    max_bytes: int,
    min_o: int,
    max_o: int,
    confirm_offset: int | None,
) -> GetMessageResult | None:
    """The common pull (no tag filter, no blank or deleted units): plain struct unpacking, no numpy.

    Returns None when the general path is needed (also when nothing from ``offset`` is confirmed).
    """
    limit = confirm_offset if confirm_offset is not None else 1 << 63
    try:
        raw = cq.raw_units(offset, max_msgs)
    except ValueError:
        return None
    if raw is None:
        return None
    min_phy = commit_log.min_offset
    offs: list[int] = []
    sizes: list[int] = []
    total = 0
    for off, size, _tag in UNIT.iter_unpack(raw):
        if size == _BLANK_SIZE or off < min_phy:
            return None
        if (offs and total + size > max_bytes) or off + size > limit:
            break
        offs.append(off)
        sizes.append(size)
        total += size
    buffers = _views(commit_log, offs, sizes)
    if not offs or len(buffers) != len(offs):
        return None
    return GetMessageResult(
        status=GetMessageStatus.FOUND,
        next_begin_offset=offset + len(offs),
        min_offset=min_o,
        max_offset=max_o,
        buffers=buffers,
        msg_count=len(buffers),
        total_bytes=total,
        queue_offsets=list(range(offset, offset + len(offs))),
    )


def _confirmed_count(units: npt.NDArray[np.void], confirm_offset: int) -> int:
    """How many leading units hold records ending at or before ``confirm_offset``.

    A queue's records lie in CommitLog order, so the first unconfirmed unit ends the readable
    prefix (blank units count as readable: they hold no record).
    """
    sizes = units["size"].astype(np.int64)
    beyond = (units["offset"].astype(np.int64) + sizes > confirm_offset) & (sizes != _BLANK_SIZE)
    hits = np.flatnonzero(beyond)
    return int(hits[0]) if len(hits) else len(units)


def confirmed_max_offset(cq: ConsumeQueue, confirm_offset: int) -> int:
    """The queue offset after the last unit whose record ends at or before ``confirm_offset``
    (binary search over the units: a queue's records lie in CommitLog order)."""
    lo, hi = cq.min_offset_in_queue, cq.max_offset_in_queue  # answer in [lo, hi]
    while lo < hi:
        mid = (lo + hi) // 2
        try:
            unit = cq.unit_at(mid)
        except ValueError:  # the segment was deleted under us
            unit = None
        if unit is None or unit[1] == _BLANK_SIZE or unit[0] + unit[1] <= confirm_offset:
            lo = mid + 1
        else:
            hi = mid
    return lo


@dataclass(frozen=True, slots=True, eq=False)
class CopiedRecords:
    """Records of consecutive queue offsets, copied out of the CommitLog back to back."""

    data: bytes
    starts: npt.NDArray[np.int64]  # of each record in ``data``
    sizes: npt.NDArray[np.int64]  # as the ConsumeQueue units give them
    phys: npt.NDArray[np.int64]  # CommitLog offsets


def copy_records(
    commit_log: CommitLog, cq: ConsumeQueue, ranges: Sequence[tuple[int, int]]
) -> CopiedRecords | None:
    """The records at queue offsets ``[first, first + count)`` of each of ``ranges``, in order, as
    one copy; None if one of them is not in the queue (not dispatched yet, a hole, a removed segment).

    Records written by one append are contiguous in the CommitLog: each contiguous span is copied
    with one slice of its segment, so a span of thousands of records costs one memcpy.
    """
    offs: list[npt.NDArray[np.int64]] = []
    lens: list[npt.NDArray[np.int64]] = []
    try:
        for first, count in ranges:
            got = 0
            while got < count:
                units = cq.units_from(first + got, count - got)
                if units is None:
                    return None
                offs.append(units["offset"].astype(np.int64))
                lens.append(units["size"].astype(np.int64))
                got += len(units)
        if not offs:
            return None
        phys, sizes = np.concatenate(offs), np.concatenate(lens)
        if (sizes == _BLANK_SIZE).any() or (sizes <= 0).any() or int(phys.min()) < commit_log.min_offset:
            return None
        ends = phys + sizes
        cuts = (np.flatnonzero(ends[:-1] != phys[1:]) + 1).tolist()
        views = []
        for lo, hi in zip([0, *cuts], [*cuts, len(phys)], strict=True):
            view = commit_log.view(int(phys[lo]), int(ends[hi - 1] - phys[lo]))
            if view is None:  # across segments (never one append) or no longer stored
                return None
            views.append(view)
        data = b"".join(views)
    except ValueError:  # a segment was released under us
        return None
    return CopiedRecords(data=data, starts=np.cumsum(sizes) - sizes, sizes=sizes, phys=phys)


def _views(commit_log: CommitLog, offs: list[int], sizes: list[int]) -> list[memoryview]:
    if not offs:
        return []
    mfq = commit_log.mfq
    first = mfq.find_mapped_file_by_offset(offs[0])
    last = mfq.find_mapped_file_by_offset(offs[-1])
    if first is not None and first is last:
        base = first.file_from_offset
        if offs[-1] - base + sizes[-1] <= first.wrote_position:
            try:
                seg = first.buffer
                return [seg[o - base : o - base + s] for o, s in zip(offs, sizes, strict=True)]
            except ValueError:  # released: the segment was deleted
                return []
    out = []
    for o, s in zip(offs, sizes, strict=True):
        try:
            v = commit_log.view(o, s)
        except ValueError:
            v = None
        if v is not None:
            out.append(v)
    return out


def in_page_cache(commit_log: CommitLog, cq: ConsumeQueue | None, offset: int, max_behind_bytes: int) -> bool:
    """True if a read from ``offset`` cannot touch the disk: nothing to read there, or its first
    record lies within ``max_behind_bytes`` of the CommitLog's end (recently written, so in the
    page cache; RocketMQ's ``checkInMemByConsumeOffset`` heuristic)."""
    if cq is None or not cq.min_offset_in_queue <= offset < cq.max_offset_in_queue:
        return True
    try:
        raw = cq.raw_units(offset, 1)
    except ValueError:  # the segment was deleted under us
        return False
    if raw is None:
        return False
    return bool(commit_log.max_offset - UNIT.unpack_from(raw)[0] <= max_behind_bytes)


def query_by_key(
    commit_log: CommitLog,
    index_service: IndexService,
    topic: str,
    key: str,
    max_num: int,
    begin_ts: int,
    end_ts: int,
) -> QueryMessageResult:
    """Views of at most ``max_num`` records the index lists for ``key`` in ``[begin_ts, end_ts]``,
    each once, skipping those below the CommitLog minimum."""
    offsets, last_ts, last_phy = index_service.query_offsets(topic, key, max_num, begin_ts, end_ts)
    seen: set[int] = set()
    buffers, found = [], []
    for off in offsets:
        if off in seen or off < commit_log.min_offset:
            continue
        seen.add(off)
        size = commit_log.record_size_at(off)
        view = commit_log.view(off, size) if size > 0 else None
        if view is not None:
            buffers.append(view)
            found.append(off)
    return QueryMessageResult(
        buffers=buffers,
        phy_offsets=found,
        index_last_update_timestamp=last_ts,
        index_last_update_phy_offset=last_phy,
    )
