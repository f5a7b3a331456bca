"""The per-queue records of the orderly-pop table and their ``consumerOrderInfo.json`` form.

:class:`OrderInfo` is Java's ``ConsumerOrderInfoManager.OrderInfo``: the last orderly batch of a
queue under ``popOrderBlockScope=queue`` (its offsets, visibility, consumed counts, acked bits), with
its rules for blocking, committing and carrying counts over.  :class:`GroupQueue` is a queue under
``group`` scope: every popped offset from the consumer offset on (:class:`PoppedOffset`), written
as a Java-readable OrderInfo plus rocketq's state under ``rq``.  :func:`fastjson_dumps` writes the
file text as fastjson does.  The rules that use them are in
:mod:`rocketq.broker.pop.order_info`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "COMMIT_ILLEGAL",
    "COMMIT_NOT_NEEDED",
    "GroupQueue",
    "OrderInfo",
    "PoppedOffset",
    "fastjson_dumps",
]

#: ``commit_and_next`` answers: the offset is not part of the orderly state (MESSAGE_ILLEGAL) ...
COMMIT_ILLEGAL = -1
#: ... or the ack is stale or needs no commit (answer OK, commit nothing).
COMMIT_NOT_NEEDED = -2
#: the acked bits a Java long (``cm``) holds
_JAVA_BITS = 63


# ----------------------------------------------------------------------------- Java's OrderInfo
@dataclass(slots=True)
class OrderInfo:
    """Java's ``ConsumerOrderInfoManager.OrderInfo``: the last orderly batch of one queue."""

    pop_time: int = 0
    invisible_time: int | None = None
    offset_list: list[int] = field(default_factory=list)
    offset_next_visible_time: dict[int, int] | None = None
    offset_consumed_count: dict[int, int] | None = None
    last_consume_timestamp: int = 0
    commit_offset_bit: int = 0
    attempt_id: str | None = None
    #: rocketq (``rf``, which Java ignores): per offset, the deliveries it failed (count > 0)
    offset_failed_count: dict[int, int] | None = None

    @classmethod
    def build(
        cls, attempt_id: str | None, pop_time: int, invisible_time: int, offsets: Sequence[int], now: int
    ) -> OrderInfo:
        first = offsets[0]
        simple = [first] + [o - first for o in offsets[1:]]
        return cls(
            pop_time=pop_time,
            invisible_time=invisible_time,
            offset_list=simple,
            last_consume_timestamp=now,
            attempt_id=attempt_id,
        )

    def queue_offset(self, index: int) -> int:
        return self.offset_list[0] if index == 0 else self.offset_list[0] + self.offset_list[index]

    def queue_offsets(self) -> list[int]:
        return [self.queue_offset(i) for i in range(len(self.offset_list))]

    def is_not_ack(self, index: int) -> bool:
        return not (self.commit_offset_bit >> index) & 1

    def _next_visible(self, index: int) -> int:
        explicit = (self.offset_next_visible_time or {}).get(self.queue_offset(index))
        return explicit if explicit is not None else self.pop_time + (self.invisible_time or 0)

    def need_block(self, attempt_id: str | None, current_invisible_time: int, now: int) -> bool:
        """True while an un-acked offset of the batch is invisible; never for the batch's attemptId."""
        if not self.offset_list:
            return False
        if self.attempt_id is not None and self.attempt_id == attempt_id:
            return False
        if self.invisible_time is None or self.invisible_time <= 0:
            self.invisible_time = current_invisible_time
        return any(self.is_not_ack(i) and now < self._next_visible(i) for i in range(len(self.offset_list)))

    def lock_free_timestamp(self, now: int) -> int | None:
        """When the queue unblocks (Java's ``getLockFreeTimestamp``): None if unknown, ``now`` if free."""
        if not self.offset_list:
            return None
        for i in range(len(self.offset_list)):
            if self.is_not_ack(i):
                if self.invisible_time is None or self.invisible_time <= 0:
                    return None
                if now < (visible := self._next_visible(i)):
                    return visible
        return now

    def next_offset(self) -> int:
        """The first un-acked offset, or last + 1 when all are acked; -2 for an empty batch."""
        if not self.offset_list:
            return COMMIT_NOT_NEEDED
        for i in range(len(self.offset_list)):
            if self.is_not_ack(i):
                return self.queue_offset(i)
        return self.queue_offset(len(self.offset_list) - 1) + 1

    def merge_offset_consumed_count(
        self, pre_attempt_id: str | None, pre_offsets: Iterable[int], prev_counts: Mapping[int, int] | None
    ) -> None:
        """Carry consumed counts over from the previous batch: +1 for each offset popped again."""
        prev = dict(prev_counts or {})
        if pre_attempt_id is not None and pre_attempt_id == self.attempt_id:
            self.offset_consumed_count = prev
            return
        before = set(pre_offsets)
        self.offset_consumed_count = {o: prev.get(o, 0) + 1 for o in self.queue_offsets() if o in before}

    def merge_offset_failed_count(self, pre: OrderInfo, groups: Mapping[int, str | None]) -> None:
        """Carry failed deliveries over from the batch ``pre`` (rocketq, for the retry limit).

        An offset of both batches counts one more failure when ``pre`` ended with it un-acked and
        first of its message group (``groups``: this batch's offsets; None is a group of its own):
        a FIFO consumer tried it and failed.  The group's later messages were not tried, and an
        offset acked in ``pre`` (delivered again because an earlier one was not) succeeded.
        Un-acked offsets of ``pre`` before one of this batch are in this batch too (both read the
        queue in order from the first un-acked offset), so their groups are known.
        """
        prev = dict(pre.offset_failed_count or {})
        if pre.attempt_id is not None and pre.attempt_id == self.attempt_id:
            self.offset_failed_count = prev or None
            return
        pre_offsets = pre.queue_offsets()
        failed: set[int] = set()
        tried: set[str] = set()
        for i, o in enumerate(pre_offsets):
            if not pre.is_not_ack(i) or o not in groups:
                continue
            group = groups[o]
            if group is None or group not in tried:
                failed.add(o)
            if group is not None:
                tried.add(group)
        before = set(pre_offsets)
        counts = {o: prev.get(o, 0) + (o in failed) for o in self.queue_offsets() if o in before}
        self.offset_failed_count = {o: n for o, n in counts.items() if n} or None

    def to_json(self) -> dict[Any, Any]:
        """fastjson's bean order (names sorted), nulls left out."""
        out: dict[Any, Any] = {}
        if self.attempt_id is not None:
            out["a"] = self.attempt_id
        out["cm"] = self.commit_offset_bit
        if self.invisible_time is not None:
            out["i"] = self.invisible_time
        out["l"] = self.last_consume_timestamp
        out["o"] = list(self.offset_list)
        if self.offset_consumed_count is not None:
            out["oc"] = dict(self.offset_consumed_count)
        if self.offset_next_visible_time is not None:
            out["ot"] = dict(self.offset_next_visible_time)
        out["popTime"] = self.pop_time
        if self.offset_failed_count:
            out["rf"] = dict(self.offset_failed_count)
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> OrderInfo:
        def int_map(v: Any) -> dict[int, int] | None:
            return None if v is None else {int(k): int(x) for k, x in v.items()}

        inv = d.get("i", d.get("invisibleTime"))
        return cls(
            pop_time=int(d.get("popTime", 0)),
            invisible_time=None if inv is None else int(inv),
            offset_list=[int(x) for x in d.get("o", d.get("offsetList")) or []],
            offset_next_visible_time=int_map(d.get("ot", d.get("offsetNextVisibleTime"))),
            offset_consumed_count=int_map(d.get("oc", d.get("offsetConsumedCount"))),
            last_consume_timestamp=int(d.get("l", d.get("lastConsumeTimestamp", 0))),
            commit_offset_bit=int(d.get("cm", d.get("commitOffsetBit", 0))),
            attempt_id=d.get("a", d.get("attemptId")),
            offset_failed_count=int_map(d.get("rf")),
        )


