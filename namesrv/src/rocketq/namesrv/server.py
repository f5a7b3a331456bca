"""The NameServer process: route registry, KV store and request processors on a RemotingServer.

:class:`NamesrvServer` owns the pieces and their lifecycle.  ``start()`` loads the persisted KV
config, starts listening and launches the expiry scan; ``stop()`` stops the scan and shuts the
transport down gracefully.  Two events remove a broker besides UNREGISTER_BROKER, as in
RocketMQ: its connection closing (immediately, through the transport's channel-close listener)
and silence longer than ``broker_channel_expired_time_ms`` (found by the scan every
``scan_not_active_broker_interval_ms``, which also closes the stale connection).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging

from rocketq.controller.config import config_from_properties as controller_config_from_properties
from rocketq.controller.server import ControllerServer
from rocketq.namesrv.config import NamesrvConfig
from rocketq.namesrv.errors import NamesrvError
from rocketq.namesrv.kvconfig import KvConfigManager
from rocketq.namesrv.metrics import NamesrvMetrics
from rocketq.namesrv.processor import NamesrvProcessor
from rocketq.namesrv.routeinfo import RemovedBroker, RouteInfoManager
from rocketq.server import Channel, RemotingServer
from rocketq.server.acl import acl_request_check
from rocketq.server.metrics import MetricsExporterType

log = logging.getLogger("rocketq.namesrv")


def boot_line(config: NamesrvConfig, address: str) -> str:
    """The line printed once listening (test helpers and scripts parse it)."""
    return f"The Name Server boot success. serializeType={config.serialize_type.name}, listening on {address}"


class NamesrvServer:
    """A NameServer bound to one address; use ``await start()`` then ``await stop()``."""

    def __init__(self, config: NamesrvConfig) -> None:
        self.config = config
        self.route_info = RouteInfoManager()
        self.kv_config = KvConfigManager(config.kv_config_path)
        self.processor = NamesrvProcessor(config, self.route_info, self.kv_config)
        self.metrics: NamesrvMetrics | None = None
        if config.metrics_exporter_type is MetricsExporterType.PROM:  # docs/observability.md
            self.metrics = NamesrvMetrics(config, self.route_info)
        request_check = acl_request_check(config.acl_enable, config.acl_file_path)
        self.remoting = RemotingServer(
            host=config.bind_address,
            port=config.listen_port,
            serialize_type=config.serialize_type,
            max_inflight_per_connection=config.max_inflight_per_connection,
            max_queued_requests=config.max_queued_requests,
            limits=config.connection_limits(),
            on_channel_close=self._on_channel_close,
            tls_mode=config.tls.mode,
            ssl_context=config.tls.server_context(),
            request_check=self.metrics.request_check(request_check) if self.metrics else request_check,
        )
        self.processor.register_all(self.remoting)
        self._scan_task: asyncio.Task[None] | None = None
        self.controller: ControllerServer | None = None
        if config.enable_controller_in_namesrv:  # a separate server object on the controller's port
            controller_config, _ = controller_config_from_properties(dict(config.controller_properties))
            # UPDATE_CONTROLLER_CONFIG persists into the NameServer's file, where it read the keys
            controller_config = dataclasses.replace(controller_config, config_file=config.config_file)
            self.controller = ControllerServer(controller_config)

    @property
    def address(self) -> str:
        return self.remoting.address

    async def start(self) -> str:
        """Load KV config, listen, start the expiry scan; returns ``"host:port"``."""
        self.kv_config.load()
        await self.remoting.start()
        if self.metrics is not None:
            try:
                await self.metrics.start(self.remoting.address)
            except NamesrvError:
                await self.remoting.stop(0)
                raise
        if self.controller is not None:
            try:
                await self.controller.start()
            except OSError:
                await self.remoting.stop(0)
                raise
        self._scan_task = asyncio.get_running_loop().create_task(self._scan_loop(), name="namesrv-scan")
        return self.address

    async def stop(self, grace_s: float = 5.0) -> None:
        if self._scan_task is not None:
            self._scan_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._scan_task
            self._scan_task = None
        if self.controller is not None:
            await self.controller.stop(grace_s)
        await self.remoting.stop(grace_s)
        if self.metrics is not None:
            await self.metrics.stop()

    def _on_channel_close(self, channel: Channel) -> None:
        for removed in self.route_info.on_channel_destroy(channel):
            log.info(
                "broker %s (%s) removed: its connection from %s closed",
                removed.broker_name, removed.broker_addr, channel.remote_address,
            )  # fmt: skip

    def scan_not_active_brokers(self) -> list[RemovedBroker]:
        """One expiry pass: drop silent brokers and close their connections."""
        removed = self.route_info.scan_not_active_brokers(self.config.broker_channel_expired_time_ms)
        for r in removed:
            log.warning(
                "broker %s (%s) expired: no registration for %d ms",
                r.broker_name, r.broker_addr, self.config.broker_channel_expired_time_ms,
            )  # fmt: skip
            if isinstance(r.channel, Channel):
                r.channel.close()
        return removed

    async def _scan_loop(self) -> None:
        interval = self.config.scan_not_active_broker_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                self.scan_not_active_brokers()
            except Exception:  # keep scanning; a bug here must not stop expiry for good
                log.exception("expiry scan failed")
