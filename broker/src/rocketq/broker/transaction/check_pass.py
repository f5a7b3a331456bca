"""The check pass (RocketMQ's ``TransactionalMessageServiceImpl.check``): one walk over the half
queue from the persisted progress (:mod:`.progress`) to the queue's end as it was when the pass
started, that skips finished and superseded records, parks those checked too often or too old,
re-appends immune ones unchanged and asks a live producer of the group about the others through a
new copy carrying the next check count (the rules are listed in :mod:`.service`).  It shares the
service's lock, finished-offset bitmap and newest-copy map, and owns the check progress.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import Enum

import numpy as np
import numpy.typing as npt

from rocketq.broker.store.message_store import MessageStore
from rocketq.broker.store.record_batch import MessageToStore
from rocketq.broker.store.status import AppendMessageResult, PutMessageResult
from rocketq.broker.transaction.config import TransactionConfig
from rocketq.broker.transaction.half_message import (
    HALF_QUEUE_ID,
    HALF_TOPIC,
    OP_TOPIC,
    check_request_body,
    check_times,
    immunity_ms,
    origin_offset,
    renew_half_message,
    to_parked_message,
)
from rocketq.broker.transaction.op_log import OP_QUEUE_ID, DoneOffsets, iter_queue_records
from rocketq.broker.transaction.progress import CheckProgress
from rocketq.client.remoting.headers import CheckTransactionStateRequestHeader
from rocketq.client.remoting.message import StoredMessage
from rocketq.client.remoting.properties import MessageConst

__all__ = ["CheckPass", "CheckStats", "SendCheck", "unfinished_runs"]

log = logging.getLogger(__name__)

#: send_check(producer group, CHECK_TRANSACTION_STATE body, header) -> a live producer was found
SendCheck = Callable[[str, bytes, CheckTransactionStateRequestHeader], bool]


@dataclass(frozen=True, kw_only=True, slots=True)
class CheckStats:
    """What one check pass did."""

    begin_offset: int  # half-queue progress before the pass
    end_offset: int  # half-queue progress after the pass
    scanned: int = 0
    skipped_done: int = 0
    skipped_superseded: int = 0
    renewed_immune: int = 0
    checked: int = 0  # CHECK_TRANSACTION_STATE handed to a live producer
    no_producer: int = 0  # checks counted although no producer of the group was online
    parked: int = 0
    stop_reason: str = "caught up"


class _Step(Enum):
    NEXT = "next"
    STOP = "stop"


class _Counters:
    __slots__ = (
        "checked",
        "no_producer",
        "parked",
        "renewed_immune",
        "scanned",
        "skipped_done",
        "skipped_superseded",
        "stop_reason",
    )

    def __init__(self) -> None:
        self.scanned = self.skipped_done = self.skipped_superseded = self.renewed_immune = 0
        self.checked = self.no_producer = self.parked = 0
        self.stop_reason = "caught up"


class CheckPass:
    """Runs check passes one at a time; ``lock`` and ``latest`` are the owning service's."""

    def __init__(
        self,
        store: MessageStore,
        config: TransactionConfig,
        progress: CheckProgress,
        *,
        lock: threading.RLock,
        latest: dict[int, int],
    ) -> None:
        self.store = store
        self.config = config
        self._progress = progress
        self._lock = lock
        self._latest = latest  # origin half offset -> newest copy's half offset
        self._pass_lock = threading.Lock()  # one check pass at a time
        self.next_half = 0  # the next half-queue offset a pass will examine
        hours = float(getattr(store.config, "file_reserved_time_hours", 72))
        self._max_age_ms = int(hours * 3_600_000)

    def restore(self, min_half: int) -> int:
        """Resume from the persisted progress (not below ``min_half``); the offset resumed from."""
        self.next_half = max(self._progress.load(), min_half)
        return self.next_half

    def run(self, now_ms: int, send_check: SendCheck, done: DoneOffsets) -> CheckStats:
        """One pass; ``done`` is the service's finished-offset bitmap.  Never raises for a record."""
        with self._pass_lock:
            return self._run(now_ms, send_check, done)

    def _run(self, now_ms: int, send_check: SendCheck, done: DoneOffsets) -> CheckStats:
        store = self.store
        started = time.monotonic()
        budget_s = self.config.max_check_pass_ms / 1000
        min_half = store.get_min_offset_in_queue(HALF_TOPIC, HALF_QUEUE_ID)
        end = store.get_max_offset_in_queue(HALF_TOPIC, HALF_QUEUE_ID)
        with self._lock:
            begin = max(self.next_half, min_half)
            done.trim(min_half)
            # Offsets already finished are skipped without reading their records: a pass after a
            # busy exactly-once sink finds nearly every half committed, and decoding each one only
            # to skip it cost more broker CPU than the commit itself.
            finished = done.mask(np.arange(begin, max(begin, end), dtype=np.int64))
        c = _Counters()
        offset = begin
        stopped = False
        for lo, hi in unfinished_runs(finished, begin):
            offset = max(offset, lo)  # everything before ``lo`` is finished
            for rec in iter_queue_records(store, HALF_TOPIC, HALF_QUEUE_ID, lo, hi):
                if time.monotonic() - started > budget_s:
                    c.stop_reason = "time budget exhausted"
                    stopped = True
                    break
                c.scanned += 1
                try:
                    step = self._check_one(rec, now_ms, send_check, done, c)
                except Exception:
                    log.exception("check of half offset %d failed", rec.queue_offset)
                    c.stop_reason = "error"
                    stopped = True
                    break
                if step is _Step.STOP:
                    c.scanned -= 1
                    stopped = True
                    break
                offset = rec.queue_offset + 1
            if stopped:
                break
        if not stopped and len(finished) and finished[-1]:
            offset = end  # the pass ends on finished offsets
        skipped = int(np.count_nonzero(finished[: offset - begin]))  # never read
        c.scanned += skipped
        c.skipped_done += skipped
        with self._lock:
            self.next_half = max(self.next_half, offset)
            self._progress.save(self.next_half, store.get_max_offset_in_queue(OP_TOPIC, OP_QUEUE_ID))
        return CheckStats(
            begin_offset=begin,
            end_offset=self.next_half,
            scanned=c.scanned,
            skipped_done=c.skipped_done,
            skipped_superseded=c.skipped_superseded,
            renewed_immune=c.renewed_immune,
            checked=c.checked,
            no_producer=c.no_producer,
            parked=c.parked,
            stop_reason=c.stop_reason,
        )

    def _check_one(
        self, rec: StoredMessage, now_ms: int, send_check: SendCheck, done: DoneOffsets, c: _Counters
    ) -> _Step:
        cfg = self.config
        qo, origin = rec.queue_offset, origin_offset(rec)
        with self._lock:
            if qo in done or origin in done:
                c.skipped_done += 1
                self._latest.pop(origin, None)
                return _Step.NEXT
            if self._latest.get(origin, qo) > qo:
                c.skipped_superseded += 1
                return _Step.NEXT
            times = check_times(rec)
            age = now_ms - rec.born_timestamp
            if times >= cfg.transaction_check_max or age > self._max_age_ms:
                return self._park(rec, origin, times, c)
            immunity = immunity_ms(rec, cfg.transaction_timeout_ms)
            if immunity is not None and age < immunity:
                if self._renew(rec, origin, None) is None:
                    c.stop_reason = "store refused a half copy"
                    return _Step.STOP
                c.renewed_immune += 1
                return _Step.NEXT
            if immunity is None and 0 <= age < cfg.transaction_timeout_ms:
                c.stop_reason = "younger than the transaction timeout"
                return _Step.STOP
            renewed = self._renew(rec, origin, times + 1)
            if renewed is None:
                c.stop_reason = "store refused a half copy"
                return _Step.STOP
        copy, stored = renewed
        group, body, header = _check_request(copy, stored)
        try:
            live = send_check(group, body, header)
        except Exception:
            log.exception("send_check failed for half offset %d of group %s", stored.queue_offset, group)
            live = False
        if live:
            c.checked += 1
        else:
            c.no_producer += 1
            log.warning(
                "no live producer of group %s to check half offset %d (check %d of %d)",
                group,
                stored.queue_offset,
                times + 1,
                cfg.transaction_check_max,
            )
        return _Step.NEXT

    def _renew(
        self, rec: StoredMessage, origin: int, times: int | None
    ) -> tuple[MessageToStore, AppendMessageResult] | None:
        """Append a copy of ``rec`` to the half queue (caller holds the lock)."""
        copy = renew_half_message(rec, origin=origin, check_times=times)
        result: PutMessageResult = self.store.put_message(copy)
        if not result.is_ok or result.append_result is None:
            log.error("cannot re-append half offset %d: %s", rec.queue_offset, result.status.value)
            return None
        self._latest[origin] = result.append_result.queue_offset
        return copy, result.append_result

    def _park(self, rec: StoredMessage, origin: int, times: int, c: _Counters) -> _Step:
        result: PutMessageResult = self.store.put_message(to_parked_message(rec, origin=origin))
        if not result.is_ok:
            log.error("cannot park half offset %d: %s", rec.queue_offset, result.status.value)
            c.stop_reason = "store refused a parked copy"
            return _Step.STOP
        self._latest.pop(origin, None)
        c.parked += 1
        log.warning(
            "half message %s (half offset %d, origin %d) parked in TRANS_CHECK_MAX_TIME_TOPIC after "
            "%d checks",
            rec.uniq_key,
            rec.queue_offset,
            origin,
            times,
        )
        return _Step.NEXT


