"""The controller process: a Raft node, the request processors on a RemotingServer, and the scans.

:class:`ControllerServer` owns the pieces and their lifecycle, standalone (``mqcontroller``) or
embedded in the NameServer process (``enableControllerInNamesrv``), where it stays a separate
object on its own port.  ``start()`` joins the Raft group, listens, and launches the scan that
every ``scanNotActiveBrokerInterval`` drops brokers whose heartbeats stopped and, on the leader,
elects a new master for each group whose master is gone.  A broker connection closing makes its
brokers inactive at once and triggers the same check, as Java's ``BrokerHousekeepingService``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from rocketq.controller.config import ControllerConfig
from rocketq.controller.manager import ControllerManager
from rocketq.controller.processor import ControllerProcessor
from rocketq.controller.raft import ControllerRaft
from rocketq.server import Channel, RemotingServer

__all__ = ["ControllerServer", "boot_line"]

log = logging.getLogger("rocketq.controller")


def boot_line(address: str, raft_address: str) -> str:
    """The line printed once listening (test helpers and scripts parse it)."""
    return f"The Controller boot success. listening on {address} raft={raft_address}"


class ControllerServer:
    """One controller node; ``await start()`` then ``await stop()``."""

    def __init__(self, config: ControllerConfig, *, bind_address: str | None = None) -> None:
        config.require_peers()
        self.config = config
        self.raft = ControllerRaft(config)
        self.manager = ControllerManager(config, self.raft)
        self.processor = ControllerProcessor(self.manager)
        peer = config.self_peer
        port = peer.port if config.listen_port is None else config.listen_port
        self.remoting = RemotingServer(
            host=bind_address or peer.host, port=port, on_channel_close=self._on_channel_close
        )
        self.processor.register_all(self.remoting)
        self._scan_task: asyncio.Task[None] | None = None
        self._check_task: asyncio.Task[None] | None = None

    @property
    def address(self) -> str:
        return self.remoting.address

    def boot_line(self) -> str:
        return boot_line(self.address, self.config.self_peer.raft_address)

    async def start(self) -> str:
        """Join the Raft group, listen, start the scan; returns ``"host:port"``."""
        await asyncio.get_running_loop().run_in_executor(None, self.raft.start)
        try:
            await self.remoting.start()
        except OSError:
            self.raft.stop()
            raise
        self._scan_task = asyncio.get_running_loop().create_task(self._scan_loop(), name="controller-scan")
        log.info(
            "controller %s of group %s: peers %s, store %s",
            self.config.controller_dleger_self_id,
            self.config.controller_dleger_group,
            self.config.peers_spec(),
            self.config.controller_store_path or "none (in memory)",
        )
        return self.address

    async def stop(self, grace_s: float = 3.0) -> None:
        for task in (self._scan_task, self._check_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._scan_task = self._check_task = None
        await self.remoting.stop(grace_s)
        await self.manager.close()
        await asyncio.get_running_loop().run_in_executor(None, self.raft.stop)

    def _on_channel_close(self, channel: Channel) -> None:
        gone = self.manager.heartbeats.on_channel_close(channel)
        for info in gone:
            ident = info.identity
            log.info(
                "broker %s id=%d (%s) inactive: its connection closed",
                ident.broker_name,
                ident.broker_id,
                info.broker_addr,
            )
        if gone and self.manager.is_leader:
            self._schedule_check()

    def _schedule_check(self) -> None:
        if self._check_task is None or self._check_task.done():
            self._check_task = asyncio.get_running_loop().create_task(self._check(), name="controller-check")

    async def _check(self) -> None:
        try:
            await self.manager.check_inactive_masters()
        except Exception:  # keep serving; the next scan tries again
            log.exception("checking for inactive masters failed")

    async def _scan_loop(self) -> None:
        while True:  # the interval is read each round: UPDATE_CONTROLLER_CONFIG may change it
            await asyncio.sleep(self.manager.config.scan_not_active_broker_interval_ms / 1000)
            for info in self.manager.heartbeats.scan():
                ident = info.identity
                log.warning(
                    "broker %s id=%d (%s) inactive: no heartbeat for %d ms",
                    ident.broker_name,
                    ident.broker_id,
                    info.broker_addr,
                    info.timeout_ms,
                )
            await self._check()
