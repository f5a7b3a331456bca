"""MessageStore: the storage engine's facade (RocketMQ's ``DefaultMessageStore``).

Theory of operation.  ``start`` takes the lock file, notes whether the last exit was clean (no
``abort`` file) and creates ``abort`` (:mod:`.lock_file`), loads the CommitLog, ConsumeQueues
(:mod:`.consume_queue_store`), index files and the checkpoint, runs recovery (:mod:`.recovery`),
re-dispatches synchronously until derived data is complete and rebuilds the per-queue offset table
(:mod:`.rebuild`), then starts the reput and flush threads (:mod:`.services`) and the clean thread.
Appends go through the CommitLog under one lock; with SYNC_FLUSH the caller then waits for the
group commit (``put_batch``), or, on an event loop, appends with ``put_batch_nowait`` (which hands
back a continuation for a worker thread when the append could wait) and is called back by the
group-commit thread (``when_flushed``).  Reads are lock-free and return views of the mapped records
(:mod:`.reader`).  ``shutdown`` lets dispatch catch up, flushes everything, writes the checkpoint,
deletes ``abort`` and releases the lock.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence

from rocketq.broker.store import reader, rebuild
from rocketq.broker.store.checkpoint import StoreCheckpoint
from rocketq.broker.store.clean import CleanService, DiskUsageProbe
from rocketq.broker.store.commit_log import (
    CommitLog,
    DispatchHint,
    Hinter,
)
from rocketq.broker.store.config import END_FILE_MIN_BLANK_LENGTH, StoreConfig
from rocketq.broker.store.consume_queue import ConsumeQueue
from rocketq.broker.store.consume_queue_store import ConsumeQueueStore
from rocketq.broker.store.dispatch import ArrivalListener, Dispatcher, ReputService, parse_delay_levels
from rocketq.broker.store.errors import StoreCorruptError, StoreError
from rocketq.broker.store.flush import GroupCommitService
from rocketq.broker.store.index_file import IndexService
from rocketq.broker.store.lock_file import StoreLock, mark_clean_exit, mark_running
from rocketq.broker.store.record_batch import (
    MessageBatchToStore,
    MessageToStore,
    PreparedBatch,
    batch_from_messages,
    prepare_batch,
)
from rocketq.broker.store.services import StoreServices
from rocketq.broker.store.status import (
    AppendMessageStatus,
    GetMessageResult,
    PutMessageResult,
    PutMessageStatus,
    QueryMessageResult,
)

log = logging.getLogger(__name__)

__all__ = ["MessageStore", "PutOutcome"]

#: :meth:`MessageStore.dispatch_appended` runs a dispatch round on the caller's thread up to this backlog.
INLINE_DISPATCH_MAX_BYTES = 64 * 1024
#: An append's result and the CommitLog offset that must be durable before acknowledging it (0: none).
PutOutcome = tuple[PutMessageResult, int]


class MessageStore:
    """CommitLog + ConsumeQueues + index + services, behind the API the broker's processors use."""

    def __init__(self, config: StoreConfig, *, disk_usage_probe: DiskUsageProbe | None = None) -> None:
        self.config = config
        self.commit_log = CommitLog(config)
        self.index_service = (
            IndexService(
                config.index_dir,
                config.max_hash_slot_num,
                config.max_index_num,
                preallocate=config.preallocate_files,
            )
            if config.message_index_enable
            else None
        )
        self._consume_queues = ConsumeQueueStore(config)
        self.dispatcher = Dispatcher(
            self.commit_log,
            self._consume_queues.find_or_create,
            self.index_service,
            parse_delay_levels(config.message_delay_level),
        )
        self.clean_service = CleanService(
            config, self.commit_log, self._consume_queues.all, self.index_service, disk_usage_probe
        )
        self.checkpoint: StoreCheckpoint | None = None
        self._services: StoreServices | None = None
        # handles of the two threads the put path talks to (also in _services)
        self._reput: ReputService | None = None
        self._group_commit: GroupCommitService | None = None
        self._lock = StoreLock(self._path("lock"), config.store_path_root_dir)
        self._running = False
        self._cq_flush_lock = threading.Lock()
        self.last_exit_ok = True

    # -- paths -----------------------------------------------------------------------------------
    def _path(self, name: str) -> str:
        return os.path.join(self.config.store_path_root_dir, name)

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> None:
        os.makedirs(self.config.store_path_root_dir, exist_ok=True)
        self._lock.acquire()
        try:
            self._load_and_recover()
        except BaseException:
            self._close_files()
            self._lock.release()
            raise
        cfg = self.config
        svc = self._services = StoreServices.start(
            cfg, self.commit_log, self.dispatcher, self.flush_consume_queues, self._on_commit_log_flushed
        )
        self._reput, self._group_commit = svc.reput, svc.group_commit
        self.clean_service.check_disk()
        self.clean_service.start()
        self._running = True
        log.info(
            "message store started at %s: commit log [%d, %d)",
            cfg.store_path_root_dir,
            self.commit_log.min_offset,
            self.commit_log.max_offset,
        )

    def _load_and_recover(self) -> None:
        self.last_exit_ok = mark_running(self._path("abort"))
        if not self.last_exit_ok:
            log.warning("the abort file exists: the last shutdown was not clean, running abnormal recovery")
        self.checkpoint = rebuild.load_and_recover(
            self.commit_log,
            self._consume_queues,
            self.index_service,
            self.dispatcher,
            self._path("checkpoint"),
            last_exit_ok=self.last_exit_ok,
        )
        self.flush_consume_queues(0)

    def shutdown(self) -> None:
        if not self._running:
            return
        self._running = False
        self.clean_service.shutdown()
        if self._services is not None:
            self._services.shutdown()
        self.commit_log.flush(0)
        self.flush_consume_queues(0)
        if self.checkpoint is not None:
            self.checkpoint.shutdown()
        clean = (
            self.dispatcher.reput_from_offset >= self.commit_log.max_offset and self.dispatcher.error is None
        )
        self._close_files()
        if clean:
            mark_clean_exit(self._path("abort"))
        else:
            log.warning("dispatch did not catch up before shutdown; the abort file is kept for recovery")
        self._lock.release()
        log.info("message store at %s shut down", self.config.store_path_root_dir)

    def halt(self) -> None:
        """Stop as if the process died: no flush, no checkpoint, the abort file stays.

        Writes already in the page cache survive, as they do when a broker is killed; tests use
        this to exercise abnormal recovery in-process.
        """
        if not self._running:
            return
        self._running = False
        self.clean_service.shutdown()
        if self._services is not None:
            self._services.halt()
        self._close_files()
        self._lock.release()

    def _close_files(self) -> None:
        self.commit_log.mfq.close()
        self._consume_queues.close()
        if self.index_service is not None:
            self.index_service.close()

    # -- flushing ---------------------------------------------------------------------------------
    def _on_commit_log_flushed(self, store_timestamp: int) -> None:
        if self.checkpoint is not None and store_timestamp > 0:
            self.checkpoint.physic_msg_timestamp = store_timestamp

    def flush_consume_queues(self, least_pages: int = 0) -> None:
        """Flush ConsumeQueues and the index, then the checkpoint (with the dispatched offset)."""
        with self._cq_flush_lock:
            dispatched = self.dispatcher.reput_from_offset
            ts = self.dispatcher.last_dispatched_timestamp
            queues_flushed = self._consume_queues.flush(least_pages)
            if self.index_service is not None:
                self.index_service.flush()
            cp = self.checkpoint
            if cp is None:
                return
            if least_pages == 0 or queues_flushed:
                cp.dispatched_phy_offset = dispatched
                if ts > 0:
                    cp.logics_msg_timestamp = cp.index_msg_timestamp = ts
            cp.flush()

    # -- writing ---------------------------------------------------------------------------------
    def _check_writable(self) -> PutMessageStatus | None:
        if not self._running:
            log.warning("put message refused: the message store is not running")
            return PutMessageStatus.SERVICE_NOT_AVAILABLE
        if self.clean_service.disk_full:
            log.warning(
                "put message refused: disk usage %.1f%% is above %d%%",
                self.clean_service.last_usage_percent,
                self.config.disk_space_warning_level_ratio_percent,
            )
            return PutMessageStatus.SERVICE_NOT_AVAILABLE
        if self.commit_log.is_os_page_cache_busy():
            return PutMessageStatus.OS_PAGE_CACHE_BUSY
        return None

    def put_message(self, msg: MessageToStore) -> PutMessageResult:
        return self.put_messages((msg,))

    def put_messages(self, msgs: Sequence[MessageToStore]) -> PutMessageResult:
        """Append messages of one topic and queue contiguously (a thin adapter to :meth:`put_batch`)."""
        if not msgs:
            return PutMessageResult(status=PutMessageStatus.MESSAGE_ILLEGAL)
        batch = batch_from_messages(msgs)
        if batch is None:
            log.warning("put messages illegal: a batch mixes topics, queues or hosts, or has bad properties")
            return PutMessageResult(status=PutMessageStatus.MESSAGE_ILLEGAL)
        return self.put_batch(batch)

    def put_batch(self, batch: MessageBatchToStore) -> PutMessageResult:
        """Append a column-oriented batch of one topic and queue (see :class:`MessageBatchToStore`)."""
        prep = self._prepare(batch)
        if isinstance(prep, PutMessageResult):
            return prep
        return self._put_prepared(prep)

    def put_prepared(self, prep: PreparedBatch) -> PutMessageResult:
        """Append records the caller encoded itself (:func:`~.record_batch.prepare_parts`)."""
        bad = self._check_writable()
        if bad is not None:
            return PutMessageResult(status=bad)
        if not self.commit_log.topic_ok(prep.topic) or (
            prep.n > 1 and prep.total > self.config.max_message_size_bytes
        ):
            return PutMessageResult(status=PutMessageStatus.MESSAGE_ILLEGAL)
        return self._put_prepared(prep)

    def copy_queue_records(
        self, topic: str, queue_id: int, ranges: Sequence[tuple[int, int]]
    ) -> reader.CopiedRecords | None:
        """The records of the ``(first queue offset, count)`` ranges of a queue, in order, copied out
        in one piece (None if one is missing); see :func:`.reader.copy_records`."""
        cq = self._consume_queues.find(topic, queue_id)
        if cq is None or not ranges or min(count for _, count in ranges) <= 0:
            return None
        return reader.copy_records(self.commit_log, cq, ranges)

    def _put_prepared(self, prep: PreparedBatch) -> PutMessageResult:
        result, durable_at = self._append(prep)
        if durable_at and self._group_commit is not None:
            if not self._group_commit.wait_for_flush(durable_at, self.config.sync_flush_timeout_ms / 1000):
                return self.flush_timed_out(result)
        return result

    def put_batch_nowait(
        self, batch: MessageBatchToStore, *, wake: bool = True
    ) -> PutOutcome | Callable[[], PutOutcome]:
        """:meth:`put_batch` for an event loop: appends only if that cannot wait.

        Returns ``(result, durable_at)`` when the append went through at once, or a callable that
        does the append (the batch already encoded) and returns the same pair, to be run in a
        worker thread, when it could wait: another thread holds the append lock, there is no
        segment yet or the batch needs a new one (file creation).  ``durable_at`` > 0 means
        SYNC_FLUSH: the result may be acknowledged once the CommitLog is durable up to that offset
        (:meth:`when_flushed`), or be answered :meth:`flush_timed_out` after
        ``sync_flush_timeout_ms``.  Encoding runs in the caller: keep inline batches small.
        ``wake=False`` leaves dispatch to the caller (:meth:`dispatch_appended`), for an event
        loop that answers the request first and then dispatches itself.
        """
        prep = self._prepare(batch)
        if isinstance(prep, PutMessageResult):
            return prep, 0
        cl = self.commit_log
        mf = cl.mfq.last()
        if (
            cl.put_lock.locked()
            or mf is None
            or mf.is_full
            or prep.total + END_FILE_MIN_BLANK_LENGTH > mf.file_size - mf.wrote_position
        ):
            return lambda: self._append(prep)
        return self._append(prep, wake=wake)

    def dispatch_appended(self) -> None:
        """Dispatch what was appended (after ``put_batch_nowait(wake=False)``): here, when no other
        thread is dispatching and little is waiting, else on the dispatch thread, which is woken."""
        d = self.dispatcher
        if not d.try_dispatch(INLINE_DISPATCH_MAX_BYTES) and self._reput is not None:
            self._reput.wakeup()

    def when_flushed(self, offset: int, callback: Callable[[bool], None]) -> None:
        """SYNC_FLUSH: ``callback(True)`` once the CommitLog is durable up to ``offset`` (False if the
        store stops first).  Called from the group-commit thread (or at once): it must not block."""
        if self._group_commit is None:
            callback(self.commit_log.flushed_where >= offset)
            return
        self._group_commit.add_flush_callback(offset, callback)

    def flush_timed_out(self, result: PutMessageResult) -> PutMessageResult:
        """The FLUSH_DISK_TIMEOUT answer for an appended ``result`` whose flush wait expired."""
        log.error(
            "sync flush timed out after %d ms for offset %d",
            self.config.sync_flush_timeout_ms,
            result.append_result.wrote_offset if result.append_result is not None else -1,
        )
        return PutMessageResult(
            status=PutMessageStatus.FLUSH_DISK_TIMEOUT, append_result=result.append_result
        )

    def _prepare(self, batch: MessageBatchToStore) -> PreparedBatch | PutMessageResult:
        bad = self._check_writable()
        if bad is not None:
            return PutMessageResult(status=bad)
        prep = prepare_batch(batch, self.config, self.commit_log.topic_ok)
        if isinstance(prep, PutMessageStatus):
            return PutMessageResult(status=prep)
        if prep.n > 1 and prep.total > self.config.max_message_size_bytes:
            log.warning(
                "put messages illegal: batch of %d bytes exceeds %d",
                prep.total,
                self.config.max_message_size_bytes,
            )
            return PutMessageResult(status=PutMessageStatus.MESSAGE_ILLEGAL)
        return prep

    def _append(self, prep: PreparedBatch, *, wake: bool = True) -> PutOutcome:
        """Append an encoded batch: the result and the offset to wait durability for (0: none)."""
        try:
            result = self.commit_log.append(prep)
        except StoreError as exc:
            log.error("cannot create a commit log segment: %s", exc)
            return PutMessageResult(status=PutMessageStatus.CREATE_MAPPED_FILE_FAILED), 0
        if result.status is not AppendMessageStatus.PUT_OK:
            return PutMessageResult(status=PutMessageStatus.MESSAGE_ILLEGAL, append_result=result), 0
        if wake and self._reput is not None:
            self._reput.wakeup()
        put = PutMessageResult(status=PutMessageStatus.PUT_OK, append_result=result)
        if self._group_commit is not None and prep.wait_store:
            return put, result.wrote_offset + result.wrote_bytes
        return put, 0

    # -- replication (a slave's CommitLog, docs/replication.md) ------------------------------------
    def append_replicated(
        self,
        phy_offset: int,
        data: bytes | bytearray | memoryview,
        hints: Sequence[DispatchHint] = (),
        *,
        starts: Sequence[int] | None = None,
        hinter: Hinter | None = None,
    ) -> int:
        """Append bytes copied from the master at ``phy_offset`` (the end of this CommitLog, or a
        segment start when it is empty); dispatch builds the ConsumeQueues and index, from
        ``hints`` where given, or from the hints ``hinter`` makes of the bytes and their record
        ``starts``: the reput thread makes them for all the chunks appended since its last round
        at once (ha/replica_hints.py).  Returns the new max offset; raises :class:`StoreError` if
        the bytes do not continue the log."""
        if not self._running:
            raise StoreError("the message store is not running")
        return self.commit_log.append_replica(phy_offset, data, hints, starts=starts, hinter=hinter)

    def truncate_commit_log(self, offset: int) -> None:
        """Cut the CommitLog at ``offset`` (a record boundary): later bytes are zeroed, later
        segments deleted, ConsumeQueue units and index files referring beyond are dropped and
        rebuilt as on recovery of a torn tail."""
        rebuild.truncate_commit_log(
            self.commit_log, self._consume_queues, self.index_service, self.dispatcher, offset
        )
        self.flush_consume_queues(0)

    def recover_topic_queue_table(self) -> None:
        """A slave becoming master (controller mode): dispatch every replicated record, then take
        each queue's next offset from its ConsumeQueue (raw replicated appends do not count them)."""
        self.dispatcher.dispatch_all()
        if self.dispatcher.error is not None:
            raise StoreCorruptError(self.dispatcher.error)
        self.commit_log.recover_topic_queue_table(self._consume_queues.max_offsets())

    # -- consume queues --------------------------------------------------------------------------
    def find_or_create_consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        return self._consume_queues.find_or_create(topic, queue_id)

    def find_consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        return self._consume_queues.find(topic, queue_id)

    def consume_queues(self) -> list[ConsumeQueue]:
        return self._consume_queues.all()

    def topics(self) -> list[str]:
        return self._consume_queues.topics()

    def queue_ids(self, topic: str) -> list[int]:
        return self._consume_queues.queue_ids(topic)

    def delete_topics(self, topics: Iterable[str]) -> None:
        for topic in topics:
            self._consume_queues.delete_topic(topic)
            self.commit_log.remove_queue_offsets(topic)
            log.info("deleted the consume queues of topic %s", topic)

    # -- reading ---------------------------------------------------------------------------------
    #: controller mode: the confirm offset reads stop at (None: read everything; replicas_manager.py)
    read_limit: Callable[[], int | None] | None = None

    def get_message(
        self,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        max_msg_nums: int,
        max_total_bytes: int,
        tag_codes: frozenset[int] | None = None,
    ) -> GetMessageResult:
        return reader.get_message(
            self.commit_log,
            self._consume_queues.find(topic, queue_id),
            offset,
            max_msg_nums,
            max_total_bytes,
            tag_codes,
            self.read_limit() if self.read_limit is not None else None,
        )

    def check_in_mem_by_consume_offset(
        self, topic: str, queue_id: int, offset: int, max_behind_bytes: int
    ) -> bool:
        """True if a read from ``offset`` cannot touch the disk (:func:`.reader.in_page_cache`)."""
        cq = self._consume_queues.find(topic, queue_id)
        return reader.in_page_cache(self.commit_log, cq, offset, max_behind_bytes)

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self._consume_queues.find(topic, queue_id)
        return cq.max_offset_in_queue if cq is not None else 0

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self._consume_queues.find(topic, queue_id)
        return cq.min_offset_in_queue if cq is not None else 0

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        cq = self._consume_queues.find(topic, queue_id)
        if cq is None:
            return 0
        return cq.offset_by_time(timestamp_ms, self.commit_log.store_timestamp_at, self.commit_log.min_offset)

    def get_store_time(self, topic: str, queue_id: int, offset: int) -> int:
        cq = self._consume_queues.find(topic, queue_id)
        unit = cq.unit_at(offset) if cq is not None else None
        if unit is None or unit[1] == 0x7FFFFFFF:
            return -1
        return self.commit_log.store_timestamp_at(unit[0], unit[1])

    def get_earliest_message_time(self, topic: str, queue_id: int) -> int:
        return self.get_store_time(topic, queue_id, self.get_min_offset_in_queue(topic, queue_id))

    def look_message_by_offset(self, commit_log_offset: int) -> bytes | None:
        size = self.commit_log.record_size_at(commit_log_offset)
        view = self.commit_log.view(commit_log_offset, size) if size > 0 else None
        return bytes(view) if view is not None else None

    def query_message(
        self, topic: str, key: str, max_num: int, begin_ts: int, end_ts: int
    ) -> QueryMessageResult:
        """The records whose key is ``key`` stored within ``[begin_ts, end_ts]`` (the index)."""
        if self.index_service is None:
            return QueryMessageResult()
        max_num = (
            min(max_num, self.config.default_query_max_num)
            if max_num > 0
            else self.config.default_query_max_num
        )
        return reader.query_by_key(self.commit_log, self.index_service, topic, key, max_num, begin_ts, end_ts)

    def add_arrival_listener(self, cb: ArrivalListener) -> None:
        self.dispatcher.listeners.append(cb)

    # -- state -----------------------------------------------------------------------------------
    @property
    def max_phy_offset(self) -> int:
        return self.commit_log.max_offset

    @property
    def min_phy_offset(self) -> int:
        return self.commit_log.min_offset

    @property
    def dispatch_behind_bytes(self) -> int:
        return self.dispatcher.behind

    def runtime_info(self) -> dict[str, str]:
        cl = self.commit_log
        return {
            "commitLogMinOffset": str(cl.min_offset),
            "commitLogMaxOffset": str(cl.max_offset),
            "commitLogFlushedOffset": str(cl.flushed_where),
            "dispatchBehindBytes": str(self.dispatcher.behind),
            "commitLogDiskRatio": f"{self.clean_service.last_usage_percent / 100:.4f}",
            "diskFull": str(self.clean_service.disk_full).lower(),
            "flushDiskType": self.config.flush_disk_type.value,
            "consumeQueueCount": str(len(self._consume_queues.all())),
            "indexFileCount": str(len(self.index_service.files) if self.index_service else 0),
            "lastExitOK": str(self.last_exit_ok).lower(),
        }

    def clean_expired_files(self, force: bool = False) -> int:
        """Run one retention round now (manual trigger); return the CommitLog segments deleted."""
        return self.clean_service.run_once(manual=True, force=force)

    def wait_dispatched(self, timeout_s: float = 5.0) -> bool:
        """Block until everything appended so far is dispatched (tests and tools)."""
        target = self.commit_log.max_offset
        deadline = time.monotonic() + timeout_s
        while self.dispatcher.reput_from_offset < target:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.001)
        return True

    def __enter__(self) -> MessageStore:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
