"""Three real ``mqcontroller`` processes: Raft leadership, replicated state, quorum loss, catch-up, elections.

The controllers are started with :func:`rocketq.client.launcher.spawn_controllers`; brokers are
played by remoting clients that speak the controller protocol (registration, heartbeats on their
own connection to every controller, SyncStateSet changes), so the election logic runs in the
real controller processes.  Crashes are SIGKILL; every wait is a bounded poll, no timing is
asserted.
"""

from __future__ import annotations

import functools
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketq.client.errors import RocketQError
from rocketq.client.launcher import (
    CONTROLLER_BOOT_RE,
    ServerProcess,
    free_port,
    spawn_controllers,
    spawn_namesrv,
)
from rocketq.client.remoting import controller as w
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.testing import wait_for
from rocketq.client.transport.blocking import BlockingRemotingClient

CLUSTER, GROUP = "DefaultCluster", "broker-a"
HEARTBEAT_TIMEOUT_MS = 2_000
TIMEOUT_MS = 8_000


@pytest.fixture
def controllers(tmp_path: Path) -> Iterator[list[ServerProcess]]:
    conf = {"scanNotActiveBrokerInterval": 500, "controllerHeartBeatTimeoutMills": HEARTBEAT_TIMEOUT_MS}
    procs = spawn_controllers(tmp_path, 3, controller_conf=conf)
    yield procs
    for proc in procs:
        proc.kill9()


@pytest.fixture
def client() -> Iterator[BlockingRemotingClient]:
    c = BlockingRemotingClient()
    yield c
    c.close()


def _call(
    c: BlockingRemotingClient, addr: str, code: int, ext: dict[str, str] | None = None, body: bytes = b""
) -> RemotingCommand:
    return c.invoke(addr, RemotingCommand.request(code, ext, body), TIMEOUT_MS)


def _metadata(c: BlockingRemotingClient, addr: str) -> w.ControllerMetadata:
    response = _call(c, addr, RequestCode.CONTROLLER_GET_METADATA_INFO)
    assert response.code == ResponseCode.SUCCESS, response
    return w.ControllerMetadata.from_json(response.body)


def _leader(c: BlockingRemotingClient, procs: list[ServerProcess], timeout_s: float = 30.0) -> ServerProcess:
    found: list[ServerProcess] = []

    def one_leader() -> bool:
        found.clear()
        for proc in procs:
            try:
                if _metadata(c, proc.addr).is_leader:
                    found.append(proc)
            except RocketQError:
                continue
        return len(found) == 1

    wait_for(one_leader, "exactly one controller leader", timeout_s)
    return found[0]


class FakeBroker:
    """A broker as the controller sees it: an id, an address, heartbeats on its own connections."""

    def __init__(self, broker_id: int, controllers: list[str]) -> None:
        self.broker_id = broker_id
        self.addr = f"127.0.0.1:{20900 + broker_id}"
        self.controllers = controllers
        self.client = BlockingRemotingClient()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True)

    def register(self, leader: str) -> RemotingCommand:
        apply = w.ApplyBrokerIdRequestHeader(
            cluster_name=CLUSTER,
            broker_name=GROUP,
            applied_broker_id=self.broker_id,
            register_check_code=w.register_check_code(self.addr, 1),
        )
        answer = _call(self.client, leader, RequestCode.CONTROLLER_APPLY_BROKER_ID, apply.to_ext_fields())
        assert answer.code == ResponseCode.SUCCESS, answer
        reg = w.RegisterBrokerToControllerRequestHeader(
            cluster_name=CLUSTER, broker_name=GROUP, broker_id=self.broker_id, broker_address=self.addr
        )
        return _call(self.client, leader, RequestCode.CONTROLLER_REGISTER_BROKER, reg.to_ext_fields())

    def heartbeat_once(self) -> None:
        hdr = w.BrokerHeartbeatRequestHeader(
            cluster_name=CLUSTER,
            broker_addr=self.addr,
            broker_name=GROUP,
            broker_id=self.broker_id,
            heartbeat_timeout_ms=HEARTBEAT_TIMEOUT_MS,
        )
        for addr in self.controllers:
            try:
                self.client.invoke(
                    addr, RemotingCommand.request(RequestCode.BROKER_HEARTBEAT, hdr.to_ext_fields()), 1000
                )
            except RocketQError:
                continue  # a controller that is down

    def _beat(self) -> None:
        while not self._stop.wait(0.3):
            self.heartbeat_once()

    def start(self) -> FakeBroker:
        self.heartbeat_once()
        self._thread.start()
        return self

    def crash(self) -> None:
        """Stop heartbeating and close every connection, as a SIGKILLed broker would."""
        self._stop.set()
        self._thread.join(5)
        self.client.close()


