"""Consumer offsets committed to this broker (``config/consumerOffset.json``).

The table maps ``topic@group`` to ``{queueId: offset}`` where the offset is the next message the
group will consume.  Offsets arrive by UPDATE_CONSUMER_OFFSET (usually oneway, every 5 s per
client), piggy-backed on PULL_MESSAGE (sysFlag COMMIT_OFFSET) and by admin resets; the server
persists the table every ``flushConsumerOffsetInterval`` and on shutdown.  All access happens on the
event loop thread.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["TOPIC_GROUP_SEPARATOR", "ConsumerOffsetManager"]

TOPIC_GROUP_SEPARATOR = "@"


class ConsumerOffsetManager:
    """In-memory offset table with the RocketMQ JSON encoding and a dirty flag for persistence."""

    def __init__(self) -> None:
        self._table: dict[str, dict[int, int]] = {}
        self.dirty = False

    @staticmethod
    def key(topic: str, group: str) -> str:
        return f"{topic}{TOPIC_GROUP_SEPARATOR}{group}"

    def commit_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """Record ``offset`` for the queue.  Negative offsets (a client's "unknown") are ignored."""
        if offset < 0:
            return
        queues = self._table.setdefault(self.key(topic, group), {})
        if queues.get(queue_id) != offset:
            queues[queue_id] = offset
            self.dirty = True

    def query_offset(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset, or -1 if the group never committed one for this queue."""
        return self._table.get(self.key(topic, group), {}).get(queue_id, -1)

    def query_offsets(self, group: str, topic: str) -> dict[int, int]:
        return dict(self._table.get(self.key(topic, group), {}))

    def which_topics_by_consumer(self, group: str) -> set[str]:
        out: set[str] = set()
        for key in self._table:
            topic, _, g = key.rpartition(TOPIC_GROUP_SEPARATOR)
            if g == group:
                out.add(topic)
        return out

    def which_groups_by_topic(self, topic: str) -> set[str]:
        out: set[str] = set()
        for key in self._table:
            t, _, group = key.rpartition(TOPIC_GROUP_SEPARATOR)
            if t == topic:
                out.add(group)
        return out

    def reset_offsets(self, group: str, topic: str, offsets: Mapping[int, int]) -> None:
        """Server-side reset (INVOKE_BROKER_TO_RESET_OFFSET): replace the queues' offsets."""
        queues = self._table.setdefault(self.key(topic, group), {})
        queues.update({int(q): int(o) for q, o in offsets.items()})
        self.dirty = True

    def remove_topic(self, topic: str) -> None:
        for key in [k for k in self._table if k.rpartition(TOPIC_GROUP_SEPARATOR)[0] == topic]:
            del self._table[key]
            self.dirty = True

    def remove_group(self, group: str) -> None:
        for key in [k for k in self._table if k.rpartition(TOPIC_GROUP_SEPARATOR)[2] == group]:
            del self._table[key]
            self.dirty = True

    def put_all(self, table: Mapping[str, Mapping[int, int]]) -> bool:
        """A slave's copy of its master's offsets (SlaveSynchronize, Java's ``putAll``): each
        ``topic@group`` the master has replaces the slave's entry for it, whole; entries only the
        slave has (offsets committed to it while the master was away) stay.  True if anything
        changed; the table is then dirty and persisted by the next offset flush.
        """
        changed = False
        for key, queues in table.items():
            new = {int(q): int(o) for q, o in queues.items()}
            if self._table.get(key) != new:
                self._table[key] = new
                changed = True
        if changed:
            self.dirty = True
        return changed

    # ------------------------------------------------------------------ persistence
    def encode(self) -> dict[str, object]:
        """``{"offsetTable": {"topic@group": {"0": 12, ...}}}`` (standard JSON: quoted keys)."""
        return {
            "offsetTable": {
                key: {str(q): o for q, o in sorted(queues.items())}
                for key, queues in sorted(self._table.items())
            }
        }

    def load(self, doc: Mapping[str, Any] | None) -> None:
        """Load a consumerOffset.json document (quoted or, via lenient JSON, unquoted int keys)."""
        if not doc:
            return
        table = doc.get("offsetTable") or {}
        for key, queues in table.items():
            if isinstance(queues, Mapping):
                self._table[str(key)] = {int(q): int(o) for q, o in queues.items()}
        self.dirty = False
