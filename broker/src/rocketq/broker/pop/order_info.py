"""Orderly (FIFO) POP state: RocketMQ 5's ConsumerOrderInfoManager, ``config/consumerOrderInfo.json``.

Theory of operation.  An orderly pop (``order=true``) of a queue reads from the group's consumer
offset C.  What it may deliver, and how far C moves on an ack, depends on ``popOrderBlockScope``.

``queue`` (default, RocketMQ's rule, kept exactly).  Per ``topic@group`` and queue one
:class:`OrderInfo` remembers the *last* orderly batch: its popTime, invisibleTime, offsets
(``[first, diff1, …]``), per-offset next visible times (set by CHANGE_INVISIBLETIME), per-offset
consumed counts and a bitmap of acked indices.
- Blocked: the queue delivers nothing while any un-acked offset of that batch is still invisible
  (its next visible time, else popTime + invisibleTime, is in the future).  A pop carrying the
  batch's attemptId is never blocked and, reading from C again, gets the same batch.
- Pop: once not blocked the pop reads up to maxNums messages from C and the batch is replaced.  An
  offset that was in the previous batch too gets consumedCount + 1 (unchanged for the same
  attemptId); the counts go to the client as orderCountInfo.  rocketq also counts each offset's
  failed deliveries for the retry limit (:meth:`OrderInfo.merge_offset_failed_count`).
- Ack (``commit_and_next``): an ack whose popTime is not the batch's is stale and ignored (-2); an
  offset outside the batch is illegal (-1); otherwise its bit is set and the answer is the first
  un-acked offset of the batch (last + 1 when all are acked), which becomes C.  So C never passes
  an un-acked message, but messages acked after an un-acked one are delivered again with it (Java).
  With no state for the queue Java answers offset + 1; this is kept for ``queue``.

``group`` (rocketq).  Each message carries its message group (``__SHARDINGKEY``; a message without
one is a group of its own).  The manager keeps, per queue, every offset ≥ C that was ever popped:
its popTime, next visible time, attemptId, consumedCount, group and whether it is acked (filtered
out messages count as acked).
- Blocked: a message group is blocked while one of its popped, un-acked messages is invisible; a
  blocked group delivers none of its messages, other groups keep flowing.
- Pop: candidates are the queue's messages from C in offset order; a candidate is delivered when
  it is not acked, not in flight and its group is not blocked, up to maxNums.  Within a group the
  pop therefore delivers a prefix of its un-acked messages, in order, and nothing of a group while
  any of its messages is held by a consumer: each group is consumed in strict order.  A pop
  repeating an attemptId gets that attempt's un-acked messages again, whatever else happened.
- Ack: stale popTime (of that offset's last delivery) -2, unknown offset -1; otherwise the offset
  is marked acked and C moves over the acked run starting at C; it stops at the first message that
  is un-acked *or was never popped* (a message of a blocked group), so C never passes one.  Acked
  messages above C are remembered and never delivered again.  No state at all: -2 (no commit).
- Failed deliveries (retry limit): a message delivered again counts one when it was the first
  of its group in its previous delivery (a pop delivers a prefix of each group's un-acked ones).
- Filtered: candidates the pop's filter rejects, up to where the pop stopped scanning, are
  recorded as consumed, so C moves over them (:meth:`ConsumerOrderInfoManager.consumer_offset`).
- The consumer offset a pop passes in moves C forward only; an offset reset backwards must call
  :meth:`ConsumerOrderInfoManager.clear_block` first, as Java's pop does on a reset.

Restart.  The table is saved with :meth:`ConsumerOrderInfoManager.persist` (meant to run with the
consumer offsets, every ``flushConsumerOffsetInterval`` and at shutdown) and loaded at start;
both scopes keep their rules across a clean restart.  After a crash the last saved state applies,
as in Java: acks after the save are forgotten, so those messages come back (at least once).  The
file is Java's shape; under ``group`` each queue's OrderInfo is Java-readable (``cm`` holds the
first 63 acked bits) and rocketq's extra state sits under ``rq``, which Java ignores.  Switching the
scope between restarts converts the entries (a Java entry's offsets keep their popTime, visibility,
counts and acks; their groups are learned from the next pop's candidates).  Entries untouched for
24 h are dropped when the table is saved (Java's autoClean).

The per-queue records and the file's JSON form are in :mod:`rocketq.broker.pop.order_records`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from rocketq.broker.config import PopOrderBlockScope
from rocketq.broker.metadata import load_json_file, persist_text_file
from rocketq.broker.pop.order_records import (
    COMMIT_ILLEGAL,
    COMMIT_NOT_NEEDED,
    GroupQueue,
    OrderInfo,
    PoppedOffset,
    fastjson_dumps,
)
from rocketq.client.remoting import lenient_json
from rocketq.client.remoting import pop as pop_wire

__all__ = [
    "CLEAN_SPAN_FROM_LAST_MS",
    "COMMIT_ILLEGAL",
    "COMMIT_NOT_NEEDED",
    "CONSUMER_ORDER_INFO_JSON",
    "Candidate",
    "ConsumerOrderInfoManager",
    "OrderCountInfo",
    "OrderInfo",
    "OrderlySelection",
]

log = logging.getLogger(__name__)

CONSUMER_ORDER_INFO_JSON = "consumerOrderInfo.json"
CLEAN_SPAN_FROM_LAST_MS = 24 * 3600 * 1000
_TOPIC_GROUP_SEPARATOR = "@"


def _now_ms() -> int:
    return int(time.time() * 1000)


# ----------------------------------------------------------------------------- the API
@dataclass(frozen=True, slots=True)
class Candidate:
    """A message of the queue offered to an orderly pop, in offset order from the consumer offset."""

    offset: int
    #: ``__SHARDINGKEY``; None: the message is a group of its own.
    message_group: str | None = None
    #: False when the pop's filter (tag or SQL92) rejects it: never delivered, counts as consumed.
    matches: bool = True


@dataclass(frozen=True, slots=True)
class OrderlySelection:
    """What an orderly pop may deliver now, in order, and the filtered offsets it passed over."""

    candidates: tuple[Candidate, ...]
    filtered: tuple[int, ...] = ()
    #: True when the queue is blocked as a whole (``queue`` scope): nothing was read into it.
    blocked: bool = False

    @property
    def offsets(self) -> tuple[int, ...]:
        return tuple(c.offset for c in self.candidates)


@dataclass(frozen=True, slots=True)
class OrderCountInfo:
    """Consumed counts of one orderly pop: per offset (count > 0) and the minimum for the queue.

    ``failed_counts`` (rocketq, not sent): per offset (count > 0), the deliveries in which it was
    its message group's first un-acked message and was not acked; the retry limit looks at these
    (a consumed count also counts deliveries behind a failing message, and acked redeliveries).
    """

    offset_counts: tuple[tuple[int, int], ...]
    min_count: int
    failed_counts: tuple[tuple[int, int], ...] = ()

    def entries(self, topic: str, queue_id: int) -> list[str]:
        """``orderCountInfo`` entries as Java's PopMessageProcessor appends them."""
        out = [pop_wire.queue_offset_order_count_entry(topic, queue_id, o, n) for o, n in self.offset_counts]
        out.append(pop_wire.order_count_info_entry(topic, queue_id, self.min_count))
        return out


