"""A controller-mode broker group for failover tests and benchmarks: controllers, a NameServer, brokers.

:class:`ControllerGroup` starts three controllers (a Raft group, ``python -m rocketq.controller``),
a NameServer and ``size`` brokers of one broker group in controller mode, each on a fixed port so
that a restart keeps its address.  :data:`FAST_FAILOVER_BROKER_CONF` holds the broker settings
docs/failover.md recommends for fast failover ("Settings that trade failover time against false
elections"), :data:`FAST_FAILOVER_CONTROLLER_CONF` the controller's.  The group reads the brokers'
controller-mode state from GET_BROKER_HA_STATUS (``master``, ``masterEpoch``, ``syncStateSet``,
``fenced``...) and the controllers' from CONTROLLER_GET_METADATA_INFO and
CONTROLLER_GET_SYNC_STATE_DATA.  :meth:`ControllerGroup.close` wakes stopped brokers, kills every
process and returns the tails of the brokers' logs for the test output.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from rocketq.client.admin_controller import AsyncControllerAdmin
from rocketq.client.api import BlockingMQClientAPI
from rocketq.client.config import ClientConfig
from rocketq.client.errors import RocketQError
from rocketq.client.launcher import (
    ServerProcess,
    free_port,
    restart_controller,
    spawn_broker,
    spawn_controllers,
    spawn_namesrv,
)
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.controller import ControllerMetadata, ReplicasInfo
from rocketq.client.remoting.lenient_json import loads
from rocketq.client.testing.messaging import pull_header
from rocketq.client.testing.wait import wait_for

__all__ = [
    "FAST_FAILOVER_BROKER_CONF",
    "FAST_FAILOVER_CONTROLLER_CONF",
    "ControllerGroup",
    "MasterCheck",
]

#: docs/failover.md, "Settings that trade failover time against false elections", plus small
#: store files and disk thresholds a shared CI disk never trips
FAST_FAILOVER_BROKER_CONF: Mapping[str, Any] = {
    "enableControllerMode": True,
    "brokerHeartbeatInterval": 1000,
    "controllerHeartBeatTimeoutMills": 3000,
    "syncBrokerMetadataPeriod": 1000,
    "checkSyncStateSetPeriod": 1000,
    "allAckInSyncStateSet": True,
    "flushDiskType": "ASYNC_FLUSH",
    "haListenPort": 0,
    "haSendHeartbeatInterval": 500,
    "haHousekeepingInterval": 2000,
    "syncFlushTimeout": 1000,
    "slaveSyncInterval": 1000,
    "mappedFileSizeCommitLog": 8 << 20,
    "maxMessageSize": 1 << 20,
    "mappedFileSizeConsumeQueue": 20 * 50_000,
    "diskMaxUsedSpaceRatio": 99,
    "diskSpaceCleanForciblyRatio": 99,
    "diskSpaceWarningLevelRatio": 99,
}
#: the controller's own heartbeat timeout matters too: a controller elects nobody for that long
#: after its start (it cannot tell a dead master from one it has not heard yet)
FAST_FAILOVER_CONTROLLER_CONF: Mapping[str, Any] = {
    "scanNotActiveBrokerInterval": 1000,
    "controllerHeartBeatTimeoutMills": 3000,
}

#: a broker's address and GET_BROKER_HA_STATUS keys -> whether it is the master waited for
MasterCheck = Callable[[str, dict[str, Any]], bool]


def broker_knows_topic(api: BlockingMQClientAPI, addr: str, topic: str) -> bool:
    """Whether the broker at ``addr`` answers a pull of ``topic``'s queue 0 (a broker that does
    not know the topic, or does not answer, refuses it)."""
    try:
        api.pull_message(addr, pull_header(topic, 0, 0, group="knows-topic-check", max_msg_nums=1), 3000)
    except (RocketQError, TimeoutError):
        return False
    return True


class ControllerGroup:
    """Three controllers, a NameServer and the ``size`` brokers of ``broker_name`` (slots 0..size-1)."""

    def __init__(
        self,
        tmp: Path,
        broker_name: str,
        *,
        size: int = 3,
        broker_conf: Mapping[str, Any] = FAST_FAILOVER_BROKER_CONF,
        controller_conf: Mapping[str, Any] = FAST_FAILOVER_CONTROLLER_CONF,
        client: ClientConfig | None = None,
        wait_s: float = 90.0,
    ) -> None:
        self.tmp = tmp
        self.broker_name = broker_name
        self.broker_conf = dict(broker_conf)
        self.wait_s = wait_s
        self.controllers: list[ServerProcess] = spawn_controllers(
            tmp / "ctl", 3, controller_conf=controller_conf
        )
        self._namesrv: ServerProcess | None = None
        self._api: BlockingMQClientAPI | None = None
        self.ports = [free_port() for _ in range(size)]
        self.brokers: list[ServerProcess | None] = [None] * size
        try:
            self._namesrv = spawn_namesrv(tmp / "ns")
            self._api = BlockingMQClientAPI(self._namesrv.addr, config=client or ClientConfig())
            for slot in range(size):
                self.start_broker(slot)
        except BaseException:
            self.close()
            raise

    @property
    def namesrv(self) -> ServerProcess:
        assert self._namesrv is not None
        return self._namesrv

    @property
    def namesrv_addr(self) -> str:
        return self.namesrv.addr

    @property
    def api(self) -> BlockingMQClientAPI:
        """A client API of the group's NameServer, for direct requests to brokers and controllers."""
        assert self._api is not None
        return self._api

    @property
    def controller_addr(self) -> str:
        return ";".join(p.addr for p in self.controllers)

    def addr(self, slot: int) -> str:
        return f"127.0.0.1:{self.ports[slot]}"

    def slot_of(self, addr: str) -> int:
        return self.ports.index(int(addr.rpartition(":")[2]))

    def start_broker(self, slot: int) -> ServerProcess:
        conf = {
            **self.broker_conf,
            "brokerName": self.broker_name,
            "brokerId": slot + 1,
            "listenPort": self.ports[slot],
        }
        proc = spawn_broker(self.tmp, self.namesrv_addr, controllerAddr=self.controller_addr, **conf)
        self.brokers[slot] = proc
        return proc

    def broker(self, slot: int) -> ServerProcess:
        proc = self.brokers[slot]
        assert proc is not None
        return proc

    def status(self, addr: str) -> dict[str, Any]:
        """GET_BROKER_HA_STATUS with the controller-mode keys; {} when the broker does not answer."""
        cmd = RemotingCommand.request(RequestCode.GET_BROKER_HA_STATUS)
        api = self.api
        try:
            response = api.run(api.api.invoke(addr, cmd, 2000), 5)
        except (RocketQError, TimeoutError):
            return {}
        obj = loads(response.body) if response.code == ResponseCode.SUCCESS else {}
        return obj if isinstance(obj, dict) else {}

    def knows_topic(self, addr: str, topic: str) -> bool:
        """Whether the broker at ``addr`` knows ``topic`` (:func:`broker_knows_topic`)."""
        return broker_knows_topic(self.api, addr, topic)

    def routed_master(self) -> str | None:
        """The master address the NameServer lists for the group, None when it lists none."""
        try:
            bd = self.api.get_broker_cluster_info().broker_addr_table.get(self.broker_name)
        except (RocketQError, TimeoutError):
            return None
        return bd.master_addr if bd is not None and bd.master_addr else None

    def master(self) -> tuple[str, dict[str, Any]] | None:
        """The master the NameServer lists, when it says it is an unfenced master."""
        addr = self.routed_master()
        st = self.status(addr) if addr else {}
        return (addr, st) if addr and st.get("master") and not st.get("fenced") else None

    def wait_master(
        self, what: str = "a master", ok: MasterCheck = lambda a, st: True
    ) -> tuple[str, dict[str, Any]]:
        """Wait (bounded) for a listed, unfenced master for which ``ok`` holds."""
        found: list[tuple[str, dict[str, Any]]] = []

        def ready() -> bool:
            m = self.master()
            if m is not None and ok(*m):
                found.append(m)
            return bool(found)

        wait_for(ready, what, self.wait_s)
        return found[-1]

    def wait_new_master(self, old_addr: str) -> tuple[str, dict[str, Any]]:
        """Wait (bounded) for a listed, unfenced master other than ``old_addr``."""
        return self.wait_master(f"a master other than {old_addr}", lambda addr, st: addr != old_addr)

    def full_set(self, addr: str, st: dict[str, Any]) -> bool:
        """A :data:`MasterCheck`: every broker of the group is in the master's SyncStateSet."""
        return len(st.get("syncStateSet") or ()) == len(self.ports)

    def controller_admin(self) -> AsyncControllerAdmin:
        return AsyncControllerAdmin(self.api.api)

    def metadata(self, proc: ServerProcess) -> ControllerMetadata:
        api = self.api
        return api.run(self.controller_admin().get_controller_metadata(proc.addr), 10)

    def leader_index(self) -> int | None:
        """The index of the controller that says it is the Raft leader, None when none does."""
        for i, proc in enumerate(self.controllers):
            if proc.is_alive():
                try:
                    if self.metadata(proc).is_leader:
                        return i
                except (RocketQError, TimeoutError):
                    continue
        return None

    def leader(self) -> ServerProcess:
        found: list[int] = []

        def has_leader() -> bool:
            i = self.leader_index()
            if i is not None:
                found.append(i)
            return i is not None

        wait_for(has_leader, "a controller leader", self.wait_s)
        return self.controllers[found[-1]]

    def restart_controller(self, index: int) -> ServerProcess:
        self.controllers[index] = restart_controller(self.controllers[index])
        return self.controllers[index]

    def replicas_info(self) -> ReplicasInfo:
        admin = self.controller_admin()
        info = self.api.run(admin.get_sync_state_data(self.controller_addr, [self.broker_name]), 15)
        return info.replicas_info_table[self.broker_name]

    def close(self, *, dump_stacks: bool = False, log_lines: int = 25) -> str:
        """Kill every process (stopped brokers are woken first; ``dump_stacks`` has them write
        their threads' stacks to their logs before); returns the tails of the brokers' logs."""
        tails: list[str] = []
        for proc in self.brokers:
            if proc is None:
                continue
            if proc.is_alive():
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGCONT)
                    if dump_stacks:
                        os.kill(proc.pid, signal.SIGUSR1)
                        time.sleep(0.5)  # the broker writes its stacks before it is killed
            proc.kill9()
            tails.append(f"--- {proc.name} ({proc.log_path}) ---\n{proc.log_tail(log_lines)}")
        if self._api is not None:
            self._api.close()
        for server in [self._namesrv, *self.controllers]:
            if server is not None:
                server.kill9()
        return "\n".join(tails)
