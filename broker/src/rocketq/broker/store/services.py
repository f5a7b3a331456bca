"""The store's background threads, started together and stopped in order.

A running store has a reput thread (:class:`ReputService`: dispatch of appended records into
ConsumeQueues and the index), one CommitLog flusher chosen by ``flushDiskType`` (the group commit
for SYNC_FLUSH, the periodic flush for ASYNC_FLUSH) and the periodic ConsumeQueue flush.  They start
in that order (CommitLog flusher, reput, ConsumeQueue flush); ``shutdown`` lets each finish its
work, ``halt`` stops them as if the process died (tests of abnormal recovery).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rocketq.broker.store.commit_log import CommitLog
from rocketq.broker.store.config import FlushDiskType, StoreConfig
from rocketq.broker.store.dispatch import Dispatcher, ReputService
from rocketq.broker.store.flush import FlushConsumeQueueService, FlushRealTimeService, GroupCommitService

__all__ = ["StoreServices"]


@dataclass(frozen=True, slots=True)
class StoreServices:
    """The running threads of one store (``group_commit`` with SYNC_FLUSH, else ``flush_commit_log``)."""

    reput: ReputService
    group_commit: GroupCommitService | None
    flush_commit_log: FlushRealTimeService | None
    flush_consume_queue: FlushConsumeQueueService

    @classmethod
    def start(
        cls,
        cfg: StoreConfig,
        commit_log: CommitLog,
        dispatcher: Dispatcher,
        flush_consume_queues: Callable[[int], None],
        on_commit_log_flushed: Callable[[int], None],
    ) -> StoreServices:
        reput = ReputService(dispatcher, cfg.reput_idle_wait_ms, cfg.replica_dispatch_interval_ms)
        group_commit: GroupCommitService | None = None
        flush_cl: FlushRealTimeService | None = None
        if cfg.flush_disk_type is FlushDiskType.SYNC_FLUSH:
            group_commit = GroupCommitService(commit_log, on_commit_log_flushed)
            group_commit.start()
        else:
            flush_cl = FlushRealTimeService(
                commit_log,
                cfg.flush_interval_commit_log_ms,
                cfg.flush_commit_log_least_pages,
                cfg.flush_commit_log_thorough_interval_ms,
                on_commit_log_flushed,
            )
            flush_cl.start()
        flush_cq = FlushConsumeQueueService(
            flush_consume_queues,
            cfg.flush_interval_consume_queue_ms,
            cfg.flush_consume_queue_least_pages,
            cfg.flush_consume_queue_thorough_interval_ms,
        )
        reput.start()
        flush_cq.start()
        return cls(reput, group_commit, flush_cl, flush_cq)

    def shutdown(self) -> None:
        """Stop cleanly: dispatch catches up, the flushers flush what is pending."""
        self.reput.shutdown()
        for svc in (self.group_commit, self.flush_commit_log, self.flush_consume_queue):
            if svc is not None:
                svc.shutdown()

    def halt(self) -> None:
        """Stop at once, flushing nothing (as a killed process)."""
        self.reput.halt()
        for svc in (self.group_commit, self.flush_commit_log, self.flush_consume_queue):
            if svc is not None:
                svc.halt()
