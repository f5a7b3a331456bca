"""The services only a master runs: delayed delivery and transactional messages.

A master redelivers delayed messages and retries when they are due (``ScheduleMessageService``)
and keeps the half-message state of transactions, checked back by a background thread
(``TransactionalMessageService``, ``TransactionCheckService``).  They start when the broker starts
as a master or the controller makes it one, and stop when it becomes a slave or shuts down; both
are published on the :class:`BrokerContext` (``ctx.schedule``, ``ctx.txn``) for the processors.
"""

from __future__ import annotations

import asyncio
import logging

from rocketq.broker.broker_to_client import Broker2Client
from rocketq.broker.metrics.pop import timer_figures
from rocketq.broker.pop.revive import ReviveService
from rocketq.broker.processor.context import BrokerContext
from rocketq.broker.schedule.service import ScheduleMessageService
from rocketq.broker.timer.config import timer_config_of
from rocketq.broker.timer.service import TimerMessageService
from rocketq.broker.timer.store import TimerMessageStore
from rocketq.broker.topic_manager import TRANS_CHECK_MAX_TIME_TOPIC
from rocketq.broker.transaction.check_service import TransactionCheckService
from rocketq.broker.transaction.config import TransactionConfig
from rocketq.broker.transaction.service import TransactionalMessageService
from rocketq.client.remoting.headers import CheckTransactionStateRequestHeader

__all__ = ["MasterServices"]

log = logging.getLogger(__name__)


class MasterServices:
    """Starts and stops a master's schedule and transaction services around ``ctx``."""

    def __init__(self, ctx: BrokerContext, config_dir: str, to_client: Broker2Client) -> None:
        self._ctx = ctx
        self._config_dir = config_dir
        self._to_client = to_client
        self._txn_checker: TransactionCheckService | None = None
        #: POP consumption's revive service (docs/rocketmq5.md "POP consumption")
        self.revive: ReviveService | None = None
        self.timer: TimerMessageService | None = None

    async def start(self) -> None:
        """Start delayed delivery, rebuild the half-message state and start the check-back thread."""
        ctx = self._ctx
        schedule = ctx.schedule = ScheduleMessageService(
            ctx.store,
            list(ctx.delay_levels_ms),
            config_dir=self._config_dir,
            flush_interval_ms=ctx.config.flush_delay_offset_interval_ms,
        )
        schedule.on_put = ctx.stats_items.schedule_put_from_thread  # mqadmin statsAll
        await asyncio.to_thread(schedule.start)
        await self._start_timer()
        await self._start_transactions()
        self.revive = ReviveService(ctx)
        await self.revive.start()

    async def _start_timer(self) -> None:
        """Timer messages (docs/rocketmq5.md): recover the wheel from config/timercheck and deliver."""
        ctx = self._ctx
        timer = timer_config_of(ctx.config)
        if not timer.wheel_enable:
            return
        root = ctx.store.config.store_path_root_dir
        self.timer = TimerMessageService(TimerMessageStore(ctx.store, timer, root))
        self.timer.timer.on_put = ctx.stats_items.put_from_thread  # mqadmin statsAll
        await asyncio.to_thread(self.timer.start)
        ctx.pop_stats.timer = timer_figures(self.timer.timer)  # rocketmq_timer_* (metrics/pop.py)

    async def _start_transactions(self) -> None:
        ctx = self._ctx
        cfg = ctx.config
        txn = TransactionalMessageService(
            ctx.store,
            TransactionConfig(
                transaction_timeout_ms=cfg.transaction_timeout_ms,
                transaction_check_max=cfg.transaction_check_max,
                transaction_check_interval_ms=cfg.transaction_check_interval_ms,
                # ranged END_TRANSACTION limits
                # (broker.conf transactionBatchMaxMessages / transactionBatchMaxBytes)
                transaction_batch_max_messages=cfg.transaction_batch_max_messages,
                transaction_batch_max_bytes=cfg.transaction_batch_max_bytes,
            ),
            offsets=ctx.offsets,
        )
        txn.on_commit = ctx.stats_items.put_from_thread  # mqadmin statsAll (executor threads)
        await asyncio.to_thread(txn.recover)
        ctx.txn = txn
        ctx.topics.create_retry_topic(TRANS_CHECK_MAX_TIME_TOPIC, 1)
        producers, to_client = ctx.producers, self._to_client

        def send_check(group: str, body: bytes, header: CheckTransactionStateRequestHeader) -> bool:
            return to_client.check_transaction_state(producers, group, body, header)

        self._txn_checker = TransactionCheckService(txn, send_check)
        self._txn_checker.start()

    async def stop(self) -> None:
        """Both services, as when the broker becomes a slave."""
        await self.stop_check_back()
        await self.stop_revive()
        await self.stop_schedule()

    async def stop_revive(self) -> None:
        """Stop reviving POP messages; its progress is committed to the consumer offsets."""
        revive, self.revive = self.revive, None
        if revive is not None:
            await revive.stop()

    async def stop_check_back(self) -> None:
        """Stop the transaction check-back thread; the processors see no transaction service."""
        checker, self._txn_checker, self._ctx.txn = self._txn_checker, None, None
        if checker is not None:
            await asyncio.to_thread(checker.shutdown)

    async def stop_schedule(self) -> None:
        """Stop delayed delivery and persist its offsets (a failure to persist is logged)."""
        schedule, self._ctx.schedule = self._ctx.schedule, None
        timer, self.timer = self.timer, None
        self._ctx.pop_stats.timer = None
        if timer is not None:
            try:
                await asyncio.to_thread(timer.shutdown)
            except Exception:
                log.exception("cannot flush the timer wheel")
        if schedule is not None:
            try:
                await asyncio.to_thread(schedule.shutdown)
            except Exception:
                log.exception("cannot persist the delay offsets")
