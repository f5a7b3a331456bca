"""The counters the broker's request path bumps for the metrics exporter: plain ints, no locks.

The send path pays one call per answered send (:meth:`BrokerMetricsRecorder.record_send`: a dict
lookup, a few int additions and one ``bisect`` for the message-size bucket); the pull path one
call per pull; the RPC timer two ``perf_counter`` calls per request.  Everything else the exporter
shows is read from the broker's own tables when Prometheus scrapes (``collector.py``).

Threads.  ``record_*`` run on the broker's event loop, except :meth:`record_flush` (the store's
flush thread, the only writer of ``flush``).  The exporter's HTTP thread never reads these dicts
directly: :meth:`snapshot` copies them on the loop (the collector hops there), so a scrape never
sees a dict being resized.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field

from rocketq.broker.metrics.pop import PopMetricsRecorder, PopSnapshot, TimerFigures
from rocketq.client.remoting.vocabulary import (
    DLQ_GROUP_TOPIC_PREFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    SCHEDULE_TOPIC,
    TRANS_HALF_TOPIC,
)

__all__ = [
    "FLUSH_LATENCY_BOUNDS_S",
    "MESSAGE_SIZE_BOUNDS",
    "RPC_LATENCY_BOUNDS_MS",
    "BrokerMetricsRecorder",
    "Buckets",
    "InStats",
    "MessageType",
    "OutStats",
    "RecorderSnapshot",
]

#: RocketMQ 5's rocketmq_message_size buckets: 1 KiB, 4 KiB, 512 KiB, 1 MiB, 2 MiB, 4 MiB
MESSAGE_SIZE_BOUNDS: tuple[float, ...] = (
    1024,
    4096,
    512 * 1024,
    1024 * 1024,
    2 * 1024 * 1024,
    4 * 1024 * 1024,
)
#: RocketMQ 5's rocketmq_rpc_latency buckets, in milliseconds
RPC_LATENCY_BOUNDS_MS: tuple[float, ...] = (1, 3, 5, 7, 10, 100, 1000, 3000, 10000, 60000)
#: rocketq_store_flush_latency_seconds buckets
FLUSH_LATENCY_BOUNDS_S: tuple[float, ...] = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)


_GROUP_TOPIC_PREFIXES = (RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)


class MessageType:
    """The ``message_type`` label values (RocketMQ 5's TopicMessageType metrics values)."""

    NORMAL = "normal"
    DELAY = "delay"
    TRANSACTION = "transaction"


class Buckets:
    """One histogram's accumulator: a count per bucket (the last is +Inf), the sum and the count."""

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)
        self.total = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.total += value

    @property
    def count(self) -> int:
        return sum(self.counts)

    def copy(self) -> Buckets:
        out = Buckets.__new__(Buckets)
        out.bounds, out.counts, out.total = self.bounds, list(self.counts), self.total
        return out

    def cumulative(self) -> list[tuple[str, float]]:
        """Prometheus buckets: ``(le, observations <= le)``, ending with ``("+Inf", count)``."""
        out: list[tuple[str, float]] = []
        running = 0
        for bound, n in zip(self.bounds, self.counts, strict=False):
            running += n
            out.append((_le(bound), float(running)))
        out.append(("+Inf", float(running + self.counts[-1])))
        return out


def _le(bound: float) -> str:
    return str(int(bound)) if float(bound).is_integer() else repr(float(bound))


@dataclass(slots=True)
class InStats:
    """Messages stored for one (topic, message_type) since boot."""

    messages: int = 0
    bytes: int = 0
    size: Buckets = field(default_factory=lambda: Buckets(MESSAGE_SIZE_BOUNDS))


@dataclass(slots=True)
class OutStats:
    """Messages pulled by one (topic, consumer group) since boot."""

    messages: int = 0
    bytes: int = 0


@dataclass(frozen=True, slots=True)
class RecorderSnapshot:
    """A copy of the recorder taken on the loop, read by the exporter's thread."""

    messages_in: dict[tuple[str, str], InStats]
    messages_out: dict[tuple[str, str], OutStats]
    rpc: dict[tuple[int, int], Buckets]
    pull_offsets: dict[tuple[str, str], dict[int, int]]
    dlq: dict[tuple[str, str], int]
    commits: int
    rollbacks: int
    reads_hot: int
    reads_cold: int
    flush: Buckets
    pop: PopSnapshot | None = None
    timer: TimerFigures | None = None