class ConsumerOrderInfoManager:
    """The orderly-pop state of every ``topic@group`` and queue; see the module docstring for the rules.

    How the POP processor uses it (under the queue's pop lock, as Java):

    - orderly POP: :meth:`check_block` first (``queue`` scope: nothing to read while blocked);
      read the queue from the consumer offset (all messages, ``matches`` False for those the
      filter rejects, several times ``maxNums`` under ``group`` so held groups can be passed);
      :meth:`select`; answer its ``candidates``; :meth:`update` with them and ``filtered`` (it
      returns the orderCountInfo entries); commit the consumer offset read from, or under
      ``group`` scope :meth:`consumer_offset`.  ``queue`` scope: when nothing matched at all,
      commit the read's next offset yourself, as Java does.
    - orderly ACK: ignore offsets below the consumer offset; :meth:`commit_and_next`; commit an
      answer ≥ 0, answer MESSAGE_ILLEGAL for COMMIT_ILLEGAL, OK for COMMIT_NOT_NEEDED; then wake
      long-polling pops of the queue when it is no longer blocked.
    - orderly CHANGE_INVISIBLETIME: :meth:`update_next_visible_time` with now + invisibleTime;
      answer popTime unchanged and invisibleTime = next visible time - popTime.
    - consumer offset reset: :meth:`clear_block`.  Long polling: :meth:`lock_free_timestamp`
      (and :meth:`lock_free_times` after :meth:`load`) says when to wake pops of a held queue.
    - :meth:`persist` with the consumer offsets; :meth:`load` at start.

    Not thread-safe: the broker calls it on its event loop thread (Java holds the queue lock).
    """

    def __init__(
        self,
        *,
        scope: PopOrderBlockScope = PopOrderBlockScope.QUEUE,
        path: str | None = None,
        clock_ms: Callable[[], int] = _now_ms,
    ) -> None:
        self.scope = scope
        self.path = path
        self._clock = clock_ms
        self._java: dict[str, dict[int, OrderInfo]] = {}
        self._group: dict[str, dict[int, GroupQueue]] = {}
        self.dirty = False

    @staticmethod
    def key(topic: str, group: str) -> str:
        return f"{topic}{_TOPIC_GROUP_SEPARATOR}{group}"

    # -- queries ------------------------------------------------------------------------------
    def check_block(
        self, attempt_id: str | None, topic: str, group: str, queue_id: int, invisible_time: int
    ) -> bool:
        """Java's ``checkBlock``: is the whole queue blocked?  Never under ``group`` scope."""
        if self.scope is PopOrderBlockScope.GROUP:
            return False
        info = self._java.get(self.key(topic, group), {}).get(queue_id)
        return info is not None and info.need_block(attempt_id, invisible_time, self._clock())

    def select(
        self,
        *,
        attempt_id: str | None,
        topic: str,
        group: str,
        queue_id: int,
        invisible_time: int,
        consumer_offset: int,
        candidates: Sequence[Candidate],
        max_nums: int,
    ) -> OrderlySelection:
        """Which of ``candidates`` (the queue's messages from ``consumer_offset`` on) to deliver now."""
        if self.scope is PopOrderBlockScope.QUEUE:
            if self.check_block(attempt_id, topic, group, queue_id, invisible_time):
                return OrderlySelection(candidates=(), blocked=True)
            return OrderlySelection(candidates=tuple([c for c in candidates if c.matches][:max_nums]))
        return self._select_group(
            attempt_id, self.key(topic, group), queue_id, consumer_offset, candidates, max_nums
        )

    def _select_group(
        self,
        attempt_id: str | None,
        key: str,
        queue_id: int,
        consumer_offset: int,
        candidates: Sequence[Candidate],
        max_nums: int,
    ) -> OrderlySelection:
        now = self._clock()
        q = self._group.get(key, {}).get(queue_id)
        if q is None:
            q = GroupQueue(base=consumer_offset)
        elif consumer_offset > q.base:
            q.move_base(consumer_offset)
        by_offset = {c.offset: c for c in candidates}
        for o, e in q.entries.items():
            if (c := by_offset.get(o)) is not None:
                e.message_group = c.message_group
        if attempt_id is not None:
            again = [o for o, e in sorted(q.entries.items()) if not e.acked and e.attempt_id == attempt_id]
            if again:
                same = [by_offset.get(o, Candidate(o, q.entries[o].message_group)) for o in again]
                return OrderlySelection(candidates=tuple(same))
        blocked = {e.message_group for e in q.entries.values() if q.in_flight(e, now)}
        blocked.discard(None)
        chosen: list[Candidate] = []
        filtered: list[int] = []
        for c in sorted(candidates, key=lambda c: c.offset):
            if len(chosen) >= max_nums:
                break
            if c.offset < q.base:
                continue  # consumed; an offset reset backwards calls clear_block first, as Java's
            if not c.matches:
                filtered.append(c.offset)
                continue
            popped = q.entries.get(c.offset)
            if popped is not None and (popped.acked or q.in_flight(popped, now)):
                continue
            if c.message_group is not None and c.message_group in blocked:
                continue
            chosen.append(c)
        return OrderlySelection(candidates=tuple(chosen), filtered=tuple(filtered))

    def scan_start(
        self, attempt_id: str | None, topic: str, group: str, queue_id: int, consumer_offset: int
    ) -> int:
        """Where a pop's read may start under ``group`` scope: past the run of messages from the
        consumer offset that are acked or in flight (for another attempt), none of which it may
        deliver.  ``consumer_offset`` under ``queue`` scope or without state."""
        q = self._group.get(self.key(topic, group), {}).get(queue_id)
        if self.scope is PopOrderBlockScope.QUEUE or q is None:
            return consumer_offset
        now = self._clock()
        o = max(consumer_offset, q.base)
        while (e := q.entries.get(o)) is not None and (
            e.acked or (q.in_flight(e, now) and (attempt_id is None or e.attempt_id != attempt_id))
        ):
            o += 1
        return o

    def lock_free_timestamp(self, topic: str, group: str, queue_id: int) -> int | None:
        """When a blocked queue (or, under ``group``, its first blocked group) frees; None if it is
        not blocked or the time is unknown (long polls bound their wait by it)."""
        now = self._clock()
        if self.scope is PopOrderBlockScope.QUEUE:
            info = self._java.get(self.key(topic, group), {}).get(queue_id)
            free_at = None if info is None else info.lock_free_timestamp(now)
            return free_at if free_at is not None and free_at > now else None
        q = self._group.get(self.key(topic, group), {}).get(queue_id)
        times = [e.next_visible for e in q.entries.values() if q.in_flight(e, now)] if q is not None else []
        return min(times) if times else None

    def lock_free_times(self) -> list[tuple[str, str, int, int]]:
        """``(topic, group, queue_id, free_at)`` of every queue held now (Java's lock manager recover)."""
        now = self._clock()
        out = []
        for key in sorted(set(self._java) | set(self._group)):
            parts = key.split(_TOPIC_GROUP_SEPARATOR)
            if len(parts) != 2:
                continue
            for qid in sorted(set(self._java.get(key, {})) | set(self._group.get(key, {}))):
                free_at = self.lock_free_timestamp(parts[0], parts[1], qid)
                if free_at is not None and free_at > now:
                    out.append((parts[0], parts[1], qid, free_at))
        return out

    # -- changes ------------------------------------------------------------------------------
    def update(
        self,
        *,
        attempt_id: str | None,
        topic: str,
        group: str,
        queue_id: int,
        pop_time: int,
        invisible_time: int,
        popped: Sequence[Candidate],
        filtered: Sequence[int] = (),
    ) -> OrderCountInfo:
        """Record an orderly pop of ``popped`` (Java's ``update``); the counts go out as orderCountInfo.

        Under ``group`` scope ``filtered`` offsets are recorded as consumed, also when nothing was
        popped; afterwards :meth:`consumer_offset` is the offset to commit.
        """
        nothing = OrderCountInfo(offset_counts=(), min_count=0)
        if not popped and (not filtered or self.scope is PopOrderBlockScope.QUEUE):
            return nothing
        self.dirty = True
        now = self._clock()
        key = self.key(topic, group)
        if self.scope is PopOrderBlockScope.QUEUE:
            queues = self._java.setdefault(key, {})
            info = OrderInfo.build(attempt_id, pop_time, invisible_time, [c.offset for c in popped], now)
            old = queues.get(queue_id)
            if old is not None:
                info.merge_offset_consumed_count(
                    old.attempt_id, old.queue_offsets(), old.offset_consumed_count
                )
                info.merge_offset_failed_count(old, {c.offset: c.message_group for c in popped})
            queues[queue_id] = info
            counts = info.offset_consumed_count or {}
            low = 0 if len(counts) != len(info.offset_list) else min(counts.values(), default=0)
            failed = tuple((info.offset_failed_count or {}).items())
            return OrderCountInfo(offset_counts=tuple(counts.items()), min_count=low, failed_counts=failed)
        gq = self._group.setdefault(key, {})
        q = gq.setdefault(queue_id, GroupQueue(base=min([c.offset for c in popped] + list(filtered))))
        if popped:
            q.pop_time, q.invisible_time, q.attempt_id = pop_time, invisible_time, attempt_id
        q.last_consume_timestamp = now
        for o in filtered:
            if o >= q.base:
                q.entries[o] = PoppedOffset(
                    pop_time=pop_time, next_visible=pop_time, attempt_id=None, acked=True
                )
        tried: set[str] = set()
        for c in popped:
            first = c.message_group is None or c.message_group not in tried
            if c.message_group is not None:
                tried.add(c.message_group)
            e = q.entries.get(c.offset)
            if e is None:
                e = q.entries[c.offset] = PoppedOffset(
                    pop_time=pop_time, next_visible=0, attempt_id=attempt_id
                )
            elif attempt_id is None or e.attempt_id != attempt_id:
                e.consumed_count += 1
                e.failed_count += first  # delivered first of its group before and not acked: failed
            e.pop_time, e.next_visible, e.attempt_id = pop_time, pop_time + invisible_time, attempt_id
            e.message_group = c.message_group
        q.move_base(q.base)
        counts = {c.offset: n for c in popped if (n := q.entries[c.offset].consumed_count)}
        low = min((q.entries[c.offset].consumed_count for c in popped), default=0)
        failed = tuple((c.offset, n) for c in popped if (n := q.entries[c.offset].failed_count))
        return OrderCountInfo(offset_counts=tuple(counts.items()), min_count=low, failed_counts=failed)

    def consumer_offset(self, topic: str, group: str, queue_id: int) -> int | None:
        """Under ``group`` scope the consumer offset the state implies (commit it after a pop); else None."""
        q = self._group.get(self.key(topic, group), {}).get(queue_id)
        return None if q is None else q.base

    def commit_and_next(self, topic: str, group: str, queue_id: int, queue_offset: int, pop_time: int) -> int:
        """An orderly ack: the consumer offset to commit (≥ 0), COMMIT_ILLEGAL or COMMIT_NOT_NEEDED."""
        key = self.key(topic, group)
        if self.scope is PopOrderBlockScope.GROUP:
            q = self._group.get(key, {}).get(queue_id)
            if q is None:
                return COMMIT_NOT_NEEDED
            e = q.entries.get(queue_offset)
            if e is None:
                return COMMIT_ILLEGAL
            if e.pop_time != pop_time:
                return COMMIT_NOT_NEEDED
            e.acked = True
            q.move_base(q.base)
            self.dirty = True
            return q.base
        info = self._java.get(key, {}).get(queue_id)
        if info is None:
            return queue_offset + 1
        if not info.offset_list:
            return COMMIT_ILLEGAL
        if pop_time != info.pop_time:
            return COMMIT_NOT_NEEDED
        offsets = info.queue_offsets()
        if queue_offset not in offsets:
            return COMMIT_ILLEGAL
        info.commit_offset_bit |= 1 << offsets.index(queue_offset)
        self.dirty = True
        return info.next_offset()

    def update_next_visible_time(
        self, topic: str, group: str, queue_id: int, queue_offset: int, pop_time: int, next_visible_time: int
    ) -> bool:
        """Orderly CHANGE_INVISIBLETIME: False (and nothing changes) for a stale popTime or unknown queue."""
        key = self.key(topic, group)
        if self.scope is PopOrderBlockScope.GROUP:
            q = self._group.get(key, {}).get(queue_id)
            e = q.entries.get(queue_offset) if q is not None else None
            if e is None or e.pop_time != pop_time:
                return False
            e.next_visible = next_visible_time
        else:
            info = self._java.get(key, {}).get(queue_id)
            if info is None or info.pop_time != pop_time:
                return False
            if info.offset_next_visible_time is None:
                info.offset_next_visible_time = {}
            info.offset_next_visible_time[queue_offset] = next_visible_time
        self.dirty = True
        return True

    def clear_block(self, topic: str, group: str, queue_id: int) -> None:
        """Forget the queue's state (Java does it when the consumer offset is reset)."""
        key = self.key(topic, group)
        java = self._java.get(key, {}).pop(queue_id, None)
        grouped = self._group.get(key, {}).pop(queue_id, None)
        if java is not None or grouped is not None:
            self.dirty = True

    def auto_clean(
        self,
        *,
        read_queue_nums: Callable[[str], int | None] | None = None,
        group_exists: Callable[[str], bool] | None = None,
    ) -> None:
        """Java's ``autoClean``: drop gone topics, groups and queues, and queues untouched for 24 h."""
        now = self._clock()
        _clean(self._java, now, read_queue_nums, group_exists)
        _clean(self._group, now, read_queue_nums, group_exists)

    # -- persistence --------------------------------------------------------------------------
    def encode(self) -> str:
        """The file text: ``{"table":{"topic@group":{queueId:{OrderInfo}}}}``, integer keys unquoted."""
        self.auto_clean()
        table: dict[str, dict[int, dict[Any, Any]]] = {}
        for key, queues in self._java.items():
            table.setdefault(key, {}).update({q: info.to_json() for q, info in queues.items()})
        for key, gqueues in self._group.items():
            table.setdefault(key, {}).update({q: gq.to_json() for q, gq in gqueues.items()})
        return fastjson_dumps({"table": table})

    def decode(self, text_or_obj: Any) -> None:
        """Load Java's file (or rocketq's), converting entries to this manager's scope."""
        data = lenient_json.loads(text_or_obj) if isinstance(text_or_obj, str) else text_or_obj
        table = data.get("table") if isinstance(data, Mapping) else None
        self._java, self._group = {}, {}
        if not isinstance(table, Mapping):
            return
        for key, queues in table.items():
            for qid, entry in (queues or {}).items():
                if not isinstance(entry, Mapping):
                    raise ValueError(f"consumerOrderInfo entry {key} queue {qid} is not an object: {entry!r}")
                if self.scope is PopOrderBlockScope.GROUP:
                    self._group.setdefault(key, {})[int(qid)] = GroupQueue.from_json(entry)
                elif "rq" in entry:  # written under group scope: its Java view, acks of all offsets
                    self._java.setdefault(key, {})[int(qid)] = GroupQueue.from_json(entry).to_order_info()
                else:
                    self._java.setdefault(key, {})[int(qid)] = OrderInfo.from_json(entry)

    def load(self) -> None:
        """Read ``path`` (or its ``.bak``) if it exists; an unreadable file is a MetadataError."""
        if self.path is None:
            return
        data = load_json_file(self.path)
        if data is not None:
            try:
                self.decode(data)
            except (ValueError, TypeError, AttributeError, KeyError) as exc:
                raise ValueError(
                    f"{self.path}: not a consumerOrderInfo.json table ({exc}); move it away"
                ) from exc

    def persist(self) -> None:
        """Write the table to ``path`` atomically (the previous version stays as ``.bak``)."""
        if self.path is None:
            return
        persist_text_file(self.path, self.encode())
        self.dirty = False


class _Stamped(Protocol):
    last_consume_timestamp: int


_S = TypeVar("_S", bound=_Stamped)


def _clean(
    table: dict[str, dict[int, _S]],
    now: int,
    read_queue_nums: Callable[[str], int | None] | None,
    group_exists: Callable[[str], bool] | None,
) -> None:
    for key in list(table):
        topic, _, group = key.partition(_TOPIC_GROUP_SEPARATOR)
        nums = read_queue_nums(topic) if read_queue_nums is not None else -1
        if nums is None or (group_exists is not None and not group_exists(group)) or not table[key]:
            del table[key]
            continue
        queues = table[key]
        for qid in list(queues):
            if 0 <= nums <= qid or now - queues[qid].last_consume_timestamp > CLEAN_SPAN_FROM_LAST_MS:
                del queues[qid]
