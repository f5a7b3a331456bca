"""Keeping the derived data in line with the CommitLog when its end moves back.

The CommitLog is the only truth; the ConsumeQueues, the index files and the dispatch position are
derived from it.  Two events can leave them ahead of it or incomplete: start-up, after the files
are mapped and :mod:`.recovery` has cut the CommitLog at its last valid record, and a slave cutting
its CommitLog back to the master's (``truncate_commit_log``).  In both cases units and index files
referring beyond the new end are dropped, dispatch restarts from the lowest offset whose derived
data may be missing (the checkpoint's dispatched offset, the end, or the lowest index entry lost),
runs synchronously until caught up, and the CommitLog's per-queue offset table is rebuilt from the
ConsumeQueues.  At start-up a queue found missing data (a gap was filled, or it ends below what
the recovered CommitLog holds for it) is dropped and rebuilt from the CommitLog's minimum offset.
"""

from __future__ import annotations

import logging

from rocketq.broker.store.checkpoint import StoreCheckpoint
from rocketq.broker.store.commit_log import CommitLog
from rocketq.broker.store.consume_queue_store import ConsumeQueueStore
from rocketq.broker.store.dispatch import Dispatcher
from rocketq.broker.store.errors import StoreCorruptError
from rocketq.broker.store.index_file import IndexService
from rocketq.broker.store.recovery import recover_commit_log, recover_consume_queues

log = logging.getLogger(__name__)


def load_and_recover(
    commit_log: CommitLog,
    queues: ConsumeQueueStore,
    index_service: IndexService | None,
    dispatcher: Dispatcher,
    checkpoint_path: str,
    *,
    last_exit_ok: bool,
) -> StoreCheckpoint:
    """Map every file, recover the CommitLog and the ConsumeQueues, and dispatch until derived data
    is complete; returns the checkpoint (the caller flushes it with the ConsumeQueues)."""
    cl = commit_log
    cl.mfq.load()
    cq_dir_missing = queues.load()
    if index_service is not None:
        index_service.load()
    cp = StoreCheckpoint(checkpoint_path)
    end, seen = recover_commit_log(cl, last_exit_ok=last_exit_ok, checkpoint=cp)
    recover_consume_queues(queues.all(), end, cl.min_offset)
    lowest = index_service.remove_from(end) if index_service is not None else end
    start = cp.dispatched_phy_offset if cp.dispatched_phy_offset >= 0 else cl.min_offset
    if cq_dir_missing and cl.max_offset > cl.min_offset:
        log.warning(
            "the consume queue directory %s is missing or empty: rebuilding every consume queue "
            "from the commit log",
            queues.config.consume_queue_dir,
        )
        start = cl.min_offset
    start = max(min(start, end, lowest), cl.min_offset)
    _redispatch(cl, queues, dispatcher, start, seen)
    cl.recover_topic_queue_table(queues.max_offsets())
    return cp


def _redispatch(
    commit_log: CommitLog,
    queues: ConsumeQueueStore,
    dispatcher: Dispatcher,
    start: int,
    seen: dict[tuple[str, int], int],
) -> None:
    d = dispatcher
    d.reput_from_offset = start
    n = d.dispatch_all()
    gapped = [cq for cq in queues.all() if cq.gap_filled]
    for (topic, queue_id), max_queue_offset in seen.items():
        cq = queues.find(topic, queue_id)
        if cq is None or cq.max_offset_in_queue <= max_queue_offset:
            gapped.append(queues.find_or_create(topic, queue_id))
    if gapped and start > commit_log.min_offset:
        log.warning(
            "consume queues %s are missing data: rebuilding them from the commit log",
            ", ".join(f"{cq.topic}-{cq.queue_id}" for cq in gapped),
        )
        for cq in {id(q): q for q in gapped}.values():
            queues.drop(cq)
        d.reput_from_offset = commit_log.min_offset
        n += d.dispatch_all()
    for cq in queues.all():
        cq.gap_filled = False
    if d.error is not None:
        raise StoreCorruptError(d.error)
    log.info("recovery re-dispatched %d records from offset %d", n, start)


def truncate_commit_log(
    commit_log: CommitLog,
    queues: ConsumeQueueStore,
    index_service: IndexService | None,
    dispatcher: Dispatcher,
    offset: int,
) -> None:
    """Cut the CommitLog at ``offset`` and its derived data with it, then re-dispatch; the caller
    flushes the ConsumeQueues and the checkpoint."""
    cl, d = commit_log, dispatcher
    with d.lock:
        with cl.put_lock:
            log.warning("truncating the commit log from %d to %d", cl.max_offset, offset)
            cl.mfq.set_max_offset(offset)
            cl.hints.clear()
            cl.replica_pending.clear()
        queues.truncate_dirty(offset)
        lowest = index_service.remove_from(offset) if index_service is not None else offset
        d.reput_from_offset = max(min(d.reput_from_offset, offset, lowest), cl.min_offset)
    d.dispatch_all()
    cl.recover_topic_queue_table(queues.max_offsets())
