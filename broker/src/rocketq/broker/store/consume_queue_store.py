"""ConsumeQueueStore: the table of ConsumeQueues by topic and queue id (RocketMQ's ``ConsumeQueueStore``).

It owns the ``topic -> queue id -> ConsumeQueue`` table and the operations that span every queue:
mapping the queues found under ``consume_queue_dir`` at start-up, flushing, closing, cutting units
that refer beyond a CommitLog offset and dropping a queue or a topic.  Lookups are lock-free (two
dictionary reads); only creation and removal take the table's lock, so the reput thread can create
queues while readers look them up.
"""

from __future__ import annotations

import os
import threading

from rocketq.broker.store.config import StoreConfig
from rocketq.broker.store.consume_queue import ConsumeQueue


class ConsumeQueueStore:
    """Every ConsumeQueue of the store, created on first use."""

    def __init__(self, config: StoreConfig) -> None:
        self.config = config
        self._queues: dict[str, dict[int, ConsumeQueue]] = {}
        self._lock = threading.Lock()

    def find_or_create(self, topic: str, queue_id: int) -> ConsumeQueue:
        queues = self._queues.get(topic)
        cq = queues.get(queue_id) if queues is not None else None
        if cq is not None:
            return cq
        with self._lock:
            queues = self._queues.setdefault(topic, {})
            cq = queues.get(queue_id)
            if cq is None:
                cq = ConsumeQueue(
                    self.config.consume_queue_dir,
                    topic,
                    queue_id,
                    self.config.mapped_file_size_consume_queue_units,
                    preallocate=self.config.preallocate_files,
                )
                queues[queue_id] = cq
            return cq

    def find(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        queues = self._queues.get(topic)
        return queues.get(queue_id) if queues is not None else None

    def all(self) -> list[ConsumeQueue]:
        return [cq for queues in list(self._queues.values()) for cq in list(queues.values())]

    def topics(self) -> list[str]:
        return sorted(self._queues)

    def queue_ids(self, topic: str) -> list[int]:
        return sorted(self._queues.get(topic, {}))

    def max_offsets(self) -> dict[tuple[str, int], int]:
        """The next logical offset of every queue, by ``(topic, queue_id)``."""
        return {(cq.topic, cq.queue_id): cq.max_offset_in_queue for cq in self.all()}

    def drop(self, cq: ConsumeQueue) -> None:
        """Remove ``cq`` from the table and delete its files."""
        with self._lock:
            queues = self._queues.get(cq.topic, {})
            queues.pop(cq.queue_id, None)
            if not queues:
                self._queues.pop(cq.topic, None)
        cq.destroy()

    def delete_topic(self, topic: str) -> None:
        for qid in self.queue_ids(topic):
            cq = self.find(topic, qid)
            if cq is not None:
                self.drop(cq)

    def load(self) -> bool:
        """Map the ConsumeQueue files; True if the directory is missing or holds no queue."""
        root = self.config.consume_queue_dir
        if not os.path.isdir(root):
            return True
        found = False
        for topic in sorted(os.listdir(root)):
            tdir = os.path.join(root, topic)
            if not os.path.isdir(tdir):
                continue
            for qid in sorted(os.listdir(tdir)):
                if not qid.lstrip("-").isdigit():
                    continue
                cq = self.find_or_create(topic, int(qid))
                cq.load()
                found = found or bool(cq.mfq.files)
        return not found

    def truncate_dirty(self, phy_offset: int) -> None:
        """Remove the units referring to CommitLog data at or beyond ``phy_offset``, in every queue."""
        for cq in self.all():
            cq.truncate_dirty(phy_offset)

    def flush(self, least_pages: int = 0) -> bool:
        """Flush every queue; True if each is then durable up to its end."""
        queues = self.all()
        for cq in queues:
            cq.flush(least_pages)
        return all(cq.mfq.flushed_where >= cq.mfq.max_offset for cq in queues)

    def close(self) -> None:
        for cq in self.all():
            cq.close()
