"""Resolving starting/ending positions against the brokers, and admission control arithmetic.

``resolve_start`` turns the ``startingOffsets`` / ``startingTimestamp`` /
``startingOffsetsByTimestamp`` option (already parsed into a :class:`StartSpec`) into concrete
offsets for every queue currently in the route: ``earliest`` = the queue's min offset,
``latest`` = its max offset (the next offset to be written), ``committed`` = the group's offset
on the broker (earliest when the group has none), timestamps via
:func:`first_stored_at_or_after`.  Queues missing from a JSON spec start at earliest, like queues
discovered later.  A queue with no message stored at or after the starting timestamp fails the
query naming the queue, or starts at its end (``startingOffsetsByTimestampStrategy``).
``resolve_end`` does the same for a batch read's end: ``endingOffsets``, or ``endingTimestamp`` /
``endingOffsetsByTimestamp`` (the first message stored at or after the time, exclusive; the
queue's end when there is none).

Timestamps.  SEARCH_OFFSET_BY_TIMESTAMP answers, as in RocketMQ, the first offset stored at or
after a time -- except for a time after every message, where it answers the *last* message.
:func:`first_stored_at_or_after` therefore checks the stored time of the message it got (one
small pull) and walks on while that message is older than the time.

``limit_offsets`` implements ``maxMessagesPerTrigger``: the budget is shared across queues in
proportion to their backlog (Kafka's rule), remainders go to the largest backlogs, ties broken by
queue order, so the result is deterministic.

``narrow_ranges`` applies a batch read's pushed filters (rocketq.connector.pushdown): queue-offset
bounds directly, store-time bounds through SEARCH_OFFSET_BY_TIMESTAMP.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from rocketq.client.model import PullStatus
from rocketq.client.remoting.vocabulary import MessageQueue
from rocketq.connector.access import BrokerAccess
from rocketq.connector.errors import OptionError
from rocketq.connector.offsets import EARLIEST, LATEST, OffsetMap, queue_text
from rocketq.connector.option_positions import TimestampStrategy
from rocketq.connector.options import EndSpec, SourceOptions, StartMode, StartSpec
from rocketq.connector.pushdown import PushedScan

#: messages per pull while checking stored times (usually one pull of the first one or two)
TIME_CHECK_PULL = 32


def _check_spec_queues(
    option: str, spec: OffsetMap, queues: Mapping[MessageQueue, str], opts: SourceOptions
) -> None:
    for queue in spec:
        if not opts.matches_topic(queue.topic):
            raise OptionError(option, f"topic {queue.topic!r} is not one of the subscribed topics")
        if queue not in queues:
            known = ", ".join(q.key for q in queues if q.topic == queue.topic) or "none"
            missing = f"queue {queue_text(queue)} does not exist"
            raise OptionError(option, f"{missing} (queues of {queue.topic}: {known})")


def resolve_start(
    access: BrokerAccess, opts: SourceOptions, spec: StartSpec, queues: Mapping[MessageQueue, str]
) -> OffsetMap:
    """Concrete starting offsets for ``queues``."""
    out: dict[MessageQueue, int] = {}
    if spec.offsets is not None:
        option = (
            "startingOffsetsByTimestamp" if spec.mode is StartMode.TIMESTAMP_PER_QUEUE else "startingOffsets"
        )
        _check_spec_queues(option, spec.offsets, queues, opts)
    for queue, addr in queues.items():
        out[queue] = start_of(access, opts, spec, queue, addr)
    return OffsetMap(out)


def start_of(
    access: BrokerAccess, opts: SourceOptions, spec: StartSpec, queue: MessageQueue, addr: str
) -> int:
    mode = spec.mode
    if mode is StartMode.EARLIEST:
        return access.min_offset(queue, addr)
    if mode is StartMode.LATEST:
        return access.max_offset(queue, addr)
    if mode is StartMode.COMMITTED:
        committed = access.committed_offset(queue, addr, opts.group)
        return access.min_offset(queue, addr) if committed is None or committed < 0 else committed
    if mode is StartMode.TIMESTAMP:
        assert spec.timestamp_ms is not None
        return _start_at_time(access, opts, spec, queue, addr, spec.timestamp_ms, "startingTimestamp")
    assert spec.offsets is not None
    value = spec.offsets.get(queue)
    if value is None or value == EARLIEST:
        return access.min_offset(queue, addr)
    if mode is StartMode.TIMESTAMP_PER_QUEUE:
        return _start_at_time(access, opts, spec, queue, addr, value, "startingOffsetsByTimestamp")
    if value == LATEST:
        return access.max_offset(queue, addr)
    return value


@dataclass(frozen=True, slots=True)
class TimeSearch:
    """Where a queue's messages stored at or after a time begin: ``offset``, or None when no
    message is (the time is after the last one, or the queue is empty); ``end`` is the queue's
    max offset when it was searched, ``last_stored_ms`` the store time of the newest message
    checked (None: none was)."""

    offset: int | None
    end: int
    last_stored_ms: int | None = None


def first_stored_at_or_after(
    access: BrokerAccess, queue: MessageQueue, addr: str, timestamp_ms: int, *, group: str
) -> TimeSearch:
    """The first message of ``queue`` whose store time is at or after ``timestamp_ms``.

    Store times are taken as non-decreasing along a queue (one broker appends a queue in time
    order, and the broker's search assumes it too); the walk from the searched offset is bounded
    by the queue's max offset at the start.
    """
    end = access.max_offset(queue, addr)
    offset = access.search_offset(queue, addr, timestamp_ms)
    last: int | None = None
    while offset < end:
        res = access.pull(
            queue,
            addr,
            offset,
            group=group,
            max_nums=min(TIME_CHECK_PULL, end - offset),
            max_bytes=1024 * 1024,
            sub_expression="*",
            timeout_ms=access.timeout_ms,
        )
        if res.status is not PullStatus.FOUND:
            if offset < res.min_offset:  # retention removed the searched message meanwhile
                offset = res.min_offset
                continue
            if res.status is PullStatus.NO_MATCHED_MSG and res.next_begin_offset > offset:
                offset = res.next_begin_offset
                continue
            break
        for message in res.messages:
            if message.queue_offset >= end:
                break
            if message.store_timestamp >= timestamp_ms:
                return TimeSearch(message.queue_offset, end, last)
            last = message.store_timestamp
        if res.next_begin_offset <= offset:
            break
        offset = res.next_begin_offset
    return TimeSearch(None, end, last)


def _start_at_time(
    access: BrokerAccess,
    opts: SourceOptions,
    spec: StartSpec,
    queue: MessageQueue,
    addr: str,
    timestamp_ms: int,
    option: str,
) -> int:
    """The first offset stored at or after ``timestamp_ms``; for a queue without one, its end
    (``startingOffsetsByTimestampStrategy=latest``) or an OptionError naming the queue."""
    found = first_stored_at_or_after(access, queue, addr, timestamp_ms, group=opts.group)
    if found.offset is not None:
        return found.offset
    if spec.strategy is TimestampStrategy.LATEST:
        return found.end
    if found.last_stored_ms is None:
        last = "it holds no message"
    else:
        last = f"its last message was stored at {found.last_stored_ms}"
    raise OptionError(
        option,
        f"queue {queue_text(queue)} has no message stored at or after {timestamp_ms} ({last}, "
        f"max offset {found.end}); set startingOffsetsByTimestampStrategy=latest to start such "
        "queues at their end, or give an earlier timestamp",
    )


def resolve_end(
    access: BrokerAccess, opts: SourceOptions, spec: EndSpec, queues: Mapping[MessageQueue, str]
) -> OffsetMap:
    """Concrete ending offsets for a batch read: ``latest``, JSON with -1 = latest, or the first
    message stored at or after ``endingTimestamp`` / ``endingOffsetsByTimestamp`` (the queue's
    end when there is none; queues missing from a JSON spec read to latest)."""
    given = spec.offsets if spec.offsets is not None else spec.timestamps
    if given is not None:
        _check_spec_queues(spec.option, given, queues, opts)
    out: dict[MessageQueue, int] = {}
    for queue, addr in queues.items():
        timestamp = spec.timestamp_ms
        if spec.timestamps is not None:
            timestamp = spec.timestamps.get(queue)
        if timestamp is not None:
            found = first_stored_at_or_after(access, queue, addr, timestamp, group=opts.group)
            out[queue] = found.end if found.offset is None else found.offset
            continue
        value = spec.offsets.get(queue, LATEST) if spec.offsets is not None else LATEST
        out[queue] = access.max_offset(queue, addr) if value == LATEST else value
    return OffsetMap(out)


def limit_offsets(
    bases: Mapping[MessageQueue, int], latest: Mapping[MessageQueue, int], max_rows: int | None
) -> dict[MessageQueue, int]:
    """End offsets reading at most ``max_rows`` messages in total from ``bases`` towards ``latest``."""
    avail = {q: max(0, latest.get(q, b) - b) for q, b in bases.items()}
    total = sum(avail.values())
    if max_rows is None or total <= max_rows:
        return {q: bases[q] + avail[q] for q in bases}
    share: dict[MessageQueue, int] = {}
    fractions: list[tuple[float, MessageQueue]] = []
    for q in sorted(bases):
        exact = max_rows * avail[q] / total
        share[q] = min(avail[q], int(exact))
        fractions.append((exact - int(exact), q))
    left = max_rows - sum(share.values())
    while left > 0:
        progressed = False
        for _, q in sorted(fractions, key=lambda f: (-f[0], f[1])):
            if left > 0 and share[q] < avail[q]:
                share[q] += 1
                left -= 1
                progressed = True
        if not progressed:
            break
    return {q: bases[q] + share[q] for q in bases}


def narrow_ranges(
    access: BrokerAccess,
    scan: PushedScan,
    queues: Mapping[MessageQueue, str],
    start: Mapping[MessageQueue, int],
    end: Mapping[MessageQueue, int],
) -> tuple[dict[MessageQueue, int], dict[MessageQueue, int]]:
    """``start``/``end`` of ``queues`` narrowed by the pushed offset and store-time bounds.

    The result is a superset of the matching messages (the executor re-checks every row):
    SEARCH_OFFSET_BY_TIMESTAMP gives the first offset stored at or after a time, and -- as in
    RocketMQ -- the queue's last offset for a time after every message, so an upper bound that
    lands on the last message keeps it.  Store times are taken as non-decreasing along a queue
    (one broker appends a queue in time order), which is what the broker's search assumes too.
    """
    begins: dict[MessageQueue, int] = {}
    ends: dict[MessageQueue, int] = {}
    for queue, addr in queues.items():
        lo, hi = start[queue], end[queue]
        if scan.offset_low is not None:
            lo = max(lo, scan.offset_low)
        if scan.offset_high is not None:
            hi = min(hi, scan.offset_high)
        if lo < hi and scan.time_low_ms is not None:
            lo = max(lo, access.search_offset(queue, addr, scan.time_low_ms))
        if lo < hi and scan.time_high_ms is not None:
            found = access.search_offset(queue, addr, scan.time_high_ms)
            if found >= access.max_offset(queue, addr) - 1:
                found += 1  # the last message: stored before the bound or not, read it and re-check
            hi = min(hi, found)
        begins[queue], ends[queue] = lo, max(lo, hi)
    return begins, ends
