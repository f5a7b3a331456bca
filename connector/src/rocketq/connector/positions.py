"""Resolving starting/ending positions against the brokers, and admission control arithmetic.

``resolve_start`` turns the ``startingOffsets`` / ``startingTimestamp`` /
``startingOffsetsByTimestamp`` option (already parsed into a :class:`StartSpec`) into concrete
offsets for every queue currently in the route: ``earliest`` = the queue's min offset,
``latest`` = its max offset (the next offset to be written), ``committed`` = the group's offset
on the broker (earliest when the group has none), timestamps via SEARCH_OFFSET_BY_TIMESTAMP.
Queues missing from a JSON spec start at earliest, like queues discovered later.

``limit_offsets`` implements ``maxMessagesPerTrigger``: the budget is shared across queues in
proportion to their backlog (Kafka's rule), remainders go to the largest backlogs, ties broken by
queue order, so the result is deterministic.

``narrow_ranges`` applies a batch read's pushed filters (rocketq.connector.pushdown): queue-offset
bounds directly, store-time bounds through SEARCH_OFFSET_BY_TIMESTAMP.
"""

from __future__ import annotations

from collections.abc import Mapping

from rocketq.client.remoting.vocabulary import MessageQueue
from rocketq.connector.access import BrokerAccess
from rocketq.connector.errors import OptionError
from rocketq.connector.offsets import EARLIEST, LATEST, OffsetMap, queue_text
from rocketq.connector.options import EndSpec, SourceOptions, StartMode, StartSpec
from rocketq.connector.pushdown import PushedScan


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
        return access.search_offset(queue, addr, spec.timestamp_ms)
    assert spec.offsets is not None
    value = spec.offsets.get(queue)
    if value is None or value == EARLIEST:
        return access.min_offset(queue, addr)
    if mode is StartMode.TIMESTAMP_PER_QUEUE:
        return access.search_offset(queue, addr, value)
    if value == LATEST:
        return access.max_offset(queue, addr)
    return value


def resolve_end(
    access: BrokerAccess, opts: SourceOptions, spec: EndSpec, queues: Mapping[MessageQueue, str]
) -> OffsetMap:
    """Concrete ending offsets for a batch read (``latest`` or JSON with -1 = latest)."""
    if spec.offsets is not None:
        _check_spec_queues("endingOffsets", spec.offsets, queues, opts)
    out: dict[MessageQueue, int] = {}
    for queue, addr in queues.items():
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