class BrokerMetricsRecorder:
    """Counters since boot; one per broker, on ``BrokerContext.metrics`` when metrics are on."""

    def __init__(self, pop: PopMetricsRecorder | None = None) -> None:
        self.messages_in: dict[tuple[str, str], InStats] = {}
        self._normal_in: dict[str, InStats] = {}  # the same objects, for record_send's fast path
        self.messages_out: dict[tuple[str, str], OutStats] = {}
        self.rpc: dict[tuple[int, int], Buckets] = {}
        #: (group, topic) -> queue id -> next offset of the group's last pull (RocketMQ's pull offset)
        self.pull_offsets: dict[tuple[str, str], dict[int, int]] = {}
        self.dlq: dict[tuple[str, str], int] = {}
        self.commits = 0
        self.rollbacks = 0
        self.reads_hot = 0
        self.reads_cold = 0
        self.flush = Buckets(FLUSH_LATENCY_BOUNDS_S)
        #: POP revive-log traffic, in-flight counts and the timer's figures (``metrics/pop.py``)
        self.pop = pop if pop is not None else PopMetricsRecorder()

    def record_send(self, topic: str, stored_topic: str, count: int, wrote_bytes: int) -> None:
        """A send to ``topic`` stored ``count`` messages (``wrote_bytes``) in ``stored_topic``: the
        topic itself, SCHEDULE_TOPIC_XXXX (delay), the half topic (transaction) or a DLQ (a client's
        fallback for a failed send-back).  Sends to retry/DLQ topics are not counted in, as in RocketMQ.
        """
        if stored_topic == topic:  # the common case first: a str-keyed lookup, no second call
            stats = self._normal_in.get(topic)
            if stats is not None and count:
                stats.messages += count
                stats.bytes += wrote_bytes
                size, per_message = stats.size, wrote_bytes // count
                size.counts[bisect_left(size.bounds, per_message)] += 1  # Buckets.observe, inlined
                size.total += per_message
                return
        if stored_topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
            self.record_dlq(stored_topic[len(DLQ_GROUP_TOPIC_PREFIX) :], topic)
        if topic.startswith(_GROUP_TOPIC_PREFIXES):
            return
        if stored_topic == TRANS_HALF_TOPIC:
            self.record_in(topic, MessageType.TRANSACTION, count, wrote_bytes)
        elif stored_topic == SCHEDULE_TOPIC:
            self.record_in(topic, MessageType.DELAY, count, wrote_bytes)
        else:
            self.record_in(topic, MessageType.NORMAL, count, wrote_bytes)

    def record_in(self, topic: str, message_type: str, count: int, wrote_bytes: int) -> None:
        """``count`` messages of ``wrote_bytes`` stored bytes were accepted for ``topic``."""
        key = (topic, message_type)
        stats = self.messages_in.get(key)
        if stats is None:
            stats = self.messages_in[key] = InStats()
            if message_type == MessageType.NORMAL:
                self._normal_in[topic] = stats
        stats.messages += count
        stats.bytes += wrote_bytes
        size, per_message = stats.size, wrote_bytes // count if count else wrote_bytes
        size.counts[bisect_left(size.bounds, per_message)] += 1  # Buckets.observe, inlined: hot path
        size.total += per_message

    def record_out(
        self,
        group: str,
        topic: str,
        queue_id: int,
        next_offset: int,
        count: int,
        nbytes: int,
        hot: bool | None,
    ) -> None:
        """A pull of ``group`` returned ``count`` messages (``nbytes`` stored bytes) from the queue;
        ``hot``: whether the read started in the recent CommitLog tail (None: not estimated)."""
        key = (topic, group)
        stats = self.messages_out.get(key)
        if stats is None:
            stats = self.messages_out[key] = OutStats()
        stats.messages += count
        stats.bytes += nbytes
        queues = self.pull_offsets.get((group, topic))
        if queues is None:
            queues = self.pull_offsets[(group, topic)] = {}
        queues[queue_id] = next_offset
        if hot:
            self.reads_hot += 1
        elif hot is not None:
            self.reads_cold += 1

    def record_rpc(self, request_code: int, response_code: int, elapsed_ms: float) -> None:
        """One answered request (``BrokerMetrics.instrument`` inlines the same update per code)."""
        key = (request_code, response_code)
        buckets = self.rpc.get(key)
        if buckets is None:
            buckets = self.rpc[key] = Buckets(RPC_LATENCY_BOUNDS_MS)
        buckets.counts[bisect_left(buckets.bounds, elapsed_ms)] += 1  # Buckets.observe, inlined
        buckets.total += elapsed_ms

    def record_dlq(self, group: str, topic: str) -> None:
        """A message of ``group`` (consumed from ``topic``) went to ``%DLQ%<group>``."""
        key = (group, topic)
        self.dlq[key] = self.dlq.get(key, 0) + 1

    def record_end_transaction(self, commit: bool, count: int) -> None:
        """``count`` half messages were committed (``commit``) or rolled back."""
        if commit:
            self.commits += count
        else:
            self.rollbacks += count

    def record_flush(self, seconds: float) -> None:
        """One CommitLog flush that wrote something took ``seconds`` (flush thread)."""
        self.flush.observe(seconds)

    def snapshot(self) -> RecorderSnapshot:
        """A copy of every counter (call on the loop)."""
        return RecorderSnapshot(
            messages_in={
                k: InStats(v.messages, v.bytes, v.size.copy()) for k, v in list(self.messages_in.items())
            },
            messages_out={k: OutStats(v.messages, v.bytes) for k, v in list(self.messages_out.items())},
            rpc={k: v.copy() for k, v in list(self.rpc.items())},
            pull_offsets={k: dict(v) for k, v in list(self.pull_offsets.items())},
            dlq=dict(self.dlq),
            commits=self.commits,
            rollbacks=self.rollbacks,
            reads_hot=self.reads_hot,
            reads_cold=self.reads_cold,
            flush=self.flush.copy(),
            pop=self.pop.snapshot(),
            timer=self.pop.timer() if self.pop.timer is not None else None,
        )
