"""Store maintenance requests of ``mqadmin``: DELETE_EXPIRED_COMMITLOG (329),
CLEAN_EXPIRED_CONSUMEQUEUE (306), CLEAN_UNUSED_TOPIC (316) and RESET_MASTER_FLUSH_OFFSET (908).

* DELETE_EXPIRED_COMMITLOG runs one retention round now, as Java's
  ``executeDeleteFilesManually``: CommitLog segments older than ``fileReservedTime`` go (never the
  one being written), then the consume queue segments and index files below the new CommitLog
  minimum.
* CLEAN_EXPIRED_CONSUMEQUEUE removes the consume queue segments that lie wholly below the
  CommitLog minimum and moves each queue's minimum offset up.  Java also drops a queue whose every
  entry expired, restarting its offsets at 0; rocketq keeps the queue and its offsets.
* CLEAN_UNUSED_TOPIC drops the consume queues (and CommitLog queue offsets) of topics that are no
  longer in the topic table, except system topics.
* RESET_MASTER_FLUSH_OFFSET is refused with REQUEST_CODE_NOT_SUPPORTED: rocketq's slaves truncate
  by epoch (docs/replication.md) and never read the master flush offset Java's controller-mode
  slaves keep, so there is nothing to reset.

Each answer is SUCCESS with a remark saying what was done; the work runs on the query executor,
off the event loop.
"""

from __future__ import annotations

from rocketq.broker.processor.context import BrokerContext
from rocketq.client.remoting.codes import ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.vocabulary import is_system_topic
from rocketq.server import Channel

__all__ = ["StoreAdminProcessor"]


class StoreAdminProcessor:
    """Registered for the four store maintenance codes."""

    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    async def delete_expired_commit_log(
        self, request: RemotingCommand, channel: Channel
    ) -> RemotingCommand | None:
        store = self.ctx.store
        deleted = await self.ctx.query_executor.run(store.clean_expired_files)
        remark = (
            f"deleted {deleted} expired commit log file(s); the commit log starts at {store.min_phy_offset}"
        )
        return request.make_response(ResponseCode.SUCCESS, remark)

    async def clean_expired_consume_queue(
        self, request: RemotingCommand, channel: Channel
    ) -> RemotingCommand | None:
        store = self.ctx.store

        def clean() -> int:
            min_phy = store.min_phy_offset
            return sum(cq.delete_expired_files(min_phy) for cq in store.consume_queues())

        deleted = await self.ctx.query_executor.run(clean)
        return request.make_response(ResponseCode.SUCCESS, f"deleted {deleted} expired consume queue file(s)")

    async def clean_unused_topic(self, request: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        store, topics = self.ctx.store, self.ctx.topics
        unused = sorted(t for t in store.topics() if t not in topics and not is_system_topic(t))
        await self.ctx.query_executor.run(lambda: store.delete_topics(unused))
        return request.make_response(ResponseCode.SUCCESS, f"cleaned unused topics {unused}")

    async def reset_master_flush_offset(
        self, request: RemotingCommand, channel: Channel
    ) -> RemotingCommand | None:
        return request.make_response(
            ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
            "resetMasterFlushOffset is not supported: rocketq's slaves truncate by epoch and do not use "
            "a master flush offset, so there is nothing to reset",
        )
