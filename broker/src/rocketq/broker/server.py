"""BrokerController: wires the store, the managers, the request processors, the NameServer
registration and the housekeeping tasks into one broker.

Theory of operation.  Everything except store calls runs on one asyncio event loop: the managers
are plain objects mutated only on that thread, which is what makes topic auto-creation race-free.
Store calls that cannot block run on the loop too, which saves two thread hand-offs per request:
small appends (``MessageStore.put_batch_nowait``; SYNC_FLUSH acknowledgements then wait for the
group-commit thread's callback, not in a thread) and reads of recently written, page-cache resident
data.  Calls that may block (an append that meets a held lock or must create a CommitLog segment,
big batches, reads of older data that may fault pages in, SQL92 scans, queries) run on bounded
executors (``executor.py``); the store's reput thread reports arrivals to the long-polling service,
which hops to the loop.  Background tasks: NameServer registration every
``registerNameServerPeriod``, consumer offsets persisted every ``flushConsumerOffsetInterval``,
client channels expired every 10 s, stale queue locks dropped; on a master, the
ScheduleMessageService thread delivers delayed messages (and retries) when they are due.
``shutdown()`` is the clean stop (SIGTERM): unregister from the NameServers, answer parked pulls,
drain running requests, persist the metadata, then shut the store down, which flushes and removes
the ``abort`` file.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace

from rocketq.broker.client_manager import ConsumerManager, ProducerManager
from rocketq.broker.config import BrokerConfig, BrokerRole
from rocketq.broker.config_loader import build_store_config
from rocketq.broker.controller_mode.processors import controller_mode_processors
from rocketq.broker.controller_mode.replicas_manager import ReplicasManager
from rocketq.broker.errors import BrokerError
from rocketq.broker.executor import BoundedExecutor
from rocketq.broker.ha.replication import Replication
from rocketq.broker.long_polling import PullRequestHoldService
from rocketq.broker.metadata import (
    CONSUMER_OFFSET_JSON,
    SUBSCRIPTION_GROUP_JSON,
    TOPICS_JSON,
    load_json_file,
    persist_json_file,
)
from rocketq.broker.metrics.exporter import BrokerMetrics
from rocketq.broker.namesrv_registration import NamesrvRegistrar
from rocketq.broker.offset_manager import ConsumerOffsetManager
from rocketq.broker.processor.acl import AclAdminProcessor
from rocketq.broker.processor.admin import AdminProcessor
from rocketq.broker.processor.client_manage import ClientManageProcessor
from rocketq.broker.processor.consumer_manage import ConsumerManageProcessor
from rocketq.broker.processor.context import BrokerContext
from rocketq.broker.processor.end_transaction import process_end_transaction
from rocketq.broker.processor.offsets import OffsetQueryProcessor
from rocketq.broker.processor.pull import PullMessageProcessor, confirm_waker
from rocketq.broker.processor.query import QueryMessageProcessor
from rocketq.broker.processor.rebalance import RebalanceProcessor
from rocketq.broker.processor.send import SendMessageProcessor
from rocketq.broker.processor.send_back import SendMessageBackProcessor
from rocketq.broker.processor.stats import StatsProcessor
from rocketq.broker.rebalance_lock import RebalanceLockManager
from rocketq.broker.schedule.delay import parse_delay_levels
from rocketq.broker.schedule.service import ScheduleMessageService
from rocketq.broker.slave_sync import SlaveSynchronizer
from rocketq.broker.store.message_store import MessageStore
from rocketq.broker.subscription_manager import SubscriptionGroupManager
from rocketq.broker.topic_manager import TRANS_CHECK_MAX_TIME_TOPIC, TopicConfigManager
from rocketq.broker.transaction.check_service import TransactionCheckService
from rocketq.broker.transaction.config import TransactionConfig
from rocketq.broker.transaction.service import TransactionalMessageService
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.headers import CheckTransactionStateRequestHeader
from rocketq.client.transport.aio import RemotingClient
from rocketq.server import Channel, Processor, RemotingServer
from rocketq.server.acl import PlainAclValidator, RequestSigner, acl_validator

__all__ = ["BrokerController", "build_context"]

log = logging.getLogger(__name__)

CLIENT_SCAN_INTERVAL_S = 10.0
NOTIFY_TIMEOUT_MS = 3_000


def build_context(
    config: BrokerConfig,
    store: MessageStore,
    loop: asyncio.AbstractEventLoop,
    *,
    config_dir: str | None = None,
    on_ids_changed: Callable[[str, list[Channel]], None] | None = None,
) -> BrokerContext:
    """The managers and executors around an already started store (used by the server and tests).

    With ``config_dir`` the metadata is loaded from (and persisted to) RocketMQ's ``config/`` files.
    """

    def persister(name: str) -> Callable[[Mapping[str, object]], None] | None:
        if config_dir is None:
            return None
        path = os.path.join(config_dir, name)
        return lambda doc: persist_json_file(path, doc)

    topics = TopicConfigManager(config, persist=persister(TOPICS_JSON))
    groups = SubscriptionGroupManager(
        auto_create=config.auto_create_subscription_group, persist=persister(SUBSCRIPTION_GROUP_JSON)
    )
    offsets = ConsumerOffsetManager()
    delay_levels_ms = tuple(parse_delay_levels(store.config.message_delay_level))
    if config_dir is not None:
        topics.load(load_json_file(os.path.join(config_dir, TOPICS_JSON)))
        groups.load(load_json_file(os.path.join(config_dir, SUBSCRIPTION_GROUP_JSON)))
        offsets.load(load_json_file(os.path.join(config_dir, CONSUMER_OFFSET_JSON)))
    return BrokerContext(
        config=config,
        store=store,
        topics=topics,
        offsets=offsets,
        groups=groups,
        consumers=ConsumerManager(
            channel_expired_timeout_ms=config.channel_expired_timeout_ms, on_ids_changed=on_ids_changed
        ),
        producers=ProducerManager(channel_expired_timeout_ms=config.channel_expired_timeout_ms),
        locks=RebalanceLockManager(max_live_time_ms=config.rebalance_lock_max_live_time_ms),
        hold=PullRequestHoldService(loop, max_suspended=config.max_suspended_pulls),
        send_executor=BoundedExecutor(
            "send",
            threads=config.send_message_thread_pool_nums,
            capacity=config.send_thread_pool_queue_capacity,
            max_wait_ms=config.wait_time_ms_in_send_queue,
        ),
        pull_executor=BoundedExecutor(
            "pull",
            threads=config.pull_message_thread_pool_nums,
            capacity=config.pull_thread_pool_queue_capacity,
            max_wait_ms=config.wait_time_ms_in_pull_queue,
        ),
        query_executor=BoundedExecutor("query", threads=2, capacity=config.query_thread_pool_queue_capacity),
        delay_levels_ms=delay_levels_ms,
    )


def processor_table(ctx: BrokerContext, replication: Replication | None = None) -> dict[int, Processor]:
    """Request code -> processor coroutine for every code the broker serves."""
    send = SendMessageProcessor(ctx, replication).process
    pull = _readable_only(PullMessageProcessor(ctx).process, replication)
    query = QueryMessageProcessor(ctx)
    offsets = OffsetQueryProcessor(ctx)
    consumer = ConsumerManageProcessor(ctx)
    client = ClientManageProcessor(ctx)
    admin = AdminProcessor(ctx, ha_runtime=replication.runtime_keys if replication is not None else None)
    stats = StatsProcessor(ctx)
    rebalance = RebalanceProcessor(ctx)
    send_back = SendMessageBackProcessor(ctx).process

    async def get_all_delay_offset(request: RemotingCommand, channel: Channel) -> RemotingCommand:
        doc = ctx.schedule.encode() if ctx.schedule is not None else {"offsetTable": {}}
        return request.make_response(ResponseCode.SUCCESS, body=json.dumps(doc).encode())

    async def end_transaction(request: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        if not ctx.config.is_master:
            return (
                None
                if request.is_oneway
                else request.make_response(
                    ResponseCode.SERVICE_NOT_AVAILABLE,
                    f"the broker[{ctx.broker_addr}] is a slave (brokerRole=SLAVE): "
                    "end the transaction on the master",
                )
            )
        fenced = replication.write_refusal() if replication is not None else None
        if fenced is not None:  # controller mode: an unconfirmed master (docs/failover.md)
            return (
                None
                if request.is_oneway
                else request.make_response(ResponseCode.SERVICE_NOT_AVAILABLE, fenced)
            )
        if ctx.txn is None:
            return (
                None
                if request.is_oneway
                else request.make_response(
                    ResponseCode.NO_PERMISSION,
                    f"the broker[{ctx.broker_addr}] does not serve transactions (slave?)",
                )
            )
        return await process_end_transaction(
            ctx.txn,
            request,
            offload=ctx.send_executor.run,
            is_slave=not ctx.config.is_master,
            replicated=replication.wait_offset if replication else None,
            on_ended=ctx.metrics.record_end_transaction if ctx.metrics is not None else None,
        )

    async def get_broker_ha_status(request: RemotingCommand, channel: Channel) -> RemotingCommand:
        doc = replication.status_body() if replication is not None else {"master": ctx.config.is_master}
        return request.make_response(ResponseCode.SUCCESS, body=json.dumps(doc).encode())

    rc = RequestCode
    table: dict[int, Processor] = {
        rc.END_TRANSACTION: end_transaction,
        rc.SEND_MESSAGE: send,
        rc.SEND_MESSAGE_V2: send,
        rc.SEND_BATCH_MESSAGE: send,
        rc.PULL_MESSAGE: pull,
        rc.LITE_PULL_MESSAGE: pull,
        rc.CONSUMER_SEND_MSG_BACK: send_back,
        rc.GET_ALL_DELAY_OFFSET: get_all_delay_offset,
        rc.QUERY_MESSAGE: query.query_message,
        rc.VIEW_MESSAGE_BY_ID: query.view_message_by_id,
        rc.GET_MAX_OFFSET: offsets.get_max_offset,
        rc.GET_MIN_OFFSET: offsets.get_min_offset,
        rc.SEARCH_OFFSET_BY_TIMESTAMP: offsets.search_offset_by_timestamp,
        rc.GET_EARLIEST_MSG_STORETIME: offsets.get_earliest_msg_storetime,
        rc.QUERY_CONSUMER_OFFSET: consumer.query_consumer_offset,
        rc.UPDATE_CONSUMER_OFFSET: consumer.update_consumer_offset,
        rc.GET_CONSUMER_LIST_BY_GROUP: consumer.get_consumer_list_by_group,
        rc.HEART_BEAT: client.heart_beat,
        rc.UNREGISTER_CLIENT: client.unregister_client,
        rc.CHECK_CLIENT_CONFIG: client.check_client_config,
        rc.UPDATE_AND_CREATE_TOPIC: admin.update_and_create_topic,
        rc.DELETE_TOPIC_IN_BROKER: admin.delete_topic,
        rc.GET_ALL_TOPIC_CONFIG: admin.get_all_topic_config,
        rc.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: admin.update_and_create_subscription_group,
        rc.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: admin.get_all_subscription_group,
        rc.DELETE_SUBSCRIPTIONGROUP: admin.delete_subscription_group,
        rc.GET_ALL_CONSUMER_OFFSET: admin.get_all_consumer_offset,
        rc.GET_BROKER_RUNTIME_INFO: admin.get_broker_runtime_info,
        rc.GET_BROKER_CONFIG: admin.get_broker_config,
        rc.GET_TOPIC_STATS_INFO: stats.get_topic_stats_info,
        rc.GET_CONSUME_STATS: stats.get_consume_stats,
        rc.GET_CONSUMER_CONNECTION_LIST: stats.get_consumer_connection_list,
        rc.INVOKE_BROKER_TO_RESET_OFFSET: stats.invoke_broker_to_reset_offset,
        rc.LOCK_BATCH_MQ: rebalance.lock_batch_mq,
        rc.UNLOCK_BATCH_MQ: rebalance.unlock_batch_mq,
        rc.GET_BROKER_HA_STATUS: get_broker_ha_status,
    }
    for code in (
        rc.UPDATE_AND_CREATE_TOPIC,
        rc.DELETE_TOPIC_IN_BROKER,
        rc.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
        rc.DELETE_SUBSCRIPTIONGROUP,
    ):
        table[code] = _slave_refuses(ctx, table[code])
    return table


def _slave_refuses(ctx: BrokerContext, process: Processor) -> Processor:
    """Admin writes on a slave: its metadata is the master's copy (docs/replication.md).  The role
    is read per request: in controller mode it changes at runtime."""

    async def guarded(request: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        if ctx.config.is_master:
            return await process(request, channel)
        return request.make_response(
            ResponseCode.SERVICE_NOT_AVAILABLE,
            f"the broker[{ctx.broker_addr}] is a slave (brokerRole=SLAVE): "
            "change topics and groups on the master",
        )

    return guarded


def ctx_controller_mode(replication: Replication) -> bool:
    return replication.config.enable_controller_mode


def _readable_only(process: Processor, replication: Replication | None) -> Processor:
    """Pulls, answered NO_PERMISSION while a slave refuses its master's log."""
    if replication is None or (replication.client is None and not ctx_controller_mode(replication)):
        return process

    async def guarded(request: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        if replication.readable:
            return await process(request, channel)
        return request.make_response(
            ResponseCode.NO_PERMISSION, f"the broker is a slave that serves no reads: {replication.refusal}"
        )

    return guarded


class BrokerController:
    """One broker: ``await start()`` returns the bound ``(host, port)``; ``await shutdown()`` stops it."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self._store: MessageStore | None = None
        self.ctx: BrokerContext | None = None
        self.server: RemotingServer | None = None
        self.acl: PlainAclValidator | None = None
        self.registrar: NamesrvRegistrar | None = None
        self._client: RemotingClient | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._notify_tasks: set[asyncio.Task[None]] = set()
        self._config_dir = ""
        self._stopped = False
        self._txn_checker: TransactionCheckService | None = None
        self.replication: Replication | None = None
        self.slave_sync: SlaveSynchronizer | None = None
        self.replicas: ReplicasManager | None = None
        self.metrics: BrokerMetrics | None = None

    @property
    def store(self) -> MessageStore:
        """The message store (opened by :meth:`start`)."""
        if self._store is None:
            raise BrokerError(f"broker {self.config.broker_name} is not started: it has no message store")
        return self._store

    @property
    def broker_addr(self) -> str:
        return self.ctx.broker_addr if self.ctx is not None else self.config.broker_addr

    async def start(self) -> tuple[str, int]:
        loop = asyncio.get_running_loop()
        if self.config.enable_controller_mode:
            log.info(
                "enableControllerMode=true: brokerRole=%s and brokerId=%d of the configuration are "
                "ignored; the controller decides (no writes until then)",
                self.config.broker_role.value,
                self.config.broker_id,
            )
            self.config = replace(
                self.config, broker_role=BrokerRole.SLAVE, broker_id=max(self.config.broker_id, 1)
            )
        store_config = build_store_config(self.config)
        self._config_dir = str(store_config.config_dir)
        store = self._store = MessageStore(store_config)
        await asyncio.to_thread(store.start)
        ctx = build_context(
            self.config, store, loop, config_dir=self._config_dir, on_ids_changed=self._notify_ids_changed
        )
        self.ctx = ctx
        store.add_arrival_listener(ctx.hold.arrival_listener)
        if self.config.is_master:
            schedule = ctx.schedule = ScheduleMessageService(
                store,
                list(ctx.delay_levels_ms),
                config_dir=self._config_dir,
                flush_interval_ms=self.config.flush_delay_offset_interval_ms,
            )
            await asyncio.to_thread(schedule.start)
            await self._start_transactions(ctx, loop)
        replication = self.replication = Replication(self.config, store)
        ha_port = await replication.start()
        ctx.config = replace(ctx.config, ha_listen_port=ha_port)
        self.acl = acl_validator(self.config.acl_enable, self.config.acl_file_path)  # plain ACL, or None
        self.server = RemotingServer(
            host=self.config.bind_address,
            port=self.config.listen_port,
            max_inflight_per_connection=self.config.server_max_inflight_requests_per_connection,
            limits=self.config.connection_limits(),
            max_queued_requests=self.config.max_suspended_pulls
            + self.config.send_thread_pool_queue_capacity
            + 1000,
            on_channel_close=self._channel_closed,
            tls_mode=self.config.tls.mode,
            ssl_context=self.config.tls.server_context(),
            request_check=None if self.acl is None else self.acl.check,
        )
        signer = RequestSigner.of(self.config.access_key, self.config.secret_key)  # ACL: sign own requests
        self._client = RemotingClient(ssl_context=self.config.tls.client_context(), rpc_hook=signer)
        if self.config.metrics.enabled:  # before the processors capture ctx.metrics
            self.metrics = BrokerMetrics(self.config, ctx, replication)
        table = processor_table(ctx, replication)
        if self.acl is not None:
            table.update(AclAdminProcessor(ctx, self.acl).processors())
        if self.config.enable_controller_mode:
            self.replicas = ReplicasManager(
                self.config,
                store,
                replication,
                self._client,
                broker_addr=lambda: ctx.broker_addr,
                on_role_changed=self._role_changed,
            )
            table.update(controller_mode_processors(self.replicas))
            self.replicas.confirm_listeners.append(confirm_waker(ctx))
        for code, processor in table.items():
            if self.metrics is not None:
                processor = self.metrics.instrument(code, processor)
            self.server.register(code, processor)
        if self.metrics is not None:
            await self.metrics.start()
        host, port = await self.server.start()
        ctx.with_port(port)
        self.config = ctx.config
        if self.replicas is not None:
            self.replicas.config = self.replicas.replication.config = self.config
        self.registrar = NamesrvRegistrar(
            self._client,
            self.config.namesrv_addr,
            identity=self._identity,
            topic_wrapper=ctx.topics.encode,
            timeout_ms=self.config.register_broker_timeout_ms,
        )
        self.registrar.master_listeners.append(lambda master, ha: replication.on_register_result(ha, master))
        ctx.topics.add_listener(lambda _tc: self.registrar.trigger() if self.registrar else None)
        registrar = self.registrar
        replicas = self.replicas
        if replicas is not None:  # the master is whoever the controller named
            self.slave_sync = SlaveSynchronizer(
                ctx,
                self._client,
                config_dir=self._config_dir,
                master_addr=lambda: None if replicas.is_master else replicas.master_addr or None,
            )
        elif not self.config.is_master:  # copy the master's metadata (slave_sync.py)
            self.slave_sync = SlaveSynchronizer(
                ctx, self._client, master_addr=lambda: registrar.master_addr, config_dir=self._config_dir
            )
            registrar.master_listeners.append(self.slave_sync.master_changed)
        await self._register_all()
        if replicas is not None:
            replicas.start()
        self._tasks = [
            loop.create_task(self._every(self.config.register_period_s, self._register_all)),
            loop.create_task(
                self._every(self.config.flush_consumer_offset_interval_ms / 1000.0, self.persist_offsets)
            ),
            loop.create_task(self._every(CLIENT_SCAN_INTERVAL_S, self._scan_clients)),
        ]
        if self.slave_sync is not None:
            sync_period_s = self.config.slave_sync_interval_ms / 1000.0
            self._tasks.append(loop.create_task(self._every(sync_period_s, self.slave_sync.sync_all)))
        log.info(
            "broker %s (%s, id %d) listening on %s:%d, advertised as %s, HA port %d",
            self.config.broker_name,
            self.config.broker_role.value,
            self.config.broker_id,
            host,
            port,
            self.broker_addr,
            self.config.ha_listen_port,
        )
        return host, port

    async def _start_transactions(self, ctx: BrokerContext, loop: asyncio.AbstractEventLoop) -> None:
        """Rebuild the half-message state from the log and start the check-back thread."""
        cfg = self.config
        txn = TransactionalMessageService(
            self.store,
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
        await asyncio.to_thread(txn.recover)
        ctx.txn = txn
        ctx.topics.create_retry_topic(TRANS_CHECK_MAX_TIME_TOPIC, 1)

        def send_check(group: str, body: bytes, header: CheckTransactionStateRequestHeader) -> bool:
            # Runs on the check thread: pick a live producer of the group, send on the loop, never block.
            try:
                infos = list(ctx.producers.get(group).values())
            except RuntimeError:  # the table changed under us; the next pass retries
                return False
            if not infos:
                return False
            cmd = RemotingCommand.request(
                RequestCode.CHECK_TRANSACTION_STATE, header.to_ext_fields(), body=body, oneway=True
            )
            channel = random.choice(infos).channel
            asyncio.run_coroutine_threadsafe(self._oneway(channel, cmd), loop)
            return True

        self._txn_checker = TransactionCheckService(txn, send_check)
        self._txn_checker.start()

    async def _register_all(self) -> None:
        """Register with the NameServers; in controller mode only once the controller named the role."""
        if self.registrar is not None and (self.replicas is None or self.replicas.role_known):
            await self.registrar.register_all()

    async def _role_changed(self, config: BrokerConfig) -> None:
        """Controller mode: the role changed (replicas_manager.py); follow it everywhere."""
        ctx = self.ctx
        assert ctx is not None
        was_master = ctx.config.is_master
        self.config = ctx.config = replace(config, listen_port=ctx.config.listen_port)
        loop = asyncio.get_running_loop()
        if config.is_master and not was_master:
            schedule = ctx.schedule = ScheduleMessageService(
                self.store,
                list(ctx.delay_levels_ms),
                config_dir=self._config_dir,
                flush_interval_ms=self.config.flush_delay_offset_interval_ms,
            )
            await asyncio.to_thread(schedule.start)
            await self._start_transactions(ctx, loop)
        elif was_master and not config.is_master:
            await self._stop_master_services(ctx)
        if self.registrar is not None:
            self.registrar.trigger()
        if self.slave_sync is not None and not config.is_master:
            self.slave_sync.master_changed(self.replicas.master_addr if self.replicas else None, None)

    async def _stop_master_services(self, ctx: BrokerContext) -> None:
        checker, self._txn_checker, ctx.txn = self._txn_checker, None, None
        if checker is not None:
            await asyncio.to_thread(checker.shutdown)
        schedule, ctx.schedule = ctx.schedule, None
        if schedule is not None:
            try:
                await asyncio.to_thread(schedule.shutdown)
            except Exception:
                log.exception("cannot persist the delay offsets")

    def _identity(self) -> tuple[str, str, str, int, str]:
        cfg = self.config
        return (
            cfg.broker_cluster_name,
            cfg.broker_name,
            self.broker_addr,
            cfg.broker_id,
            f"{cfg.broker_ip2 or cfg.broker_ip1}:{cfg.ha_listen_port}",
        )

    async def _every(self, period_s: float, fn: Callable[[], Awaitable[object]]) -> None:
        while True:
            await asyncio.sleep(period_s)
            try:
                await fn()
            except Exception:
                log.exception("periodic task %s failed", getattr(fn, "__name__", fn))

    async def _scan_clients(self) -> None:
        ctx = self.ctx
        if ctx is None:
            return
        for group, client_id in ctx.consumers.scan_not_active():
            log.info("consumer %s of group %s expired (no heartbeat)", client_id, group)
        ctx.producers.scan_not_active()
        ctx.locks.scan_expired()

    async def persist_offsets(self) -> None:
        """Write consumerOffset.json if it changed (the JSON is built on the loop, written off it)."""
        ctx = self.ctx
        if ctx is None or not ctx.offsets.dirty:
            return
        doc = ctx.offsets.encode()
        ctx.offsets.dirty = False
        path = os.path.join(self._config_dir, CONSUMER_OFFSET_JSON)
        try:
            await asyncio.to_thread(persist_json_file, path, doc)
        except OSError:
            ctx.offsets.dirty = True
            raise

    def _notify_ids_changed(self, group: str, channels: list[Channel]) -> None:
        loop = asyncio.get_running_loop()
        for ch in channels:
            cmd = RemotingCommand.request(
                RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": group}, oneway=True
            )
            task = loop.create_task(self._oneway(ch, cmd))
            self._notify_tasks.add(task)
            task.add_done_callback(self._notify_tasks.discard)

    @staticmethod
    async def _oneway(channel: Channel, cmd: RemotingCommand) -> None:
        try:
            await asyncio.wait_for(channel.invoke_oneway(cmd), NOTIFY_TIMEOUT_MS / 1000.0)
        except Exception as exc:  # a dead client must not disturb the others
            log.debug("notify %s failed: %s", channel.remote_address, exc)

    def _channel_closed(self, channel: Channel) -> None:
        ctx = self.ctx
        if ctx is not None:
            ctx.consumers.channel_closed(channel)
            ctx.producers.channel_closed(channel)

    async def shutdown(self, grace_s: float = 5.0) -> None:
        """Clean stop: unregister, answer parked pulls, drain requests, persist, flush the store."""
        if self._stopped:
            return
        self._stopped = True
        ctx = self.ctx
        if self.registrar is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.registrar.unregister_all(), 5.0)
        if ctx is not None:
            ctx.hold.shutdown()
        if self.server is not None:
            await self.server.stop(grace_s)
        if self.metrics is not None:
            await self.metrics.stop()
        if self.replicas is not None:
            await self.replicas.stop()
        if self.replication is not None:
            await self.replication.stop()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.slave_sync is not None:
            await self.slave_sync.close()
        if self._txn_checker is not None:
            await asyncio.to_thread(self._txn_checker.shutdown)
        if ctx is not None:
            with contextlib.suppress(Exception):
                await self.persist_offsets()
            for ex in (ctx.send_executor, ctx.pull_executor, ctx.query_executor):
                ex.shutdown(wait=True)
            if ctx.schedule is not None:
                try:
                    await asyncio.to_thread(ctx.schedule.shutdown)
                except Exception:
                    log.exception("cannot persist the delay offsets")
        if self._client is not None:
            await self._client.close()
        if self._store is not None:
            await asyncio.to_thread(self._store.shutdown)
        log.info("broker %s shut down", self.config.broker_name)
