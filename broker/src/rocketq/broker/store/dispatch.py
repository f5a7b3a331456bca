"""Dispatch (RocketMQ's ``ReputMessageService``): tail the CommitLog, build ConsumeQueues and the index.

Theory of operation.  ``reput_from_offset`` is the CommitLog offset up to which everything has been
dispatched.  Each round reads the written part of the current segment from there, decodes record
headers (no body copy), groups the ConsumeQueue units of consecutive records per queue into one
buffer, appends them in bulk, indexes ``KEYS``/``UNIQ_KEY``, then advances the offset and tells the
arrival listeners ``(topic, queue_id, new max offset)``.  A blank record moves to the next segment.
A record that does not decode in the middle of written data is a bug or corruption: it is logged
with its position and dispatch stops there rather than skipping data.  The same code runs
synchronously during recovery to rebuild derived data; ConsumeQueue and index writes are
idempotent, so replaying already-dispatched records is harmless.  Rounds run under
:attr:`Dispatcher.lock`: usually on the reput thread, but the broker's event loop runs a round
itself after a small inline append (:meth:`Dispatcher.try_dispatch`), which saves the two thread
switches and GIL hand-offs that waking the thread costs for every single send.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from rocketq.broker.store.commit_log import UNSCANNED_TOPICS, CommitLog, DispatchHint, Hinter, ReplicaChunk
from rocketq.broker.store.consume_queue import UNIT, ConsumeQueue
from rocketq.broker.store.flush import FailureLog
from rocketq.broker.store.hint_dispatch import dispatch_hints
from rocketq.broker.store.index_file import IndexService
from rocketq.broker.store.record_batch import enters_consume_queue
from rocketq.client.errors import MessageFormatError
from rocketq.client.remoting.javahash import tags_hash_code
from rocketq.client.remoting.message import BLANK_MAGIC, TRANSACTION_TYPE_MASK, SysFlag, record_header_fields
from rocketq.client.remoting.properties import split_keys
from rocketq.client.remoting.vocabulary import SCHEDULE_TOPIC

log = logging.getLogger(__name__)

ArrivalListener = Callable[[str, int, int], None]
_ROLLBACK = int(SysFlag.TRANSACTION_ROLLBACK)
_UNITS_PER_ROUND = 8192
#: a slave's rounds: what replicaDispatchIntervalMs brought in one round (~25 000 records at
#: 500 k msg/s), not in several back to back, each paying a round's fixed costs
_REPLICA_UNITS_PER_ROUND = 65536
_DURATION = re.compile(r"^(\d+)([smhd])$")
_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_delay_levels(text: str) -> list[int]:
    """``"1s 5s 10s ..."`` -> delays in ms, level 1 first."""
    out = []
    for item in text.split():
        m = _DURATION.match(item)
        if m is None:
            raise ValueError(f"bad delay level {item!r}")
        out.append(int(m.group(1)) * _UNIT_MS[m.group(2)])
    return out


def _segment_pieces(chunk: ReplicaChunk, segment: int) -> list[tuple[int, int, npt.NDArray[np.int64]]]:
    """``chunk`` cut at segment ends (a read may end one segment with its blank filler and go on
    in the next): ``(base, end, record starts from base)`` per segment."""
    starts = np.asarray(chunk.starts, dtype=np.int64)
    pieces = []
    base = chunk.base
    while base < chunk.end:
        end = min(chunk.end, (base // segment + 1) * segment)
        k = int(np.searchsorted(starts, end - chunk.base))
        pieces.append((base, end, starts[:k] - (base - chunk.base)))
        starts = starts[k:]
        base = end
    return pieces


class Dispatcher:
    """Turns CommitLog records into ConsumeQueue units and index entries."""

    def __init__(
        self,
        commit_log: CommitLog,
        find_or_create_cq: Callable[[str, int], ConsumeQueue],
        index_service: IndexService | None,
        delay_levels_ms: list[int],
    ) -> None:
        self.commit_log = commit_log
        self.find_or_create_cq = find_or_create_cq
        self.index_service = index_service
        self.delay_levels_ms = delay_levels_ms
        self.reput_from_offset = 0
        self.listeners: list[ArrivalListener] = []
        self.last_dispatched_timestamp = 0
        self.error: str | None = None
        self.lock = threading.Lock()  # one round at a time, whichever thread runs it
        #: where the last round was to stop: the CommitLog's end when it began (or a held chunk)
        self.round_end = 0
        #: the last round dispatched bytes a slave appended (ReputService then waits longer)
        self.replicated = False
        #: failing rounds (full disk...) are logged once per state change, not per round
        self.failures = FailureLog("dispatching the CommitLog into ConsumeQueues (reput)", log)

    def try_dispatch(self, max_behind_bytes: int) -> bool:
        """Run one round here if no other thread is in one and at most ``max_behind_bytes`` wait;
        True if that caught up with the CommitLog."""
        if self.behind > max_behind_bytes or not self.lock.acquire(blocking=False):
            return False
        try:
            progressed = self.do_reput() > 0
        except Exception as exc:  # never onto the caller (the broker's event loop)
            self.failures.failed(exc)
            return False  # the reput thread retries
        finally:
            self.lock.release()
        if progressed:
            self.failures.succeeded()
        return self.behind <= 0

    @property
    def behind(self) -> int:
        return self.commit_log.max_offset - self.reput_from_offset

    def _tags_code(self, topic: str, props: dict[str, str], store_ts: int) -> int:
        if topic == SCHEDULE_TOPIC:
            level = int(props.get("DELAY", "0") or 0)
            if level > 0 and self.delay_levels_ms:
                level = min(level, len(self.delay_levels_ms))
                return store_ts + self.delay_levels_ms[level - 1]
        return tags_hash_code(props.get("TAGS"))

    def do_reput(self) -> int:
        """Dispatch one round; return the number of records dispatched."""
        if self.reput_from_offset < self.commit_log.min_offset:
            log.warning(
                "reput offset %d is below the commit log minimum %d; moving it up",
                self.reput_from_offset,
                self.commit_log.min_offset,
            )
            self.reput_from_offset = self.commit_log.min_offset
        touched: dict[tuple[str, int], int] = {}
        n = 0
        limit = self.round_end = self._replica_hints()  # this round dispatches nothing at or beyond
        hints = self.commit_log.hints
        group: list[DispatchHint] = []
        offset = self.reput_from_offset
        cap = _REPLICA_UNITS_PER_ROUND if self.replicated else _UNITS_PER_ROUND
        while n < cap:
            while hints and hints[0].base < offset:
                hints.popleft()  # dispatched by the parsing path already
            if hints and hints[0].base == offset:
                hint = hints[0]
                if hint.end > limit:
                    break
                hints.popleft()
                group.append(hint)
                n += len(hint.sizes)
                offset = hint.end
                continue
            # Hinted batches are dispatched together, before any parsed record (index entries stay
            # in CommitLog order); reput_from_offset, which the checkpoint records as dispatched,
            # only moves once they are written.
            self._dispatch_group(group, touched, offset)
            group = []
            if offset >= limit:
                break
            stop_at = min(hints[0].base, limit) if hints else limit
            n += self._dispatch_parsed(offset, stop_at, touched)
            if self.reput_from_offset == offset:
                break
            offset = self.reput_from_offset
        self._dispatch_group(group, touched, offset)
        if touched and self.listeners:
            self._notify(touched)
        return n

    def _replica_hints(self) -> int:
        """Make the hints of the chunks a slave appended since the last round (a few reads: one
        ``hinter`` call per contiguous run in one segment); returns where this round must stop:
        the CommitLog's end when the round began, or the base of a chunk being appended, whose
        hints the next round makes (its bytes are not dispatched without them)."""
        cl = self.commit_log
        written = cl.max_offset  # first: a chunk appended after this is not looked at
        pending = cl.replica_pending
        chunks: list[ReplicaChunk] = []
        while pending and pending[0].end <= written:
            chunks.append(pending.popleft())
        # (a round that continues a replicated round's range dispatches replicated bytes too)
        self.replicated = bool(chunks) or (self.replicated and self.reput_from_offset < self.round_end)
        hold = pending[0].base if pending else written
        run: list[tuple[int, int, npt.NDArray[np.int64]]] = []  # (base, end, starts from base)
        hinter: Hinter | None = None
        for chunk in chunks:
            for piece in _segment_pieces(chunk, cl.mfq.mapped_file_size):
                if run and (
                    piece[0] != run[-1][1]
                    or piece[0] % cl.mfq.mapped_file_size == 0
                    or chunk.hinter is not hinter
                ):
                    self._hint_run(run, hinter)
                    run = []
                run.append(piece)
                hinter = chunk.hinter
        if run:
            self._hint_run(run, hinter)
        return min(written, hold)

    def _hint_run(self, run: list[tuple[int, int, npt.NDArray[np.int64]]], hinter: Hinter | None) -> None:
        """Hints for contiguous pieces of one segment, with one ``hinter`` call."""
        base, end = run[0][0], run[-1][1]
        view = self.commit_log.view(base, end - base)
        if view is None or hinter is None:
            return  # (gone: truncated meanwhile) dispatch decodes whatever is there
        starts = np.concatenate([st + (b - base) for b, _, st in run])
        try:
            self.commit_log.hints.extend(hinter(view, base, starts))
        except Exception:  # hints only save work: a bug in them must not stop dispatch
            log.exception("no dispatch hints for replicated bytes at %d: decoding them", base)

    def _dispatch_group(
        self, group: list[DispatchHint], touched: dict[tuple[str, int], int], offset: int
    ) -> None:
        if group:
            dispatch_hints(group, self.find_or_create_cq, self.index_service, touched)
            self.last_dispatched_timestamp = group[-1].store_timestamp
        self.reput_from_offset = offset

    def _dispatch_parsed(self, offset: int, stop_at: int | None, touched: dict[tuple[str, int], int]) -> int:
        """Decode and dispatch records from ``offset`` to the end of its segment (or ``stop_at``)."""
        tail = self.commit_log.segment_tail(offset)
        if tail is None:
            return 0
        mf, pos, view = tail
        base = offset - pos  # the segment's start offset
        runs: dict[tuple[str, int], tuple[int, int, bytearray, int]] = {}
        n = 0
        p = 0
        index = self.index_service
        limit = len(view) if stop_at is None else min(len(view), stop_at - offset)
        while p < limit and n < _UNITS_PER_ROUND:
            if p + 8 <= limit and int.from_bytes(view[p + 4 : p + 8], "big") == BLANK_MAGIC:
                p = mf.file_size - pos  # go to the next segment
                break
            try:
                h = record_header_fields(view, p)
            except MessageFormatError as exc:
                self._stop_on_corruption(offset + p, exc)
                break
            phy = offset + p
            props = h.properties
            scanned = h.topic not in UNSCANNED_TOPICS
            if enters_consume_queue(h.sys_flag):
                key = (h.topic, h.queue_id)
                tags_code = self._tags_code(h.topic, props, h.store_timestamp) if scanned else 0
                unit = UNIT.pack(phy, h.total_size, tags_code)
                run = runs.get(key)
                if run is not None and run[1] + 1 == h.queue_offset:
                    run[2].extend(unit)
                    runs[key] = (run[0], h.queue_offset, run[2], phy + h.total_size)
                else:
                    if run is not None:
                        self._put_run(key, run)
                    runs[key] = (h.queue_offset, h.queue_offset, bytearray(unit), phy + h.total_size)
            if index is not None and scanned and (h.sys_flag & TRANSACTION_TYPE_MASK) != _ROLLBACK:
                keys = split_keys(props.get("KEYS"))
                uniq = props.get("UNIQ_KEY")
                if uniq:
                    keys.append(uniq)
                if keys:
                    index.build_index(h.topic, keys, phy, h.store_timestamp)
            self.last_dispatched_timestamp = h.store_timestamp
            p += h.total_size
            n += 1
        for key, run in runs.items():
            self._put_run(key, run)
            touched[key] = run[1] + 1
        self.reput_from_offset = base + pos + p
        return n

    def _put_run(self, key: tuple[str, int], run: tuple[int, int, bytearray, int]) -> None:
        self.find_or_create_cq(*key).put_units(run[0], run[2], run[3])

    def _notify(self, touched: dict[tuple[str, int], int]) -> None:
        for (topic, queue_id), max_offset in touched.items():
            for listener in self.listeners:
                try:
                    listener(topic, queue_id, max_offset)
                except Exception:
                    log.exception("arrival listener failed for %s-%d", topic, queue_id)

    def _stop_on_corruption(self, offset: int, exc: Exception) -> None:
        msg = f"cannot dispatch the CommitLog record at offset {offset}: {exc}"
        if self.error != msg:
            log.error("%s; dispatch stops here", msg)
        self.error = msg

    def dispatch_all(self) -> int:
        """Dispatch until caught up with the CommitLog (used by recovery, never with hints)."""
        self.commit_log.hints.clear()
        self.commit_log.replica_pending.clear()
        total = 0
        while True:
            before = self.reput_from_offset
            with self.lock:
                total += self.do_reput()
            if self.reput_from_offset == before:
                return total


class ReputService:
    """The background thread running :meth:`Dispatcher.do_reput`."""

    def __init__(self, dispatcher: Dispatcher, idle_wait_ms: int, replica_interval_ms: int) -> None:
        self.dispatcher = dispatcher
        self.idle_wait_s = idle_wait_ms / 1000
        self.replica_interval_s = replica_interval_ms / 1000
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ReputMessageService", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def wakeup(self) -> None:
        self._wake.set()

    def _run(self) -> None:
        d = self.dispatcher
        while not self._stop.is_set():
            try:
                with d.lock:
                    n = d.do_reput()
                # Caught up with what the round saw: wait for a wakeup (a put) or idle_wait_s.  Not
                # straight into another round for what arrived meanwhile: a slave's appends do not
                # wake this thread, and a round of the few records one round's time brings costs
                # its fixed part for little (rounds of ~1 000 records cost a slave ~30 % less
                # CPU per record than alternating full and near-empty ones).  After a round of
                # replicated bytes the wait is replica_interval_s: nobody waits for a slave's
                # dispatch but its readers, and rounds of ~5 000 records cost it ~20 % less again.
                if d.reput_from_offset >= d.round_end:
                    self._wake.wait(self.replica_interval_s if d.replicated else self.idle_wait_s)
                    self._wake.clear()
                elif d.error is not None:
                    self._stop.wait(0.5)
            except Exception as exc:
                d.failures.failed(exc)
                self._stop.wait(0.1)
            else:
                if n > 0:  # an idle round proves nothing about the disk
                    d.failures.succeeded()

    def halt(self) -> None:
        """Stop at once, without catching up (crash simulation)."""
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def shutdown(self) -> None:
        # Let dispatch catch up before stopping, as RocketMQ does (bounded wait); woken, not left
        # to the end of its wait (replica_interval_s may be long).
        for _ in range(500):
            d = self.dispatcher
            if d.reput_from_offset >= d.commit_log.max_offset or d.error is not None:
                break
            self._wake.set()
            self._stop.wait(0.01)
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
