"""TimerMessageStore: parks timer messages in the wheel and puts them back when they are due.

Theory of operation (RocketMQ's ``TimerMessageStore``, run by one thread instead of six).
*Enqueue* reads the ConsumeQueue of ``rmq_sys_wheel_timer`` queue 0 from ``curr_queue_offset``:
each message's ``TIMER_OUT_MS`` is its slot time.  A slot time before the write time (the current
time floored to the precision) is delivered at once; a slot within ``timerRollWindowSlot`` slots
gets a timer-log record (MAGIC_DEFAULT, plus MAGIC_DELETE for a recall tombstone) chained into its
wheel slot; a later one is parked at the edge of the window with MAGIC_ROLL (half the window
ahead when it would fall due soon after the edge, as Java).  *Dequeue* reads the slot at
``curr_read_time_ms`` once the write time has passed it: tombstones (MAGIC_DELETE without ROLL)
first, collecting ``<topic>+<uniqId>`` keys; then the other records in enqueue order: a rolled one
is put back into the timer topic (``TIMER_ROLL_TIMES`` + 1) to be enqueued again, a recalled one is
dropped, every other one is put into its ``REAL_TOPIC``/``REAL_QID`` with ``TIMER_ENQUEUE_MS`` and
``TIMER_DEQUEUE_MS`` (``TIMER_OUT_MS`` stays, so the send rules never time it again); then the read
time moves one slot on.  *Flush* (every ``timerFlushIntervalMs``) syncs the timer log and the wheel,
then writes ``config/timercheck``.

Restart: the timer log is recovered from the last flushed position (every good record revises
its wheel slot), the enqueue resumes after the queue offset of the message of the last record
(or the checkpoint's, whichever is later: messages delivered at once leave no record), and the
read time resumes at the checkpoint's, so every slot due during an outage is read.  What was
delivered after the last checkpoint would be delivered again (RocketMQ does so: at least once); a
message due before this run started (``started_at_ms``) is therefore first looked up by its
``UNIQ_KEY`` in the index of its real topic, and not delivered again when a copy with its
``TIMER_OUT_MS`` is there.  The same covers a slave promoted by the controller, whose timer files
start empty or stale: the old master's deliveries were replicated.  (Without the index,
``messageIndexEnable=false``, such messages are delivered again.)
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from rocketq.broker.store.message_store import MessageStore
from rocketq.broker.store.record_batch import MessageToStore
from rocketq.broker.store.status import PutMessageStatus
from rocketq.broker.timer.checkpoint import TimerCheckpoint
from rocketq.broker.timer.config import TimerConfig
from rocketq.broker.timer.layout import MAGIC_DEFAULT, MAGIC_DELETE, MAGIC_ROLL
from rocketq.broker.timer.timer_log import TimerLog, TimerRecord
from rocketq.broker.timer.wheel import IGNORE, TimerWheel
from rocketq.client.errors import MessageFormatError
from rocketq.client.remoting.javahash import java_string_hash
from rocketq.client.remoting.message import StoredMessage, decode_stored_message
from rocketq.client.remoting.properties import MessageConst, encode_properties
from rocketq.client.remoting.vocabulary import TIMER_TOPIC

__all__ = ["TimerMessageStore", "TimerStats", "delete_key"]

log = logging.getLogger(__name__)

#: ``TimerMessageStore.TIMER_BLANK_SLOTS``: slots kept between the oldest readable slot and the wheel's wrap
TIMER_BLANK_SLOTS = 60
UNITS_PER_READ = 256
PUT_ATTEMPTS = 3
#: ``TIMER_ENQUEUE_MS`` of a message delivered without ever entering the wheel (Java's Long.MAX_VALUE)
NEVER_ENQUEUED = (1 << 63) - 1
_NO_RETRY = frozenset({PutMessageStatus.MESSAGE_ILLEGAL, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED})


def _now_ms() -> int:
    return int(time.time() * 1000)


def delete_key(topic: str, uniq_id: str) -> str:
    """``TimerMessageStore.buildDeleteKey``: what a recall tombstone names."""
    return f"{topic}+{uniq_id}"


@dataclass(slots=True)
class TimerStats:
    enqueued: int = 0
    delivered: int = 0
    rolled: int = 0
    recalled: int = 0
    dropped: int = 0
    redelivery_skipped: int = 0


class TimerMessageStore:
    """The wheel, the log and the checkpoint of one broker, and the enqueue/dequeue steps over them."""

    def __init__(
        self,
        store: MessageStore,
        config: TimerConfig,
        root_dir: str,
        *,
        clock: Callable[[], int] = _now_ms,
    ) -> None:
        self.store = store
        self.config = config
        self.clock = clock
        self.precision_ms = config.precision_ms
        self.wheel = TimerWheel(os.path.join(root_dir, "timerwheel"), config.slots_total, config.precision_ms)
        self.timer_log = TimerLog(os.path.join(root_dir, "timerlog"), config.timer_log_file_size)
        self.checkpoint = TimerCheckpoint(os.path.join(root_dir, "config", "timercheck"))
        self.curr_queue_offset = 0
        self.curr_read_time_ms = 0
        self.stats = TimerStats()
        #: called (on the timer's thread) with (topic, messages, bytes) after each put, rolls too
        self.on_put: Callable[[str, int, int], None] | None = None
        #: slots before this time may have been delivered by a previous run: checked before delivery
        self.started_at_ms = 0
        self._committed = (-1, -1)
        self._skips_logged = 0

    # -- lifecycle ---------------------------------------------------------------------------
    def load(self) -> None:
        """Load and recover the timer log, the wheel and the progress (see the module docstring)."""
        self.timer_log.load()
        cp = self.checkpoint
        begin = max(cp.last_timer_log_flush_pos - self.config.timer_log_file_size, 0)

        def revise(pos: int, record: TimerRecord) -> None:
            self.wheel.revise_slot(record.delayed_time_ms, IGNORE, pos, force=True)

        self.timer_log.recover(begin, revise)
        offset = cp.last_timer_queue_offset
        last = self.timer_log.last_record()
        if last is not None:
            msg = self._read(last.offset_py)
            if msg is not None and msg.topic == TIMER_TOPIC:
                offset = max(offset, msg.queue_offset + 1)
        cq = self.store.find_consume_queue(TIMER_TOPIC, 0)
        if cq is not None:
            offset = min(max(offset, cq.min_offset_in_queue), cq.max_offset_in_queue)
        self.curr_queue_offset = offset
        now = self._floor(self.clock())
        oldest = now - (self.config.slots_total - TIMER_BLANK_SLOTS) * self.precision_ms
        read = self._floor(cp.last_read_time_ms) if cp.existed and cp.last_read_time_ms > 0 else now
        self.curr_read_time_ms = max(read, oldest)
        self.started_at_ms = now
        self.flush()  # a crash before the first interval's flush must resume from here, not from now
        log.info(
            "timer store recovered: read time %d, timer queue offset %d, timer log end %d",
            self.curr_read_time_ms,
            self.curr_queue_offset,
            self.timer_log.max_offset,
        )

    def flush(self) -> None:
        """Sync the timer log and the wheel, then the checkpoint."""
        if self.stats.redelivery_skipped != self._skips_logged:
            self._skips_logged = self.stats.redelivery_skipped
            log.info(
                "timer: %d message(s) due before this start were already in their topic: not delivered again",
                self._skips_logged,
            )
        self.timer_log.flush()
        self.wheel.flush()
        cp = self.checkpoint
        cp.last_timer_log_flush_pos = self.timer_log.flushed_where
        cp.last_read_time_ms = self.curr_read_time_ms
        cp.last_timer_queue_offset = cp.master_timer_queue_offset = self.curr_queue_offset
        if self._committed != (self.curr_read_time_ms, self.curr_queue_offset):
            cp.update_data_version()
            self._committed = (self.curr_read_time_ms, self.curr_queue_offset)
        cp.flush()

    def close(self) -> None:
        self.flush()
        self.timer_log.close()
        self.wheel.close()
        self.checkpoint.close()

    # -- enqueue -----------------------------------------------------------------------------
    def enqueue(self, max_units: int = UNITS_PER_READ) -> int:
        """Move up to ``max_units`` new messages of the timer topic into the wheel; how many."""
        cq = self.store.find_consume_queue(TIMER_TOPIC, 0)
        if cq is None:
            return 0
        offset = max(self.curr_queue_offset, cq.min_offset_in_queue)
        if offset >= cq.max_offset_in_queue:
            self.curr_queue_offset = offset
            return 0
        units = cq.units_from(offset, max_units)
        if units is None:
            self.curr_queue_offset = offset
            return 0
        due_now: list[StoredMessage] = []
        for phy, size in zip(units["offset"].tolist(), units["size"].tolist(), strict=True):
            msg = self._enqueue_one(int(phy), int(size))
            if msg is not None:
                due_now.append(msg)
        # Already due (the service was behind, or a rolled copy came back late): delivered at once,
        # except what a tombstone read in the same batch recalls (both rolled with the same time).
        deleted = {m.properties[MessageConst.TIMER_DEL_UNIQKEY] for m in due_now if _is_tombstone(m)}
        for msg in due_now:
            if not _is_tombstone(msg) and _delete_key_of(msg) in deleted:
                self.stats.recalled += 1
            else:
                self._put_back(msg, NEVER_ENQUEUED, roll=False)
        self.curr_queue_offset = offset + len(units)
        return len(units)

    def _enqueue_one(self, offset_py: int, size_py: int) -> StoredMessage | None:
        """Park one message of the timer topic in the wheel; the message if it is already due."""
        msg = self._read(offset_py)
        if msg is None:
            log.error("timer message at commit log offset %d is unreadable; skipped", offset_py)
            return None
        try:
            delayed = int(msg.properties.get(MessageConst.TIMER_OUT_MS, ""))
        except ValueError:
            log.error("timer message at commit log offset %d has no TIMER_OUT_MS; skipped", offset_py)
            return None
        write_time = self._floor(self.clock())
        if delayed < write_time:
            return msg
        self._do_enqueue(offset_py, size_py, delayed, msg, write_time)
        return None

    def _do_enqueue(
        self, offset_py: int, size_py: int, delayed: int, msg: StoredMessage, write_time: int
    ) -> None:
        window_ms = self.config.roll_window_slots * self.precision_ms
        magic = MAGIC_DEFAULT
        if delayed - write_time >= window_ms:
            magic |= MAGIC_ROLL
            if delayed - write_time - window_ms < self.config.roll_window_slots // 3 * self.precision_ms:
                delayed = write_time + self.config.roll_window_slots // 2 * self.precision_ms
            else:
                delayed = write_time + window_ms
        is_delete = MessageConst.TIMER_DEL_UNIQKEY in msg.properties
        if is_delete:
            magic |= MAGIC_DELETE
        slot = self.wheel.get_slot(delayed)
        real_topic = msg.properties.get(MessageConst.REAL_TOPIC)
        record = TimerRecord(
            prev_pos=slot.last_pos,
            magic=magic,
            curr_write_time_ms=write_time,
            delayed_time_ms=delayed,
            offset_py=offset_py,
            size_py=size_py,
            topic_hash=java_string_hash(real_topic) if real_topic is not None else 0,
        )
        pos = self.timer_log.append(record)
        first = pos if slot.first_pos == -1 else slot.first_pos
        self.wheel.put_slot(delayed, first, pos, slot.num - 1 if is_delete else slot.num + 1, slot.magic)
        self.stats.enqueued += 1

    # -- dequeue -----------------------------------------------------------------------------
    def dequeue(self, max_slots: int = 1_000_000) -> int:
        """Deliver every slot whose time has passed (at most ``max_slots``); how many slots were read."""
        done = 0
        while done < max_slots and self.curr_read_time_ms < self._floor(self.clock()):
            self._dequeue_slot(self.curr_read_time_ms)
            self.curr_read_time_ms += self.precision_ms
            done += 1
        return done

    def _dequeue_slot(self, time_ms: int) -> None:
        slot = self.wheel.get_slot(time_ms)
        if slot.time_ms == -1:
            return
        chain: list[TimerRecord] = []
        pos = slot.last_pos
        while pos != -1 and len(chain) <= 1 << 24:
            record = self.timer_log.read(pos)
            if record is None:
                log.error("timer slot %d points at %d, which is not a timer log record", time_ms, pos)
                break
            chain.append(record)
            pos = record.prev_pos
        chain.reverse()  # enqueue order
        deleted: set[str] = set()
        for record in chain:
            if record.magic & MAGIC_DELETE and not record.magic & MAGIC_ROLL:
                tomb = self._read(record.offset_py)
                key = tomb.properties.get(MessageConst.TIMER_DEL_UNIQKEY) if tomb is not None else None
                if key:
                    deleted.add(key)
        for record in chain:
            if record.magic & MAGIC_DELETE and not record.magic & MAGIC_ROLL:
                continue
            msg = self._read(record.offset_py)
            if msg is None:
                log.error("timer message at commit log offset %d is gone; skipped", record.offset_py)
                continue
            roll = bool(record.magic & MAGIC_ROLL)
            if not roll and _delete_key_of(msg) in deleted:
                self.stats.recalled += 1
                continue
            self._put_back(msg, record.curr_write_time_ms, roll=roll)

    # -- putting messages back ---------------------------------------------------------------
    def _put_back(self, msg: StoredMessage, enqueue_time: int, *, roll: bool) -> None:
        """``convert`` + ``doPut``: into the real topic, or (rolled) into the timer topic again."""
        props = dict(msg.properties)
        if not roll and MessageConst.TIMER_DEL_UNIQKEY in props:
            return  # a tombstone is never delivered
        if not roll and self._delivered_before(msg):
            self.stats.redelivery_skipped += 1
            return
        props[MessageConst.TIMER_ENQUEUE_MS] = str(enqueue_time)
        if roll:
            props[MessageConst.TIMER_ROLL_TIMES] = str(_int(props.get(MessageConst.TIMER_ROLL_TIMES)) + 1)
        props[MessageConst.TIMER_DEQUEUE_MS] = str(self.clock())
        if roll:
            topic, queue_id = msg.topic, msg.queue_id
        else:
            topic = props.pop(MessageConst.REAL_TOPIC, "")
            qid = props.pop(MessageConst.REAL_QUEUE_ID, "")
            if not topic or not qid.lstrip("-").isdigit():
                log.error(
                    "timer message %s has no REAL_TOPIC/REAL_QID; skipped", props.get(MessageConst.UNIQ_KEY)
                )
                self.stats.dropped += 1
                return
            queue_id = int(qid)
        to_store = MessageToStore.copy_of(
            msg,
            topic=topic,
            queue_id=queue_id,
            properties=encode_properties(props),
            prepared_transaction_offset=0,
        )
        for attempt in range(PUT_ATTEMPTS):
            put = self.store.put_message(to_store)
            status = put.status
            if status.is_ok and self.on_put is not None and put.append_result is not None:
                self.on_put(topic, 1, put.append_result.wrote_bytes)
            if status.is_ok:
                if roll:
                    self.stats.rolled += 1
                else:
                    self.stats.delivered += 1
                return
            if status in _NO_RETRY:
                break
            if attempt + 1 < PUT_ATTEMPTS:
                time.sleep(0.5 * self.precision_ms / 1000)
        log.error(
            "timer message %s could not be put into %s; dropped", props.get(MessageConst.UNIQ_KEY), topic
        )
        self.stats.dropped += 1

    def _delivered_before(self, msg: StoredMessage) -> bool:
        """Whether a message due before this run started is already in its real topic."""
        props = msg.properties
        uniq = props.get(MessageConst.UNIQ_KEY)
        real = props.get(MessageConst.REAL_TOPIC)
        out = props.get(MessageConst.TIMER_OUT_MS)
        if not uniq or not real or out is None or _int(out) >= self.started_at_ms:
            return False
        found = self.store.query_message(real, uniq, 32, msg.store_timestamp, (1 << 63) - 1)
        try:
            for buf in found.buffers:
                try:
                    copy = decode_stored_message(buf, decompress=False)
                except MessageFormatError:
                    continue
                if copy.topic == real and copy.properties.get(MessageConst.TIMER_OUT_MS) == out:
                    return True
        finally:
            found.release()
        return False

    # -- helpers -----------------------------------------------------------------------------
    def _read(self, offset_py: int) -> StoredMessage | None:
        raw = self.store.look_message_by_offset(offset_py)
        if raw is None:
            return None
        try:
            return decode_stored_message(raw, decompress=False)
        except MessageFormatError:
            return None

    def _floor(self, time_ms: int) -> int:
        return time_ms // self.precision_ms * self.precision_ms

    @property
    def backlog(self) -> int:
        """Messages of the timer topic not yet enqueued."""
        cq = self.store.find_consume_queue(TIMER_TOPIC, 0)
        return 0 if cq is None else max(cq.max_offset_in_queue - self.curr_queue_offset, 0)


def _is_tombstone(msg: StoredMessage) -> bool:
    return MessageConst.TIMER_DEL_UNIQKEY in msg.properties


def _delete_key_of(msg: StoredMessage) -> str | None:
    """The key a tombstone of this message names (None without UNIQ_KEY)."""
    uniq = msg.properties.get(MessageConst.UNIQ_KEY)
    if uniq is None:
        return None
    return delete_key(msg.properties.get(MessageConst.REAL_TOPIC, ""), uniq)


def _int(text: str | None) -> int:
    try:
        return int(text or "0")
    except ValueError:
        return 0
