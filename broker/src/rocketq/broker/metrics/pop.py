"""POP and timer figures for the metrics exporter: revive-log traffic, POP in-flight counts, timer backlog.

The POP side follows RocketMQ 5's ``PopMetricsManager`` and ``PopInflightMessageCounter``:

* ``revive_in`` (``rocketmq_pop_revive_in_message_total``): checkpoints (CK) and acks (ACK) put
  into the revive log, by group, topic, record type and put status;
* ``revive_out`` (``rocketmq_pop_revive_out_message_total``): records the revive service read, by
  group, topic, revive queue and type;
* ``revive_retry`` (``rocketmq_pop_revive_retry_messages_total``): un-acked messages the revive
  service put back into the POP retry topic (or the DLQ), by group, topic and put status;
* ``in_flight`` (``rocketmq_consumer_inflight_messages`` of a POP group): messages popped and not
  yet acked or revived, per (group, topic, queue).  A checkpoint adds its messages, an ack (or a
  change of invisible time's ack of the old checkpoint) takes one per acked offset, a revive takes
  the revived ones.  As Java, records of pops made before this broker started are ignored (the
  count starts at zero with the process), so the figure never goes below zero.

Records are classified by their tag and decoded from the JSON the POP processors wrote, with
metrics on or off (``BrokerContext.pop_stats``: ``mqadmin popStatus`` reads the in-flight counts
too).  Everything runs on the broker's event loop; the exporter's thread reads
:meth:`PopMetricsRecorder.snapshot` copies.

The timer side is a :class:`TimerFigures` read when Prometheus scrapes (plain ints the timer
thread writes; a torn read is impossible for a Python int).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from rocketq.broker.pop.records import ACK_TAG, BATCH_ACK_TAG, CK_TAG, AckMsg, PopCheckPoint
from rocketq.broker.store.record_batch import MessageToStore
from rocketq.broker.store.status import PutMessageResult
from rocketq.client.remoting.properties import MessageConst

__all__ = [
    "PopMetricsRecorder",
    "PopSnapshot",
    "ReviveRecordType",
    "TimerFigures",
    "TimerStoreView",
    "timer_figures",
]


class ReviveRecordType:
    """``PopReviveMessageType`` names, the ``revive_message_type`` label."""

    CK = "CK"
    ACK = "ACK"


@dataclass(frozen=True, slots=True)
class PopSnapshot:
    revive_in: dict[tuple[str, str, str, str], int]
    revive_out: dict[tuple[str, str, int, str], int]
    revive_retry: dict[tuple[str, str, str], int]
    in_flight: dict[tuple[str, str], int]


@dataclass(frozen=True, slots=True)
class TimerFigures:
    """What a scrape reads from the timer store (see docs/observability.md for the meanings)."""

    enqueue_lag: int
    dequeue_latency_ms: int
    enqueued: int
    delivered: int


class TimerStoreView(Protocol):
    """What :func:`timer_figures` reads of ``TimerMessageStore``."""

    precision_ms: int
    curr_read_time_ms: int
    clock: Callable[[], int]

    @property
    def backlog(self) -> int: ...

    @property
    def stats(self) -> Any: ...


def timer_figures(timer: TimerStoreView) -> Callable[[], TimerFigures]:
    """The scrape-time reader of one timer store: Java's enqueue lag (timer-topic messages not yet
    in the wheel), dequeue latency (how far the wheel's read time is behind now, ms) and totals."""

    def read() -> TimerFigures:
        now = timer.clock() // timer.precision_ms * timer.precision_ms
        behind = max(now - timer.curr_read_time_ms, 0) if timer.curr_read_time_ms > 0 else 0
        stats = timer.stats
        return TimerFigures(timer.backlog, behind, int(stats.enqueued), int(stats.delivered))

    return read


class PopMetricsRecorder:
    """Counters since boot; ``BrokerContext.pop_stats`` (and ``ctx.metrics.pop`` with metrics on)."""

    def __init__(self, clock_ms: Callable[[], int] = lambda: int(time.time() * 1000)) -> None:
        self.started_ms = clock_ms()
        self.revive_in: dict[tuple[str, str, str, str], int] = {}
        self.revive_out: dict[tuple[str, str, int, str], int] = {}
        self.revive_retry: dict[tuple[str, str, str], int] = {}
        #: (group, topic) -> queue id -> messages popped and not yet acked or revived
        self.in_flight: dict[tuple[str, str], dict[int, int]] = {}
        #: read by a scrape when the timer service runs (set by the master services)
        self.timer: Callable[[], TimerFigures] | None = None

    # -- the revive log --------------------------------------------------------------------------
    def record_revive_puts(self, msgs: Sequence[MessageToStore], results: Sequence[PutMessageResult]) -> None:
        """Checkpoints and acks put by a pop, an ack or a change of invisible time.

        Reads the few fields it needs from the records' JSON (the short keys the POP processors
        write) instead of building PopCheckPoint / AckMsg objects: this runs on every pop and ack."""
        for msg, result in zip(msgs, results, strict=False):
            props = msg.properties
            tag = props.get(MessageConst.TAGS) if not isinstance(props, str) else None
            if tag == CK_TAG:
                kind = ReviveRecordType.CK
            elif tag in (ACK_TAG, BATCH_ACK_TAG):
                kind = ReviveRecordType.ACK
            else:
                continue
            try:
                doc = json.loads(msg.body)
                group, topic, queue_id, pop_time = str(doc["c"]), str(doc["t"]), int(doc["q"]), int(doc["pt"])
                if kind == ReviveRecordType.CK:
                    delta = len(doc.get("d") or ())
                else:
                    delta = -len(doc["aol"]) if doc.get("aol") else -1
            except (ValueError, KeyError, TypeError):
                continue
            key = (group, topic, kind, result.status.name)
            self.revive_in[key] = self.revive_in.get(key, 0) + 1
            if result.is_ok and pop_time >= self.started_ms:
                self._add_in_flight(group, topic, queue_id, delta)

    def record_revive_read(self, record: PopCheckPoint | AckMsg, revive_qid: int) -> None:
        """The revive service read one record of revive queue ``revive_qid``."""
        if isinstance(record, PopCheckPoint):
            key = (record.cid, record.topic, revive_qid, ReviveRecordType.CK)
        else:
            key = (record.consumer_group, record.topic, revive_qid, ReviveRecordType.ACK)
        self.revive_out[key] = self.revive_out.get(key, 0) + 1

    def record_revived(self, ck: PopCheckPoint, put_status: str, *, ok: bool) -> None:
        """One un-acked message of ``ck`` was put back (retry topic or DLQ) with ``put_status``."""
        key = (ck.cid, ck.topic, put_status)
        self.revive_retry[key] = self.revive_retry.get(key, 0) + 1
        if ok and ck.pop_time >= self.started_ms:
            self._add_in_flight(ck.cid, ck.topic, ck.queue_id, -1)

    def _add_in_flight(self, group: str, topic: str, queue_id: int, delta: int) -> None:
        queues = self.in_flight.setdefault((group, topic), {})
        value = queues.get(queue_id, 0) + delta
        if value > 0:
            queues[queue_id] = value
        else:  # Java drops the counter at zero: late acks of a revived message cannot go below
            queues.pop(queue_id, None)
            if not queues:
                del self.in_flight[(group, topic)]

    def in_flight_of(self, group: str, topic: str) -> dict[int, int]:
        """Queue id -> in-flight count of one group on one topic (the admin view)."""
        return dict(self.in_flight.get((group, topic), {}))

    def snapshot(self) -> PopSnapshot:
        return PopSnapshot(
            revive_in=dict(self.revive_in),
            revive_out=dict(self.revive_out),
            revive_retry=dict(self.revive_retry),
            in_flight={k: sum(v.values()) for k, v in list(self.in_flight.items())},
        )
