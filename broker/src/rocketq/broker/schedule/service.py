"""ScheduleMessageService: redeliver delayed messages from SCHEDULE_TOPIC_XXXX when they are due.

Theory of operation.  Queue ``level - 1`` of SCHEDULE_TOPIC_XXXX holds the messages of one delay
level in store order, so their delivery times (the ConsumeQueue tagsCode, see :mod:`.delay`) only
grow: per level the service keeps the offset of the next message to deliver.  One thread loops
over the levels: from each level's offset it reads ConsumeQueue units, delivers every unit whose
time has come — the CommitLog record is read, restored to its ``REAL_TOPIC``/``REAL_QID`` without
``DELAY``, and put back into the store (the store's dispatch then wakes parked pulls) — and stops
at the first one still in the future.  It then sleeps until the earliest future delivery time,
at most ``IDLE_WAIT_MS``, and is woken early when a message arrives in SCHEDULE_TOPIC_XXXX.  As in
RocketMQ, a delivery time further away than the level's delay (a clock step back) is treated as
due now, a record that cannot be read or has no real topic is skipped with an error, and a put
that fails is retried ``RETRY_WAIT_MS`` later from the same offset.  The offsets are persisted
in ``config/delayOffset.json`` every ``flushDelayOffsetInterval`` (10 s) and at shutdown, so a
restart resumes where delivery stopped (at-least-once: a crash can redeliver up to 10 s).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping

from rocketq.broker.metadata import DelayOffsetTable, MetadataFiles
from rocketq.broker.schedule.delay import SCHEDULE_TOPIC, restore_real_topic
from rocketq.broker.store.message_store import MessageStore
from rocketq.broker.store.record_batch import MessageToStore
from rocketq.broker.store.status import PutMessageStatus
from rocketq.client.errors import MessageFormatError
from rocketq.client.remoting.message import decode_stored_message
from rocketq.client.remoting.properties import encode_properties

__all__ = ["ScheduleMessageService"]

log = logging.getLogger(__name__)

IDLE_WAIT_MS = 1_000
RETRY_WAIT_MS = 10_000
UNITS_PER_READ = 256
_BLANK_SIZE = 0x7FFFFFFF
_NEVER_STORED = frozenset({PutMessageStatus.MESSAGE_ILLEGAL, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED})


def _now_ms() -> int:
    return int(time.time() * 1000)


class ScheduleMessageService:
    """Delivers due delayed messages; ``start()``/``shutdown()`` run it, ``deliver_due()`` is one round."""

    def __init__(
        self,
        store: MessageStore,
        levels_ms: list[int],
        *,
        config_dir: str | None = None,
        flush_interval_ms: int = 10_000,
        clock: Callable[[], int] = _now_ms,
    ) -> None:
        self.store = store
        self.levels_ms = list(levels_ms)
        self.files = MetadataFiles(config_dir) if config_dir is not None else None
        self.flush_interval_ms = flush_interval_ms
        self.clock = clock
        self.offsets: dict[int, int] = {}
        self.delivered = 0
        #: called (on this service's thread) with (topic, messages, bytes) after each delivery's put
        self.on_put: Callable[[str, int, int], None] | None = None
        self._retry_at: dict[int, int] = {}
        self._lock = threading.Lock()  # offsets: written by the thread, read by encode()/persist()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def max_level(self) -> int:
        return len(self.levels_ms)

    # -- lifecycle ---------------------------------------------------------------------------
    def load(self) -> None:
        """Load ``delayOffset.json`` (levels beyond the configured maximum are dropped)."""
        if self.files is None:
            return
        table = self.files.load_delay_offsets()
        with self._lock:
            self.offsets = {lv: off for lv, off in table.offset_table.items() if 1 <= lv <= self.max_level}

    def replace_offsets(self, offsets: Mapping[int, int]) -> None:
        """Take a master's delay offsets (a slave's SlaveSynchronize); levels beyond the configured
        maximum are dropped, as in :meth:`load`.  Persisted by the next flush or :meth:`persist`."""
        with self._lock:
            self.offsets = {lv: off for lv, off in offsets.items() if 1 <= lv <= self.max_level}

    def start(self) -> None:
        self.load()
        self.store.add_arrival_listener(self._on_arrival)
        self._thread = threading.Thread(target=self._run, name="ScheduleMessageService", daemon=True)
        self._thread.start()

    def shutdown(self) -> None:
        """Stop the thread, then persist the offsets."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None and self._thread.is_alive():
            self._thread.join(timeout=10)
        self.persist()

    def persist(self) -> None:
        if self.files is not None:
            self.files.persist_delay_offsets(DelayOffsetTable(offset_table=self.snapshot()))

    def snapshot(self) -> dict[int, int]:
        with self._lock:
            return dict(sorted(self.offsets.items()))

    def encode(self) -> dict[str, object]:
        """The ``delayOffset.json`` document (GET_ALL_DELAY_OFFSET's body)."""
        return DelayOffsetTable(offset_table=self.snapshot()).to_json()

    def _on_arrival(self, topic: str, queue_id: int, max_offset: int) -> None:
        if topic == SCHEDULE_TOPIC:
            self._wake.set()

    def _run(self) -> None:
        last_persist = self.clock()
        while not self._stop.is_set():
            self._wake.clear()
            now = self.clock()
            try:
                next_due = self.deliver_due(now)
            except Exception:
                log.exception("schedule round failed")
                next_due = now + IDLE_WAIT_MS
            now = self.clock()
            if now - last_persist >= self.flush_interval_ms:
                try:
                    self.persist()
                except Exception:
                    log.exception("cannot persist the delay offsets")
                last_persist = now
            wait_ms = IDLE_WAIT_MS if next_due is None else min(max(next_due - now, 0), IDLE_WAIT_MS)
            self._wake.wait(wait_ms / 1000)

    # -- one round ---------------------------------------------------------------------------
    def deliver_due(self, now: int) -> int | None:
        """Deliver every due message of every level; the earliest future delivery time, if any."""
        next_due: int | None = None
        for level in range(1, self.max_level + 1):
            if self._stop.is_set():
                break
            due = self._deliver_level(level, now)
            if due is not None and (next_due is None or due < next_due):
                next_due = due
        return next_due

    def _deliver_level(self, level: int, now: int) -> int | None:
        retry_at = self._retry_at.get(level)
        if retry_at is not None and retry_at > now:
            return retry_at
        self._retry_at.pop(level, None)
        cq = self.store.find_consume_queue(SCHEDULE_TOPIC, level - 1)
        if cq is None:
            return None
        offset = self.offsets.get(level, 0)
        offset = min(max(offset, cq.min_offset_in_queue), cq.max_offset_in_queue)
        delay_ms = self.levels_ms[level - 1]
        try:
            while offset < cq.max_offset_in_queue and not self._stop.is_set():
                units = cq.units_from(offset, UNITS_PER_READ)
                if units is None:  # a deleted or not yet mapped segment: re-check the bounds next round
                    return now + IDLE_WAIT_MS
                for phy, size, deliver_at in zip(
                    units["offset"].tolist(), units["size"].tolist(), units["tags_code"].tolist(), strict=True
                ):
                    if size != _BLANK_SIZE:
                        if deliver_at > now + delay_ms:
                            deliver_at = now  # the clock went back: RocketMQ delivers at once
                        if deliver_at > now:
                            return int(deliver_at)
                        if not self._deliver(phy, size):
                            self._retry_at[level] = now + RETRY_WAIT_MS
                            return now + RETRY_WAIT_MS
                    offset += 1
            return None
        finally:
            with self._lock:
                self.offsets[level] = offset

    def _deliver(self, phy: int, size: int) -> bool:
        """Put the record at ``phy`` back into its real topic; False if the put must be retried."""
        raw = self.store.look_message_by_offset(phy)
        if raw is None:
            log.error("delayed message at commit log offset %d is gone; skipped", phy)
            return True
        try:
            msg = decode_stored_message(raw, decompress=False)
            restored = restore_real_topic(msg.properties)
        except MessageFormatError as exc:
            log.error("delayed message at commit log offset %d does not decode (%s); skipped", phy, exc)
            return True
        if restored is None:
            log.error("delayed message at commit log offset %d has no REAL_TOPIC/REAL_QID; skipped", phy)
            return True
        topic, queue_id, props = restored
        result = self.store.put_message(
            MessageToStore.copy_of(msg, topic=topic, queue_id=queue_id, properties=encode_properties(props))
        )
        status = result.status
        if result.is_ok:
            self.delivered += 1
            if self.on_put is not None and result.append_result is not None:
                self.on_put(topic, 1, result.append_result.wrote_bytes)
            return True
        if status in _NEVER_STORED:
            log.error(
                "delayed message at commit log offset %d cannot be stored in %s (%s); skipped",
                phy,
                topic,
                status.name,
            )
            return True
        log.warning(
            "delivering the delayed message at %d to %s failed (%s); retrying later", phy, topic, status.name
        )
        return False