def unfinished_runs(finished: npt.NDArray[np.bool_], base: int) -> Iterator[tuple[int, int]]:
    """The ``[lo, hi)`` runs of offsets (``base`` + index) that are not ``finished``, in order."""
    if not len(finished):
        return
    edges = np.flatnonzero(np.diff(np.concatenate(([True], finished, [True])).astype(np.int8)))
    # edges alternate: a run of unfinished offsets starts (True -> False), then ends (False -> True)
    for lo, hi in zip(edges[0::2].tolist(), edges[1::2].tolist(), strict=True):
        yield base + lo, base + hi


def _check_request(
    copy: MessageToStore, stored: AppendMessageResult
) -> tuple[str, bytes, CheckTransactionStateRequestHeader]:
    props = copy.properties if not isinstance(copy.properties, str) else {}
    uniq = props.get(MessageConst.UNIQ_KEY)
    header = CheckTransactionStateRequestHeader(
        tran_state_table_offset=stored.queue_offset,
        commit_log_offset=stored.wrote_offset,
        msg_id=uniq,
        transaction_id=uniq,
        offset_msg_id=stored.msg_id,
        topic=props.get(MessageConst.REAL_TOPIC),
    )
    return props.get(MessageConst.PRODUCER_GROUP, ""), check_request_body(copy, stored), header