def _replica_info(
    c: BlockingRemotingClient, leader: str
) -> tuple[w.GetReplicaInfoResponseHeader, w.SyncStateSet]:
    answer = _call(c, leader, RequestCode.CONTROLLER_GET_REPLICA_INFO, {"brokerName": GROUP})
    assert answer.code == ResponseCode.SUCCESS, answer
    return w.GetReplicaInfoResponseHeader.from_ext_fields(answer.ext_fields), w.SyncStateSet.from_json(
        answer.body
    )


def _sees_master(c: BlockingRemotingClient, addr: str, master_broker_id: int) -> bool:
    group = _metadata(c, addr).groups.get(GROUP)
    return group is not None and group.master_broker_id == master_broker_id


def _sees_group(c: BlockingRemotingClient, addr: str, broker_name: str) -> bool:
    return broker_name in _metadata(c, addr).groups


def _apply_new_id(c: BlockingRemotingClient, addr: str, broker_id: int) -> RemotingCommand:
    hdr = w.ApplyBrokerIdRequestHeader(
        cluster_name=CLUSTER,
        broker_name="broker-b",
        applied_broker_id=broker_id,
        register_check_code=f"x;{broker_id}",
    )
    return _call(c, addr, RequestCode.CONTROLLER_APPLY_BROKER_ID, hdr.to_ext_fields())


def _restart(proc: ServerProcess, tmp_path: Path) -> ServerProcess:
    """Start the killed controller again from its controller.conf (same ports, same store)."""
    node_id = proc.name.removeprefix("controller-")
    conf = tmp_path / f"controller-{node_id}.conf"
    log_path = tmp_path / f"{proc.name}-restarted.log"
    log_file = open(log_path, "wb")
    popen = subprocess.Popen(
        [sys.executable, "-m", "rocketq.controller", "-c", str(conf)],
        stdout=log_file,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        cwd=str(tmp_path),
        start_new_session=True,
    )
    restarted = ServerProcess(proc.name, popen, log_path, log_file)
    wait_for(
        lambda: CONTROLLER_BOOT_RE.search(restarted.log_text()) is not None, f"{proc.name} to boot again"
    )
    restarted.host, restarted.port = proc.host, proc.port
    return restarted


def test_leader_state_quorum_and_catch_up(
    controllers: list[ServerProcess], client: BlockingRemotingClient, tmp_path: Path
) -> None:
    leader = _leader(client, controllers)
    addrs = [p.addr for p in controllers]
    follower = next(p for p in controllers if p is not leader)
    # a follower refuses and names the leader (once it heard from it: a new leader's first
    # heartbeat may still be on its way)
    refusals: list[RemotingCommand] = []

    def names_leader() -> bool:
        refusals.append(_apply_new_id(client, follower.addr, 1))
        return "controllerLeaderAddress" in refusals[-1].ext_fields

    wait_for(names_leader, "the follower to know the leader")
    assert all(r.code == ResponseCode.CONTROLLER_NOT_LEADER for r in refusals), refusals
    assert refusals[-1].ext_fields["controllerLeaderAddress"] == leader.addr
    # a registration through the leader is replicated to every controller
    broker = FakeBroker(1, addrs).start()
    try:
        assert broker.register(leader.addr).code == ResponseCode.SUCCESS
        elect = w.ElectMasterRequestHeader(cluster_name=CLUSTER, broker_name=GROUP, broker_id=1)
        answer = _call(client, leader.addr, RequestCode.CONTROLLER_ELECT_MASTER, elect.to_ext_fields())
        assert answer.code == ResponseCode.SUCCESS, answer
        for addr in addrs:
            wait_for(
                functools.partial(_sees_master, client, addr, 1), f"{addr} to hold the group and its master"
            )

        # the leader dies: another takes over with the state intact
        leader.kill9()
        survivors = [p for p in controllers if p is not leader]
        new_leader = _leader(client, survivors)
        header, sync_state = _replica_info(client, new_leader.addr)
        assert (header.master_broker_id, header.master_epoch) == (1, 1)
        assert sync_state.sync_state_set == frozenset({1})

        # 2 of 3 down: no leader, writes refused with a clear status
        other = next(p for p in survivors if p is not new_leader)
        other.kill9()
        wait_for(
            lambda: not _metadata(client, new_leader.addr).is_leader, "the lone controller to stop leading"
        )
        lonely = _apply_new_id(client, new_leader.addr, 1)
        assert lonely.code == ResponseCode.CONTROLLER_NOT_LEADER, lonely
        assert "no quorum" in (lonely.remark or "") or "not in leader state" in (lonely.remark or "")

        # a killed controller restarts, the quorum is back, and it catches up with new writes
        restarted = _restart(leader, tmp_path)
        controllers.append(restarted)
        back = _leader(client, [new_leader, restarted])
        assert _apply_new_id(client, back.addr, 1).code == ResponseCode.SUCCESS
        for proc in (new_leader, restarted):
            wait_for(
                functools.partial(_sees_group, client, proc.addr, "broker-b"), f"{proc.name} to see broker-b"
            )
        assert _metadata(client, restarted.addr).groups[GROUP].master_epoch == 1
    finally:
        broker.crash()


