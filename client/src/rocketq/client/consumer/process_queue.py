"""ProcessQueue: the pulled-but-not-yet-consumed messages of one assigned queue.

The pull loop puts messages in; consumers take them out.  What may be committed follows from what
is still inside: in concurrent consumption messages finish in any order, so the committable
offset after :meth:`remove_messages` is the smallest offset still pending (or ``max + 1`` when
none is), never past a message that has not been consumed.  Orderly consumption takes messages
in offset order (:meth:`take_messages`) and commits them all at once (:meth:`commit`), or puts
them back (:meth:`make_messages_to_consume_again`).  The queue also carries the flow-control
numbers (count, bytes, offset span), the drop flag set when rebalance takes the queue away, and
the broker lock state used by orderly consumption (valid 30 s after the last LOCK_BATCH_MQ).
Adding and removing are bulk-friendly: a pull's messages usually extend the sorted offsets at the
end and a consumed batch is usually their prefix, so both are list appends and one slice delete.
Sizes are body lengths (decompressed, as the Java client counts them).
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Iterable

from rocketq.client.model import MessageExt

__all__ = ["REBALANCE_LOCK_MAX_LIVE_TIME_MS", "ProcessQueue"]

REBALANCE_LOCK_MAX_LIVE_TIME_MS = 30_000
PULL_MAX_IDLE_TIME_MS = 120_000


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


class ProcessQueue:
    """Messages in flight for one queue, sorted by queue offset."""

    def __init__(self) -> None:
        self._msgs: dict[int, MessageExt] = {}
        self._offsets: list[int] = []  # sorted keys of _msgs
        self._consuming: dict[int, MessageExt] = {}  # orderly: taken, not yet committed
        self.msg_size = 0
        self.queue_offset_max = 0
        self.dropped = False
        self.locked = False
        self.consuming = False  # orderly: a consumer task owns the queue
        self.last_lock_timestamp = _now_ms()
        self.last_pull_timestamp = _now_ms()
        self.last_consume_timestamp = _now_ms()

    # ------------------------------------------------------------------ shared

    @property
    def msg_count(self) -> int:
        return len(self._msgs) + len(self._consuming)

    def put_messages(self, msgs: Iterable[MessageExt]) -> bool:
        """Add pulled messages (duplicates ignored); True if an orderly consumer should be started."""
        table, consuming, offsets = self._msgs, self._consuming, self._offsets
        last = offsets[-1] if offsets else -1
        added = 0
        for msg in msgs:
            off = msg.queue_offset
            if off in table or off in consuming:
                continue
            table[off] = msg
            if off > last:  # the usual case: a pull continues where the last one ended
                offsets.append(off)
                last = off
            else:
                bisect.insort(offsets, off)
            added += len(msg.body)
        self.msg_size += added
        if last > self.queue_offset_max:
            self.queue_offset_max = last
        if table and not self.consuming:
            self.consuming = True
            return True
        return False

    def max_span(self) -> int:
        """Offset distance between the oldest and newest pending message."""
        return self._offsets[-1] - self._offsets[0] if self._offsets else 0

    def pending_offsets(self) -> list[int]:
        return list(self._offsets)

    def remove_messages(self, msgs: Iterable[MessageExt]) -> int:
        """Forget consumed messages; return the offset now safe to commit (-1: nothing pending ever)."""
        table = self._msgs
        if not table:
            return -1
        result = self.queue_offset_max + 1
        removed: list[int] = []
        size = 0
        for msg in msgs:
            gone = table.pop(msg.queue_offset, None)
            if gone is not None:
                removed.append(msg.queue_offset)
                size += len(gone.body)
        self.msg_size -= size
        offsets = self._offsets
        k = len(removed)
        if k and offsets[:k] == removed:  # consumed in pull order: one slice delete
            del offsets[:k]
        else:
            for off in removed:
                del offsets[bisect.bisect_left(offsets, off)]
        if offsets:
            result = offsets[0]
        self.last_consume_timestamp = _now_ms()
        return result

    def clear(self) -> None:
        self._msgs.clear()
        self._offsets.clear()
        self._consuming.clear()
        self.msg_size = 0
        self.queue_offset_max = 0

    # ------------------------------------------------------------------ orderly

    def take_messages(self, batch_size: int) -> list[MessageExt]:
        """Move the ``batch_size`` lowest-offset messages to the consuming set, in order."""
        head = self._offsets[:batch_size]
        del self._offsets[:batch_size]
        taken: list[MessageExt] = []
        for off in head:
            msg = self._msgs.pop(off)
            self._consuming[off] = msg
            taken.append(msg)
        if not taken:
            self.consuming = False
        self.last_consume_timestamp = _now_ms()
        return taken

    def commit(self) -> int:
        """The taken messages are consumed: return the next offset (-1 if none was taken)."""
        if not self._consuming:
            return -1
        offset = max(self._consuming) + 1
        for msg in self._consuming.values():
            self.msg_size -= len(msg.body)
        self._consuming.clear()
        return offset

    def make_messages_to_consume_again(self, msgs: Iterable[MessageExt]) -> None:
        """Put taken messages back to be consumed again (after a SUSPEND_CURRENT_QUEUE_A_MOMENT)."""
        for msg in msgs:
            off = msg.queue_offset
            if self._consuming.pop(off, None) is not None:
                self._msgs[off] = msg
                bisect.insort(self._offsets, off)

    # ------------------------------------------------------------------ lock / liveness

    def is_lock_expired(self, now_ms: int | None = None) -> bool:
        now = _now_ms() if now_ms is None else now_ms
        return now - self.last_lock_timestamp > REBALANCE_LOCK_MAX_LIVE_TIME_MS

    def is_pull_expired(self, now_ms: int | None = None) -> bool:
        now = _now_ms() if now_ms is None else now_ms
        return now - self.last_pull_timestamp > PULL_MAX_IDLE_TIME_MS
