"""TransactionalMessageService: prepare, END_TRANSACTION and the check-back pass.

Theory of operation.  A prepared send is stored as a *half message* in queue 0 of
``RMQ_SYS_TRANS_HALF_TOPIC`` (:mod:`.half_message`).  END_TRANSACTION names one stored half record
(``commitLogOffset`` + ``tranStateTableOffset``); commit writes the real message and then an op
message, rollback only the op message (:mod:`.op_log`).

The check pass (:mod:`.check_pass`) walks the half queue from the persisted progress
(:mod:`.progress`) up to the queue's end *as it was when the pass started*, so copies appended
during the pass wait for the next one.  For each record, in RocketMQ's order:

* finished (its offset or its origin's offset is in the op log) -> skip;
* superseded (a newer copy of the same transaction exists further on) -> skip;
* checked ``transaction_check_max`` times already, or older than the CommitLog retention ->
  *parked*: copied to ``TRANS_CHECK_MAX_TIME_TOPIC`` and never checked again;
* ``CHECK_IMMUNITY_TIME_IN_SECONDS`` set and not yet elapsed -> re-appended unchanged, move on;
* younger than ``transaction_timeout_ms`` (no immunity property) -> stop the pass here;
* otherwise re-appended with ``TRANSACTION_CHECK_TIMES`` + 1 and ``send_check`` is called with
  the new copy's offsets.  The new copy is what the producer's answer will name.

Every copy carries ``TRAN_PREPARED_QUEUE_OFFSET`` = the half offset of the transaction's first
record (its *origin*), and every op message lists the ended copy's offset and the origin, so a
transaction is finished as soon as *any* of its copies is ended; a second END_TRANSACTION for any
copy is an idempotent no-op.  A check whose producer group has no live channel (``send_check``
returns False) still counts, as in RocketMQ: that bounds how often a dead group's messages are
copied and parks them after ``transaction_check_max`` passes, where a late END_TRANSACTION can
still commit them.

State rebuilt at start (:meth:`recover`) from the log alone: the finished-offset bitmap from the
whole op queue plus the committed real messages a crash left without their op record (found by a
header-only CommitLog scan from the last op record, :mod:`.commit_scan`; the op record is then
appended), the newest copy of every transaction from the half queue above the progress.

rocketq's batched transactions (:mod:`.ranged`) add :meth:`prepare_half_batch` (a prepared batch
in one append) and :meth:`end_transaction_ranges` (commit or roll back ranges of half offsets
with one append per destination queue and one op message); each half message of a batch is
otherwise an ordinary half message, checked back and ended one by one like any other.  Committed
messages carrying ``DELAY`` go to ``SCHEDULE_TOPIC_XXXX`` as RocketMQ's commit does.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

import numpy as np

from rocketq.broker.schedule.delay import parse_delay_levels
from rocketq.broker.store.message_store import MessageStore
from rocketq.broker.store.record_batch import MessageToStore, PreparedBatch
from rocketq.broker.store.status import PutMessageResult, PutMessageStatus
from rocketq.broker.transaction.bulk_commit import BulkHalves, committed_batches, load_bulk
from rocketq.broker.transaction.check_pass import CheckPass, CheckStats, SendCheck, unfinished_runs
from rocketq.broker.transaction.commit_scan import find_unrecorded_commits, scan_start
from rocketq.broker.transaction.config import TransactionConfig
from rocketq.broker.transaction.half_message import (
    HALF_QUEUE_ID,
    HALF_TOPIC,
    origin_offset,
    real_queue,
    to_half_message,
)
from rocketq.broker.transaction.half_read import HalfColumns
from rocketq.broker.transaction.op_log import (
    DoneOffsets,
    decimal_digits,
    iter_queue_records,
    make_op_message,
    read_op_offsets,
)
from rocketq.broker.transaction.progress import CheckProgress, OffsetTable
from rocketq.broker.transaction.ranged import (
    RangedEndResult,
    RangedRefused,
    append_committed,
    check_ranges,
    committed_message,
    load_ranges,
    to_half_batch,
)
from rocketq.client.errors import MessageFormatError
from rocketq.client.remoting.codes import ResponseCode
from rocketq.client.remoting.headers import EndTransactionRequestHeader
from rocketq.client.remoting.message import StoredMessage, SysFlag, decode_stored_message
from rocketq.client.remoting.properties import MessageConst

__all__ = ["CheckStats", "SendCheck", "TransactionalMessageService"]

log = logging.getLogger(__name__)

COMMIT_TYPE = int(SysFlag.TRANSACTION_COMMIT)
ROLLBACK_TYPE = int(SysFlag.TRANSACTION_ROLLBACK)
_FIND_FAILED = "Find prepared transaction message failed"

_PUT_ERRORS: dict[PutMessageStatus, tuple[ResponseCode, str]] = {
    PutMessageStatus.CREATE_MAPPED_FILE_FAILED: (ResponseCode.SYSTEM_ERROR, "Create mapped file failed."),
    PutMessageStatus.MESSAGE_ILLEGAL: (
        ResponseCode.MESSAGE_ILLEGAL,
        "The message is illegal, maybe msg body or properties length not matched.",
    ),
    PutMessageStatus.PROPERTIES_SIZE_EXCEEDED: (
        ResponseCode.MESSAGE_ILLEGAL,
        "The message is illegal, maybe msg body or properties length not matched.",
    ),
    PutMessageStatus.SERVICE_NOT_AVAILABLE: (
        ResponseCode.SERVICE_NOT_AVAILABLE,
        "Service not available now.",
    ),
    PutMessageStatus.OS_PAGE_CACHE_BUSY: (
        ResponseCode.SYSTEM_ERROR,
        "OS page cache busy, please try another machine",
    ),
}


def put_error(status: PutMessageStatus) -> tuple[ResponseCode, str]:
    """The END_TRANSACTION response for a put that did not store the message."""
    return _PUT_ERRORS.get(status, (ResponseCode.SYSTEM_ERROR, status.value))


class TransactionalMessageService:
    """Half messages over a ``MessageStore``; thread-safe (one lock around state changes)."""

    def __init__(
        self,
        store: MessageStore,
        config: TransactionConfig | None = None,
        *,
        offsets: OffsetTable | None = None,
        clock_ms: Callable[[], int] | None = None,
    ) -> None:
        self.store = store
        self.config = config or TransactionConfig()
        self._clock_ms = clock_ms or (lambda: int(time.time() * 1000))
        self._lock = threading.RLock()
        self._done = DoneOffsets()
        self._latest: dict[int, int] = {}  # origin half offset -> newest copy's half offset
        progress = CheckProgress(store.config.config_dir, offsets)
        self._checker = CheckPass(store, self.config, progress, lock=self._lock, latest=self._latest)
        self._recovered = False
        delay_text = getattr(store.config, "message_delay_level", None)
        self._max_delay_level = len(parse_delay_levels(delay_text)) if isinstance(delay_text, str) else 18
        #: the store's batch limit: larger groups of committed messages take several appends
        self._max_batch_bytes = int(getattr(store.config, "max_message_size_bytes", 4 * 1024 * 1024))
        self._max_properties = int(getattr(store.config, "max_properties_size_bytes", 32767))
        #: called with (topic, messages, bytes) once per commit that stored messages (mqadmin statsAll)
        self.on_commit: Callable[[str, int, int], None] | None = None

    # ------------------------------------------------------------------ recovery
    def recover(self) -> None:
        """Rebuild the in-memory state from the log (idempotent; call after ``store.start()``)."""
        with self._lock:
            if self._recovered:
                return
            store = self.store
            min_half = store.get_min_offset_in_queue(HALF_TOPIC, HALF_QUEUE_ID)
            max_half = store.get_max_offset_in_queue(HALF_TOPIC, HALF_QUEUE_ID)
            self._done = DoneOffsets(min_half)
            ops = read_op_offsets(store, self._done)
            self._repair_commit_window()
            next_half = self._checker.restore(min_half)
            self._latest.clear()
            copies = 0
            # (finished offsets are not read: a finished copy's origin is finished too)
            finished = self._done.mask(np.arange(next_half, max(next_half, max_half), dtype=np.int64))
            for lo, hi in unfinished_runs(finished, next_half):
                for rec in iter_queue_records(store, HALF_TOPIC, HALF_QUEUE_ID, lo, hi):
                    origin = origin_offset(rec)
                    if origin != rec.queue_offset:
                        copies += 1
                        if rec.queue_offset > self._latest.get(origin, -1):
                            self._latest[origin] = rec.queue_offset
            self._recovered = True
            log.info(
                "transactions recovered: half queue [%d, %d), check progress %d, %d op records, "
                "%d check copies pending",
                min_half,
                max_half,
                next_half,
                ops,
                copies,
            )

    def _repair_commit_window(self) -> None:
        """End the committed transactions whose op record a crash lost (:mod:`.commit_scan`).

        Their real messages are in the log, so they are finished: the missing op record is
        appended (the state becomes durable) and a replayed COMMIT is a no-op.
        """
        if getattr(self.store, "commit_log", None) is None:
            return
        start = scan_start(self.store)
        if start is None:
            log.info("transactions recovered: no half message, no commit/op crash window to scan")
            return
        found, seen = find_unrecorded_commits(self.store, start, self._done)
        if found:
            offsets = [off for c in found for off in (c.half_offset, c.origin)]
            error = self._append_ops(offsets, found[0].store_host)
            if error is not None:
                log.error(
                    "op record for %d recovered commits not written (%s): they are ended in memory only",
                    len(found),
                    error[1],
                )
            for c in found:
                self._done.add(c.half_offset)
                self._done.add(c.origin)
        log.info(
            "transactions recovered: %d committed transactions had no op record (crash between the commit "
            "and its op message; op record appended), %d committed records scanned from CommitLog offset %d",
            len(found),
            seen,
            start,
        )

    @property
    def check_progress(self) -> int:
        """The next half-queue offset the check pass will examine."""
        return self._checker.next_half

    def is_finished(self, half_offset: int) -> bool:
        """True if the op log marks this half-queue offset committed or rolled back."""
        return half_offset in self._done

    # ------------------------------------------------------------------ prepare
    def prepare(self, msg: MessageToStore) -> PutMessageResult:
        """Store a prepared send as a half message (the result's queue offset is the half offset)."""
        return self.store.put_message(to_half_message(msg))

    def prepare_half_batch(self, msgs: Sequence[MessageToStore]) -> PutMessageResult:
        """Store prepared messages of one topic and queue as half messages in ONE append.

        The result's queue offset is the first half offset (the others follow contiguously) and
        its msg_id the comma-joined offset msgIds.  The caller checks ``TRAN_MSG``/``PGROUP``
        (:func:`.ranged.check_half_batch`).
        """
        return self.store.put_messages(to_half_batch(msgs))

    # ------------------------------------------------------------------ end transaction
    def end_transaction(self, header: EndTransactionRequestHeader) -> tuple[ResponseCode, str | None]:
        """Commit or roll back the half message ``header`` names; (response code, remark)."""
        kind = header.commit_or_rollback
        if kind not in (COMMIT_TYPE, ROLLBACK_TYPE):
            return ResponseCode.SUCCESS, None  # unknown (0) or garbage: RocketMQ ignores it
        self.recover()
        half = self._find_half(header.commit_log_offset)
        if half is None:
            return ResponseCode.SYSTEM_ERROR, _FIND_FAILED
        error = _validate(half, header)
        if error is not None:
            log.warning("END_TRANSACTION rejected (%s): %s", error, header)
            return ResponseCode.SYSTEM_ERROR, error
        qo, origin = half.queue_offset, origin_offset(half)
        with self._lock:
            if qo in self._done or origin in self._done:
                log.info("END_TRANSACTION for finished half offset %d (origin %d): no-op", qo, origin)
                return ResponseCode.SUCCESS, None
            if kind == COMMIT_TYPE:
                real = committed_message(half, origin, self._max_delay_level)
                result: PutMessageResult = self.store.put_message(real)
                if not result.is_ok:
                    log.error("commit of half offset %d failed: %s", qo, result.status.value)
                    return put_error(result.status)
                if self.on_commit is not None and result.append_result is not None:
                    self.on_commit(real.topic, 1, result.append_result.wrote_bytes)
            op = make_op_message([qo, origin], store_host=half.store_host, now_ms=self._clock_ms())
            op_result: PutMessageResult = self.store.put_message(op)
            if not op_result.is_ok:
                log.error("op message for half offset %d not written: %s", qo, op_result.status.value)
                if kind == ROLLBACK_TYPE:
                    return put_error(op_result.status)
            self._done.add(qo)
            self._done.add(origin)
            self._latest.pop(origin, None)
        return ResponseCode.SUCCESS, None

    def end_transaction_ranges(
        self, header: EndTransactionRequestHeader, ranges: Sequence[tuple[int, int]]
    ) -> RangedEndResult:
        """Commit or roll back every half message of ``ranges`` (``(first half offset, count)``).

        The header names the first half message (``tranStateTableOffset``, ``commitLogOffset``)
        and the producer group every half message must carry.  Offsets already ended are
        skipped.  A commit appends the real messages per destination queue (:func:`.ranged.append_committed`),
        then one op message lists every offset ended (more only if it exceeds the store's
        message size); a rollback writes only the op message.
        """
        kind = header.commit_or_rollback
        if kind not in (COMMIT_TYPE, ROLLBACK_TYPE):
            return RangedEndResult(code=ResponseCode.SUCCESS, remark="state unknown: nothing ended")
        self.recover()
        cfg = self.config
        try:
            check_ranges(self.store, ranges, max_messages=cfg.transaction_batch_max_messages)
            bulk = load_bulk(
                self.store, ranges, header.producer_group, max_bytes=cfg.transaction_batch_max_bytes
            )
        except RangedRefused as refused:
            log.warning("ranged END_TRANSACTION refused (%s): %s", refused.remark, header)
            return RangedEndResult(code=refused.code, remark=refused.remark)
        if bulk is not None:
            wrong = _wrong_first(header, int(bulk.queue_offsets[0]), int(bulk.phys[0]))
            if wrong is not None:
                return wrong
            # The committed records are built before taking the lock for the append (another
            # queue's commit may hold it while its append writes), unless some are ended already
            # (a repeated commit); rebuilt under it only if some were ended meanwhile.
            built = None
            fresh = False
            if kind == COMMIT_TYPE:
                with self._lock:
                    fresh = not self._done.mask(bulk.queue_offsets).any()
            if fresh:
                everything = np.arange(len(bulk), dtype=np.int64)
                built = committed_batches(bulk, everything, self._max_batch_bytes, self._max_properties)
                if built is None:
                    bulk = None  # a committed message the rebuild cannot store: the general path
            if bulk is not None:
                with self._lock:
                    outcome = self._end_bulk(kind, bulk, built)
                if outcome is not None:
                    return _ranged_result(kind, *outcome)
            # a committed message the rebuild cannot store: the general path below reports it
        try:
            halves = load_ranges(
                self.store, ranges, header.producer_group, max_bytes=cfg.transaction_batch_max_bytes
            )
        except RangedRefused as refused:
            log.warning("ranged END_TRANSACTION refused (%s): %s", refused.remark, header)
            return RangedEndResult(code=refused.code, remark=refused.remark)
        wrong = _wrong_first(header, halves.queue_offsets[0], halves.physical_offsets[0])
        if wrong is not None:
            return wrong
        with self._lock:
            todo = self._pending(halves)
            skipped = len(halves) - len(todo)
            todo, failure = self._end_pending(kind, halves, todo, halves.store_hosts[0])
        return _ranged_result(kind, len(todo), skipped, failure)

    def _end_bulk(
        self, kind: int, bulk: BulkHalves, built: list[PreparedBatch] | None = None
    ) -> tuple[int, int, tuple[ResponseCode, str] | None] | None:
        """:meth:`_end_pending` for records read in bulk (caller holds the lock): (ended, skipped, the
        error); None, with nothing written, if a committed message cannot be rebuilt.  ``built``: the
        committed records of every record of ``bulk``, used when none of them is ended yet."""
        qos = bulk.queue_offsets
        pending = np.flatnonzero(~self._done.mask(qos))
        skipped = len(qos) - len(pending)
        failure: tuple[ResponseCode, str] | None = None
        stored = len(pending)
        if kind == COMMIT_TYPE and stored:
            batches = (
                built
                if built is not None and not skipped
                else committed_batches(bulk, pending, self._max_batch_bytes, self._max_properties)
            )
            if batches is None:
                return None
            stored = 0
            wrote: dict[str, list[int]] = {}  # topic -> [messages, bytes], for on_commit
            for prep in batches:
                result: PutMessageResult = self.store.put_prepared(prep)
                if result.is_ok and self.on_commit is not None and result.append_result is not None:
                    amounts = wrote.setdefault(prep.topic, [0, 0])
                    amounts[0] += prep.n
                    amounts[1] += result.append_result.wrote_bytes
                if not result.is_ok:
                    log.error(
                        "ranged commit stopped after %d of %d messages: %s",
                        stored,
                        len(pending),
                        result.status.value,
                    )
                    failure = put_error(result.status)
                    break
                stored += prep.n
            if self.on_commit is not None:
                for topic, (count, size) in wrote.items():
                    self.on_commit(topic, count, size)
        ended = qos[pending[:stored]]
        if not len(ended):
            return 0, skipped, failure
        error = self._append_ops(ended.tolist(), bulk.store_host, distinct=True)
        if error is not None and kind == ROLLBACK_TYPE:
            return 0, skipped, error
        self._done.add_many(ended)
        if self._latest:
            for origin in ended.tolist():
                self._latest.pop(origin, None)
        return len(ended), skipped, failure

    def _pending(self, cols: HalfColumns) -> list[int]:
        """Indices of the records not ended yet, one per transaction (caller holds the lock)."""
        todo: list[int] = []
        origins: set[int] = set()
        done = self._done
        ended_q = done.contains_many(cols.queue_offsets)
        ended_o = ended_q if cols.origins == cols.queue_offsets else done.contains_many(cols.origins)
        for i, origin in enumerate(cols.origins):
            if ended_q[i] or ended_o[i] or origin in origins:
                continue
            origins.add(origin)
            todo.append(i)
        return todo

    def _end_pending(
        self,
        kind: int,
        cols: HalfColumns,
        todo: list[int],
        store_host: tuple[str, int],
    ) -> tuple[list[int], tuple[ResponseCode, str] | None]:
        """Commit (real messages, then ops) or roll back (ops) records ``todo``; (what was ended, the error).

        A commit that fails part-way still records the ops of what it stored, so a retry skips it.
        """
        failure: tuple[ResponseCode, str] | None = None
        if kind == COMMIT_TYPE and todo:
            wrote: dict[str, list[int]] = {}  # topic -> [messages, bytes], for on_commit
            stored, failed = append_committed(
                self.store, cols, todo, self._max_delay_level, self._max_batch_bytes, wrote
            )
            if self.on_commit is not None:
                for topic, (count, size) in wrote.items():
                    self.on_commit(topic, count, size)
            if failed is not None:
                log.error(
                    "ranged commit stopped after %d of %d messages: %s",
                    len(stored),
                    len(todo),
                    failed.status.value,
                )
                failure = put_error(failed.status)
                todo = stored
        if not todo:
            return todo, failure
        qos, origins = cols.queue_offsets, cols.origins
        error = self._append_ops([off for i in todo for off in (qos[i], origins[i])], store_host)
        if error is not None and kind == ROLLBACK_TYPE:
            return [], error
        ended = [qos[i] for i in todo]
        self._done.add_many(ended)
        if origins != qos:
            self._done.add_many([origins[i] for i in todo])
        if self._latest:
            for i in todo:
                self._latest.pop(origins[i], None)
        return todo, failure

    def _append_ops(
        self, offsets: list[int], store_host: tuple[str, int], *, distinct: bool = False
    ) -> tuple[ResponseCode, str] | None:
        """Op message(s) finishing ``offsets`` (``distinct``: no offset repeats): one, unless its body
        would exceed half the message size."""
        limit = max(64, self._max_batch_bytes // 2)
        offsets = offsets if distinct else list(dict.fromkeys(offsets))
        distinct_offsets = np.asarray(offsets, dtype=np.int64)
        ends = np.cumsum(decimal_digits(distinct_offsets) + 1)  # digits + the comma
        lo = 0
        while lo < len(offsets):
            before = int(ends[lo - 1]) if lo else 0
            hi = max(lo + 1, int(np.searchsorted(ends, before + limit, side="right")))
            part = offsets[lo:hi]
            result: PutMessageResult = self.store.put_message(
                make_op_message(part, store_host=store_host, now_ms=self._clock_ms())
            )
            if not result.is_ok:
                log.error("op message for %d half offsets not written: %s", len(part), result.status.value)
                return put_error(result.status)
            lo = hi
        return None

    def _find_half(self, commit_log_offset: int) -> StoredMessage | None:
        raw = self.store.look_message_by_offset(commit_log_offset)
        if raw is None:
            return None
        try:
            half = decode_stored_message(raw, decompress=False)
        except MessageFormatError as exc:
            log.warning("END_TRANSACTION names offset %d, which holds no record: %s", commit_log_offset, exc)
            return None
        if half.topic != HALF_TOPIC or real_queue(half) is None:
            log.warning(
                "END_TRANSACTION names offset %d, a %s record, not a half message",
                commit_log_offset,
                half.topic,
            )
            return None
        return half

    # ------------------------------------------------------------------ check pass
    def check(self, now_ms: int, send_check: SendCheck) -> CheckStats:
        """One check pass over the half queue (see the module docstring); never raises for a record."""
        self.recover()
        return self._checker.run(now_ms, send_check, self._done)


def _wrong_first(
    header: EndTransactionRequestHeader, queue_offset: int, physical_offset: int
) -> RangedEndResult | None:
    """The refusal when the header does not name the first half message of the ranges."""
    if queue_offset != header.tran_state_table_offset:
        return RangedEndResult(
            code=ResponseCode.SYSTEM_ERROR, remark="The transaction state table offset wrong"
        )
    if physical_offset != header.commit_log_offset:
        return RangedEndResult(code=ResponseCode.SYSTEM_ERROR, remark="The commit log offset wrong")
    return None


def _ranged_result(
    kind: int, ended: int, skipped: int, failure: tuple[ResponseCode, str] | None
) -> RangedEndResult:
    verb = "committed" if kind == COMMIT_TYPE else "rolled back"
    if failure is not None:
        remark = f"{failure[1]} ({verb} {ended} before the failure, skipped {skipped} already ended)"
        return RangedEndResult(code=failure[0], remark=remark, ended=ended, skipped=skipped)
    return RangedEndResult(
        code=ResponseCode.SUCCESS,
        remark=f"{verb} {ended}, skipped {skipped} already ended",
        ended=ended,
        skipped=skipped,
    )


def _validate(half: StoredMessage, header: EndTransactionRequestHeader) -> str | None:
    """RocketMQ's ``checkPrepareMessage``: the remark of the first mismatch, or None."""
    if half.properties.get(MessageConst.PRODUCER_GROUP) != header.producer_group:
        return "The producer group wrong"
    if half.queue_offset != header.tran_state_table_offset:
        return "The transaction state table offset wrong"
    if half.physical_offset != header.commit_log_offset:
        return "The commit log offset wrong"
    return None