def test_master_heartbeat_loss_elects_from_sync_state_set(
    controllers: list[ServerProcess], client: BlockingRemotingClient
) -> None:
    leader = _leader(client, controllers)
    addrs = [p.addr for p in controllers]
    brokers = [FakeBroker(i, addrs).start() for i in (1, 2, 3)]
    try:
        for broker in brokers:
            broker.register(leader.addr)
        elect = w.ElectMasterRequestHeader(cluster_name=CLUSTER, broker_name=GROUP, broker_id=1)
        assert (
            _call(client, leader.addr, RequestCode.CONTROLLER_ELECT_MASTER, elect.to_ext_fields()).code == 0
        )
        # a stale SyncStateSet epoch is fenced; the right one adds broker 2 (3 stays out of sync)
        alter = w.AlterSyncStateSetRequestHeader(broker_name=GROUP, master_broker_id=1, master_epoch=1)
        stale = w.SyncStateSet(frozenset({1, 2}), 0).to_json()
        fenced = _call(
            client, leader.addr, RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET, alter.to_ext_fields(), stale
        )
        assert fenced.code == ResponseCode.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH
        body = w.SyncStateSet(frozenset({1, 2}), 1).to_json()
        altered = _call(
            client, leader.addr, RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET, alter.to_ext_fields(), body
        )
        assert altered.code == ResponseCode.SUCCESS, altered
        assert w.SyncStateSet.from_json(altered.body).sync_state_set_epoch == 2

        # the leader controller dies too, then the master: the new leader still elects broker 2
        leader.kill9()
        new_leader = _leader(client, [p for p in controllers if p is not leader])
        brokers[0].crash()

        def master_is_2() -> bool:
            return _replica_info(client, new_leader.addr)[0].master_broker_id == 2

        wait_for(master_is_2, "broker 2 to be elected", 40)
        header, sync_state = _replica_info(client, new_leader.addr)
        assert header.master_epoch == 2 and header.master_address == brokers[1].addr
        assert sync_state.sync_state_set == frozenset({2}) and sync_state.sync_state_set_epoch == 3
        # an alter from the deposed master under its old epoch is refused
        again = _call(
            client, new_leader.addr, RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET, alter.to_ext_fields(), body
        )
        assert again.code == ResponseCode.CONTROLLER_INVALID_MASTER
    finally:
        for broker in brokers:
            broker.crash()


def test_controller_embedded_in_namesrv(tmp_path: Path, client: BlockingRemotingClient) -> None:
    port, raft_port = free_port(), free_port()
    options = [
        "enableControllerInNamesrv=true",
        f"controllerDLegerPeers=n0-127.0.0.1:{port}:{raft_port}",
        "controllerDLegerSelfId=n0",
        f"controllerStorePath={tmp_path / 'controller-store'}",
    ]
    namesrv = spawn_namesrv(tmp_path, *(arg for option in options for arg in ("-o", option)))
    try:
        match = CONTROLLER_BOOT_RE.search(namesrv.log_text())
        assert match is not None and match.group(1) == f"127.0.0.1:{port}"
        assert namesrv.port != port  # the NameServer keeps its own port
        wait_for(lambda: _metadata(client, match.group(1)).is_leader, "the single controller to lead")
        answer = _apply_new_id(client, match.group(1), 1)
        assert answer.code == ResponseCode.SUCCESS, answer
        routes = _call(client, namesrv.addr, RequestCode.GET_BROKER_CLUSTER_INFO)
        assert routes.code == ResponseCode.SUCCESS
    finally:
        namesrv.kill9()


def test_bad_controller_config_is_refused(tmp_path: Path) -> None:
    conf = tmp_path / "controller.conf"
    conf.write_text(
        "controllerDLegerPeers=n0-127.0.0.1:notaport\ncontrollerDLegerSelfId=n0\n", encoding="utf-8"
    )
    done = subprocess.run(
        [sys.executable, "-m", "rocketq.controller", "-c", str(conf)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "notaport" in done.stderr
