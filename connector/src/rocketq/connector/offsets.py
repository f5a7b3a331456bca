"""The connector's offset model: per-queue positions serialised as canonical JSON.

A source offset maps every queue the query reads, a client :class:`MessageQueue` ``(topic,
brokerName, queueId)``, to the *next* ConsumeQueue offset to read (RocketMQ's "consumer offset", one past
the last message consumed).  Spark stores offsets as the ``json.dumps`` of the dict we return and
decides whether a micro-batch has new data by comparing those strings, so the dict is always built
in one canonical order: topics sorted, queues sorted by broker name then numeric queue id::

    {"orders": {"broker-a:0": 120, "broker-a:1": 98, "broker-b:0": 7}}

JSON object keys are strings (``"brokerName:queueId"``, the same key ``MessageQueue.key`` uses)
and values are ints, so a JSON round trip changes nothing.  User-supplied offsets
(``startingOffsets`` / ``endingOffsets``) use the same shape and may contain the sentinels
``-2`` (earliest) and ``-1`` (latest).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from rocketq.client.remoting.vocabulary import MessageQueue

EARLIEST = -2
LATEST = -1


def parse_queue_key(topic: str, key: str) -> MessageQueue:
    """The queue of ``topic`` named ``"brokerName:queueId"`` (:attr:`MessageQueue.key`); raises
    ValueError on another form."""
    broker_name, sep, queue_text = key.rpartition(":")
    if not sep or not broker_name or not queue_text.isdigit():
        raise ValueError(f"queue key {key!r} is not of the form 'brokerName:queueId'")
    return MessageQueue(topic, broker_name, int(queue_text))


def queue_text(queue: MessageQueue) -> str:
    """``"topic/brokerName:queueId"``: how messages and errors name a queue."""
    return f"{queue.topic}/{queue.key}"


class OffsetMap(Mapping[MessageQueue, int]):
    """An immutable, canonically ordered ``MessageQueue -> offset`` mapping."""

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[MessageQueue, int] | Iterable[tuple[MessageQueue, int]] = ()) -> None:
        pairs = items.items() if isinstance(items, Mapping) else items
        self._items: dict[MessageQueue, int] = dict(sorted((q, int(o)) for q, o in pairs))

    def __getitem__(self, queue: MessageQueue) -> int:
        return self._items[queue]

    def __iter__(self) -> Iterator[MessageQueue]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, OffsetMap):
            return self._items == other._items
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self._items.items()))

    def __repr__(self) -> str:
        return f"OffsetMap({self.to_json()})"

    @property
    def topics(self) -> list[str]:
        return sorted({q.topic for q in self._items})

    def replace(self, updates: Mapping[MessageQueue, int]) -> OffsetMap:
        """A copy with ``updates`` applied (new queues are added)."""
        merged = dict(self._items)
        merged.update(updates)
        return OffsetMap(merged)

    def without(self, queues: Iterable[MessageQueue]) -> OffsetMap:
        drop = set(queues)
        return OffsetMap((q, o) for q, o in self._items.items() if q not in drop)

    def total(self) -> int:
        return sum(self._items.values())

    def to_json_dict(self) -> dict[str, dict[str, int]]:
        """The canonical nested dict handed to Spark (insertion order = canonical order)."""
        out: dict[str, dict[str, int]] = {}
        for queue, offset in self._items.items():  # already sorted
            out.setdefault(queue.topic, {})[queue.key] = offset
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_json_dict(), separators=(",", ":"))

    @classmethod
    def from_json_dict(cls, data: Any, *, allow_sentinels: bool = False) -> OffsetMap:
        """Parse ``{"topic": {"brokerName:queueId": offset}}``; raises ValueError with the culprit."""
        if not isinstance(data, dict):
            raise ValueError(
                f"expected a JSON object {{topic: {{brokerName:queueId: offset}}}}, got {data!r}"
            )
        pairs: list[tuple[MessageQueue, int]] = []
        for topic, queues in data.items():
            if not isinstance(queues, dict):
                raise ValueError(f"topic {topic!r}: expected an object of 'brokerName:queueId' -> offset")
            for key, offset in queues.items():
                queue = parse_queue_key(str(topic), str(key))
                if isinstance(offset, bool) or not isinstance(offset, int):
                    raise ValueError(f"{queue_text(queue)}: offset {offset!r} is not an integer")
                low = EARLIEST if allow_sentinels else 0
                if offset < low:
                    allowed = "-2 (earliest), -1 (latest) or >= 0" if allow_sentinels else ">= 0"
                    raise ValueError(f"{queue_text(queue)}: offset {offset} must be {allowed}")
                pairs.append((queue, offset))
        return cls(pairs)

    @classmethod
    def from_json(cls, text: str, *, allow_sentinels: bool = False) -> OffsetMap:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"malformed JSON ({exc.msg} at char {exc.pos})") from exc
        return cls.from_json_dict(data, allow_sentinels=allow_sentinels)


def canonical(offsets: Mapping[MessageQueue, int]) -> dict[str, dict[str, int]]:
    """Shortcut: the canonical Spark offset dict for any mapping."""
    return OffsetMap(offsets).to_json_dict()