# ----------------------------------------------------------------------------- group scope
@dataclass(slots=True)
class PoppedOffset:
    """One popped offset under ``group`` scope."""

    pop_time: int
    next_visible: int
    attempt_id: str | None
    consumed_count: int = 0
    message_group: str | None = None
    acked: bool = False
    failed_count: int = 0


@dataclass(slots=True)
class GroupQueue:
    """A queue under ``group`` scope: C as the manager knows it and every popped offset ≥ C."""

    base: int
    entries: dict[int, PoppedOffset] = field(default_factory=dict)
    pop_time: int = 0
    invisible_time: int = 0
    attempt_id: str | None = None
    last_consume_timestamp: int = 0

    def in_flight(self, e: PoppedOffset, now: int) -> bool:
        return not e.acked and now < e.next_visible

    def move_base(self, base: int) -> None:
        self.base = base
        while (e := self.entries.get(self.base)) is not None and e.acked:
            self.base += 1
        for o in [o for o in self.entries if o < self.base]:
            del self.entries[o]

    def to_json(self) -> dict[Any, Any]:
        offsets = sorted(self.entries)
        info = OrderInfo(
            pop_time=self.pop_time,
            invisible_time=self.invisible_time,
            attempt_id=self.attempt_id,
            last_consume_timestamp=self.last_consume_timestamp,
            offset_list=[offsets[0]] + [o - offsets[0] for o in offsets[1:]] if offsets else [],
            offset_next_visible_time={o: self.entries[o].next_visible for o in offsets},
            offset_consumed_count={o: n for o in offsets if (n := self.entries[o].consumed_count)},
            offset_failed_count={o: n for o in offsets if (n := self.entries[o].failed_count)} or None,
            commit_offset_bit=sum(
                1 << i for i, o in enumerate(offsets[:_JAVA_BITS]) if self.entries[o].acked
            ),
        )
        out = info.to_json()
        out["rq"] = {
            "b": self.base,
            "ak": [o for o in offsets if self.entries[o].acked],
            "g": {o: e.message_group for o in offsets if (e := self.entries[o]).message_group is not None},
            "pt": {o: e.pop_time for o in offsets if (e := self.entries[o]).pop_time != self.pop_time},
            "pa": {o: e.attempt_id for o in offsets if (e := self.entries[o]).attempt_id != self.attempt_id},
        }
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> GroupQueue:
        info = OrderInfo.from_json(d)
        rq = d.get("rq") or {}
        offsets = info.queue_offsets()
        ot = info.offset_next_visible_time or {}
        oc = info.offset_consumed_count or {}
        fc = info.offset_failed_count or {}
        groups = {int(k): v for k, v in (rq.get("g") or {}).items()}
        pts = {int(k): int(v) for k, v in (rq.get("pt") or {}).items()}
        pas = {int(k): v for k, v in (rq.get("pa") or {}).items()}
        acked = (
            {int(o) for o in rq["ak"]}
            if "ak" in rq
            else {o for i, o in enumerate(offsets) if not info.is_not_ack(i)}
        )
        q = cls(
            base=int(rq.get("b", offsets[0] if offsets else 0)),
            pop_time=info.pop_time,
            invisible_time=info.invisible_time or 0,
            attempt_id=info.attempt_id,
            last_consume_timestamp=info.last_consume_timestamp,
        )
        for o in offsets:
            pt = pts.get(o, info.pop_time)
            q.entries[o] = PoppedOffset(
                pop_time=pt,
                next_visible=ot.get(o, pt + (info.invisible_time or 0)),
                attempt_id=pas.get(o, info.attempt_id),
                consumed_count=oc.get(o, 0),
                message_group=groups.get(o),
                acked=o in acked,
                failed_count=fc.get(o, 0),
            )
        q.move_base(q.base)
        return q

    def to_order_info(self) -> OrderInfo:
        """The Java view, with every acked bit (not only the 63 a Java long holds)."""
        info = OrderInfo.from_json({k: v for k, v in self.to_json().items() if k != "rq"})
        info.commit_offset_bit = _bits([self.entries[o].acked for o in sorted(self.entries)])
        return info


def _bits(flags: Sequence[bool]) -> int:
    return sum(1 << i for i, flag in enumerate(flags) if flag)


def fastjson_dumps(value: Any) -> str:
    """JSON as fastjson writes beans and maps: integer map keys unquoted."""
    if isinstance(value, dict):
        items = (
            f"{k if isinstance(k, int) else json.dumps(k)}:{fastjson_dumps(v)}" for k, v in value.items()
        )
        return "{" + ",".join(items) + "}"
    if isinstance(value, list):
        return "[" + ",".join(fastjson_dumps(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)
