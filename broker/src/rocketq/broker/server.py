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
client channels expired every 10 s, stale queue locks dropped; on a master, the services of
:mod:`.master_services` (delayed delivery, transaction check-back).  The request table is
:mod:`.processor.table`, the managers around the store :func:`.processor.context.build_context`.
The same request table, less the long polls, is served on the VIP channel (``fastListenPort``,
listenPort - 2, :mod:`rocketq.client.remoting.vip_channel`).
``shutdown()`` is the clean stop (SIGTERM): sends are answered SERVICE_NOT_AVAILABLE from then on
(producers retry them on another broker), unregister from the NameServers, answer parked pulls,
drain running requests, persist the metadata, then shut the store down, which flushes and removes
the ``abort`` file.  A DLedger master first hands the mastership over to a member holding its whole
log and waits until that one is master (``DLedgerManager.hand_over_before_stop``, docs/dledger.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import replace

from rocketq.broker.broker_to_client import Broker2Client
from rocketq.broker.config import BrokerConfig, BrokerRole
from rocketq.broker.config_loader import build_store_config
from rocketq.broker.controller_mode.processors import controller_mode_processors
from rocketq.broker.controller_mode.replicas_manager import ReplicasManager
from rocketq.broker.dledger.java_store import java_dledger_store, java_store_error
from rocketq.broker.dledger.manager import DLedgerManager
from rocketq.broker.errors import BrokerError
from rocketq.broker.ha.replication import Replication
from rocketq.broker.master_services import MasterServices
from rocketq.broker.metadata import CONSUMER_OFFSET_JSON, persist_json_file, persist_text_file
from rocketq.broker.metrics.exporter import BrokerMetrics
from rocketq.broker.namesrv_registration import NamesrvRegistrar
from rocketq.broker.processor.acl import AclAdminProcessor
from rocketq.broker.processor.context import BrokerContext, build_context
from rocketq.broker.processor.pull import confirm_waker
from rocketq.broker.processor.table import processor_table
from rocketq.broker.slave_sync import SlaveSynchronizer
from rocketq.broker.store.message_store import MessageStore
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.vip_channel import NOT_ON_VIP_CHANNEL
from rocketq.client.transport.aio import RemotingClient
from rocketq.server import Channel, Processor, RemotingServer
from rocketq.server.acl import PlainAclValidator, RequestSigner, acl_validator

__all__ = ["BrokerController"]

log = logging.getLogger(__name__)

CLIENT_SCAN_INTERVAL_S = 10.0
#: how long a stopping DLedger master waits for a member to take the mastership over
HANDOVER_BEFORE_STOP_S = 10.0

#: requests refused once shutdown began: they write messages, and the client can take them elsewhere
SEND_CODES: frozenset[int] = frozenset(
    {
        RequestCode.SEND_MESSAGE,
        RequestCode.SEND_MESSAGE_V2,
        RequestCode.SEND_BATCH_MESSAGE,
        RequestCode.CONSUMER_SEND_MSG_BACK,
    }
)


class BrokerController:
    """One broker: ``await start()`` returns the bound ``(host, port)``; ``await shutdown()`` stops it."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self._store: MessageStore | None = None
        self.ctx: BrokerContext | None = None
        self.server: RemotingServer | None = None
        self.vip_server: RemotingServer | None = None  # the VIP channel, listenPort - 2
        self._refuse_sends = False  # set by shutdown(): sends are answered SERVICE_NOT_AVAILABLE
        self.acl: PlainAclValidator | None = None
        self.registrar: NamesrvRegistrar | None = None
        self._client: RemotingClient | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._config_dir = ""
        self._stopped = False
        self._master: MasterServices | None = None
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
        ctx = await self._open_store(loop)
        replication = self.replication = Replication(self.config, self.store)
        ctx.replicated = replication.wait_offset
        ha_port = await replication.start()
        ctx.config = replace(ctx.config, ha_listen_port=ha_port)
        host, port = await self._serve(ctx, replication)
        ctx.with_port(port)
        self.config = ctx.config
        if self.replicas is not None:
            self.replicas.config = self.replicas.replication.config = self.config
        await self._start_registration(ctx, replication)
        self._start_periodic_tasks(loop)
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

    async def _open_store(self, loop: asyncio.AbstractEventLoop) -> BrokerContext:
        """Start the store, build the context around it and, on a master, the master's services."""
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
        if self.config.enable_dleger_commit_log:
            self._enter_dledger_mode()
        store_config = build_store_config(self.config)
        self._config_dir = str(store_config.config_dir)
        store = self._store = MessageStore(store_config)
        await asyncio.to_thread(store.start)
        to_client = Broker2Client(loop)
        ctx = build_context(
            self.config,
            store,
            loop,
            config_dir=self._config_dir,
            on_ids_changed=to_client.notify_consumer_ids_changed,
        )
        self.ctx = ctx
        self._master = MasterServices(ctx, self._config_dir, to_client)
        store.add_arrival_listener(ctx.hold.arrival_listener)
        store.add_arrival_listener(ctx.pop_polling.arrival_listener)
        if self.config.is_master:
            await self._master.start()
        return ctx

    def _enter_dledger_mode(self) -> None:
        """DLedger mode (docs/dledger.md): the group elects the master; no writes until then."""
        found = java_dledger_store(self.config.store_path_root_dir)
        if found is not None:
            log.error("%s", java_store_error(found))
            raise BrokerError(java_store_error(found))
        log.info(
            "enableDLegerCommitLog=true: brokerRole=%s and brokerId=%d of the configuration are "
            "ignored; the DLedger group %s elects the master (no writes until then)",
            self.config.broker_role.value,
            self.config.broker_id,
            self.config.dleger_group,
        )
        self.config = replace(
            self.config, broker_role=BrokerRole.SLAVE, broker_id=max(self.config.broker_id, 1)
        )

    async def _serve(self, ctx: BrokerContext, replication: Replication) -> tuple[str, int]:
        """Open the remoting port with every processor registered; the bound ``(host, port)``."""
        self.acl = acl_validator(self.config.acl_enable, self.config.acl_file_path)  # plain ACL, or None
        self.server = self._remoting_server(self.config.listen_port)
        signer = RequestSigner.of(self.config.access_key, self.config.secret_key)  # ACL: sign own requests
        self._client = RemotingClient(ssl_context=self.config.tls.client_context(), rpc_hook=signer)
        if self.config.metrics.enabled:  # before the processors capture ctx.metrics
            self.metrics = BrokerMetrics(self.config, ctx, replication)
        table: dict[int, Processor] = {}
        for code, processor in self._processors(ctx, replication, self._client).items():
            if self.metrics is not None:
                processor = self.metrics.instrument(code, processor)
            if code in SEND_CODES:
                processor = self._refused_while_stopping(processor)
            table[code] = processor
            self.server.register(code, processor)
        if self.metrics is not None:
            await self.metrics.start()
        bound = await self.server.start()
        await self._serve_vip_channel(table)
        return bound

    def _remoting_server(self, port: int) -> RemotingServer:
        return RemotingServer(
            host=self.config.bind_address,
            port=port,
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

    async def _serve_vip_channel(self, table: dict[int, Processor]) -> None:
        """Open the VIP channel (RocketMQ's fast remoting server): every request but long polls.

        A configured ``fastListenPort`` that cannot be bound fails the start; the derived
        ``listenPort - 2`` only logs a warning (clients without ``vipChannelEnabled`` never use it).
        """
        port = self.config.vip_listen_port()
        server = self._remoting_server(port)
        for code, processor in table.items():
            if code not in NOT_ON_VIP_CHANNEL:
                server.register(code, processor)
        try:
            host, bound = await server.start()
        except OSError as exc:
            if not self.config.fast_listen_port_derived:
                raise
            log.warning("VIP channel not opened: port %d (listenPort - 2) cannot be bound: %s", port, exc)
            return
        self.vip_server = server
        log.info("VIP channel (fastListenPort) listening on %s:%d", host, bound)

    def _refused_while_stopping(self, processor: Processor) -> Processor:
        """``processor`` answering SERVICE_NOT_AVAILABLE once shutdown began (the producer retries
        the send on another broker, as it does for a Java broker whose store is shutting down)."""

        async def send(cmd: RemotingCommand, channel: Channel) -> RemotingCommand | None:
            if self._refuse_sends:
                return cmd.make_response(
                    ResponseCode.SERVICE_NOT_AVAILABLE,
                    f"broker {self.config.broker_name} is shutting down, send to another broker",
                )
            no_leader = (
                self.replicas.no_leader_refusal() if isinstance(self.replicas, DLedgerManager) else None
            )
            if no_leader is not None:  # DLedger mode: the group is electing (docs/dledger.md)
                return cmd.make_response(ResponseCode.SERVICE_NOT_AVAILABLE, no_leader)
            return await processor(cmd, channel)

        return send

    def _processors(
        self, ctx: BrokerContext, replication: Replication, client: RemotingClient
    ) -> dict[int, Processor]:
        """The request table, with the ACL admin codes and, in controller mode, its processors."""
        table = processor_table(ctx, replication)
        if self.acl is not None:
            table.update(AclAdminProcessor(ctx, self.acl).processors())
        if self.config.enable_controller_mode:
            self.replicas = ReplicasManager(
                self.config,
                ctx.store,
                replication,
                client,
                broker_addr=lambda: ctx.broker_addr,
                on_role_changed=self._role_changed,
            )
            table.update(controller_mode_processors(self.replicas))
            self.replicas.confirm_listeners.append(confirm_waker(ctx))
        if self.config.enable_dleger_commit_log:  # the group, not a controller, names the master
            self.replicas = DLedgerManager(
                self.config,
                ctx.store,
                replication,
                client,
                broker_addr=lambda: ctx.broker_addr,
                on_role_changed=self._role_changed,
            )
            code = RequestCode.GET_BROKER_EPOCH_CACHE  # what a new slave compares its epochs with
            table[code] = controller_mode_processors(self.replicas)[code]
            self.replicas.confirm_listeners.append(confirm_waker(ctx))
        return table

    async def _start_registration(self, ctx: BrokerContext, replication: Replication) -> None:
        """Register with the NameServers; a slave also starts copying its master's metadata."""
        assert self._client is not None
        registrar = self.registrar = NamesrvRegistrar(
            self._client,
            self.config.namesrv_addr,
            identity=self._identity,
            topic_wrapper=ctx.topics.encode,
            timeout_ms=self.config.register_broker_timeout_ms,
        )
        registrar.master_listeners.append(lambda master, ha: replication.on_register_result(ha, master))
        ctx.topics.add_listener(lambda _tc: self.registrar.trigger() if self.registrar else None)
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

    def _start_periodic_tasks(self, loop: asyncio.AbstractEventLoop) -> None:
        self._tasks = [
            loop.create_task(self._every(self.config.register_period_s, self._register_all)),
            loop.create_task(
                self._every(self.config.flush_consumer_offset_interval_ms / 1000.0, self.persist_offsets)
            ),
            loop.create_task(self._every(CLIENT_SCAN_INTERVAL_S, self._scan_clients)),
        ]
        if self.ctx is not None:  # the minute/hour/day windows of mqadmin statsAll
            self._tasks.append(loop.create_task(self.ctx.stats_items.run()))
        if self.slave_sync is not None:
            sync_period_s = self.config.slave_sync_interval_ms / 1000.0
            self._tasks.append(loop.create_task(self._every(sync_period_s, self.slave_sync.sync_all)))

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
        assert self._master is not None
        if config.is_master and not was_master:
            await self._master.start()
        elif was_master and not config.is_master:
            await self._master.stop()
        if self.registrar is not None:
            self.registrar.trigger()
        if self.slave_sync is not None and not config.is_master:
            self.slave_sync.master_changed(self.replicas.master_addr if self.replicas else None, None)

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
        """Write consumerOffset.json and consumerOrderInfo.json if changed (JSON built on the loop)."""
        ctx = self.ctx
        if ctx is not None and ctx.pop_order.dirty and ctx.pop_order.path is not None:
            text = ctx.pop_order.encode()  # built on the loop (the table is the loop's), written off it
            ctx.pop_order.dirty = False
            try:
                await asyncio.to_thread(persist_text_file, ctx.pop_order.path, text)
            except OSError:
                ctx.pop_order.dirty = True
                raise
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
        if isinstance(self.replicas, DLedgerManager) and grace_s > 0:  # a master hands over first
            with contextlib.suppress(Exception):
                await self.replicas.hand_over_before_stop(HANDOVER_BEFORE_STOP_S)
        self._refuse_sends = True
        ctx = self.ctx
        if self.registrar is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.registrar.unregister_all(), 5.0)
        if ctx is not None:
            ctx.hold.shutdown()
            ctx.pop_polling.shutdown()
        if self.vip_server is not None:
            await self.vip_server.stop(grace_s)
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
        if self._master is not None:
            await self._master.stop_check_back()
            await self._master.stop_revive()  # before the last persist: its progress is an offset
        if ctx is not None:
            with contextlib.suppress(Exception):
                await self.persist_offsets()
            for ex in (ctx.send_executor, ctx.pull_executor, ctx.query_executor):
                ex.shutdown(wait=True)
        if self._master is not None:
            await self._master.stop_schedule()
        if self._client is not None:
            await self._client.close()
        if self._store is not None:
            await asyncio.to_thread(self._store.shutdown)
        log.info("broker %s shut down", self.config.broker_name)
