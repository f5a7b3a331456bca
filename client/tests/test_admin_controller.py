"""mqadmin's controller subcommands and the controller admin API against controller doubles: a
follower that redirects (CONTROLLER_NOT_LEADER with the leader's address) and a leader with canned
answers, plus a broker double answering GET_BROKER_EPOCH_CACHE.  The doubles run on their own
event loop in a thread, so ``mqadmin``'s ``main`` runs as it does from the shell.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest

from rocketq.client.admin_controller import parse_controller_addrs
from rocketq.client.cli.mqadmin import main
from rocketq.client.errors import MQClientError
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.controller import (
    BrokerMemberGroup,
    BrokerReplicasInfo,
    ControllerMetadata,
    ElectMasterRequestHeader,
    ElectMasterResponseBody,
    ElectMasterResponseHeader,
    EpochEntry,
    EpochEntryCache,
    ReplicaIdentity,
    ReplicasInfo,
    broker_names_from_json,
)
from rocketq.client.transport.aio import Channel
from rocketq.server import RemotingServer

A1, A2 = "127.0.0.1:30911", "127.0.0.1:30921"


class Doubles:
    """A follower controller, a leader controller and a broker, on a loop in a thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.follower, self.leader, self.broker = RemotingServer(), RemotingServer(), RemotingServer()
        self.addrs: dict[str, str] = {}
        self.leader_requests: list[RemotingCommand] = []
        self.follower_requests: list[RemotingCommand] = []
        self.elect_code: int = ResponseCode.SUCCESS

    def start(self) -> None:
        self.thread.start()
        for code in (
            RequestCode.CONTROLLER_GET_METADATA_INFO,
            RequestCode.CONTROLLER_GET_SYNC_STATE_DATA,
            RequestCode.CONTROLLER_ELECT_MASTER,
            RequestCode.CLEAN_BROKER_DATA,
        ):
            self.follower.register(code, self._follower)
            self.leader.register(code, self._leader)
        self.broker.register(RequestCode.GET_BROKER_EPOCH_CACHE, self._epoch)
        for name, server in (("follower", self.follower), ("leader", self.leader), ("broker", self.broker)):
            host, port = asyncio.run_coroutine_threadsafe(server.start(), self.loop).result(10)
            self.addrs[name] = f"{host}:{port}"

    def stop(self) -> None:
        for server in (self.follower, self.leader, self.broker):
            asyncio.run_coroutine_threadsafe(server.stop(0), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)

    def metadata(self, *, leader: bool) -> ControllerMetadata:
        return ControllerMetadata(
            group="DefaultControllerGroup",
            controller_leader_id="n1",
            controller_leader_address=self.addrs["leader"],
            is_leader=leader,
            peers="n0-127.0.0.1:9880;n1-127.0.0.1:9881;n2-127.0.0.1:9882",
            raft_state="leader" if leader else "follower",
            has_quorum=True,
        )

    async def _follower(self, cmd: RemotingCommand, channel: Channel) -> RemotingCommand:
        self.follower_requests.append(cmd)
        meta = self.metadata(leader=False)
        if cmd.code == RequestCode.CONTROLLER_GET_METADATA_INFO:
            return cmd.make_response(
                ResponseCode.SUCCESS, None, meta.header().to_ext_fields(), meta.to_json()
            )
        ext = meta.header().to_ext_fields()
        return cmd.make_response(ResponseCode.CONTROLLER_NOT_LEADER, "not the leader", ext)

    async def _leader(self, cmd: RemotingCommand, channel: Channel) -> RemotingCommand:
        self.leader_requests.append(cmd)
        if cmd.code == RequestCode.CONTROLLER_GET_METADATA_INFO:
            ext = self.metadata(leader=True).header().to_ext_fields()
            return cmd.make_response(ResponseCode.SUCCESS, None, ext)  # Java: the header only
        if cmd.code == RequestCode.CONTROLLER_GET_SYNC_STATE_DATA:
            names = broker_names_from_json(cmd.body)
            table = {name: _replicas(name) for name in names}
            return cmd.make_response(ResponseCode.SUCCESS, body=BrokerReplicasInfo(table).to_json())
        if cmd.code == RequestCode.CONTROLLER_ELECT_MASTER:
            if self.elect_code != ResponseCode.SUCCESS:
                return cmd.make_response(self.elect_code, "broker 3 is not in the SyncStateSet")
            req = ElectMasterRequestHeader.from_ext_fields(cmd.ext_fields)
            addr = A1 if req.broker_id == 1 else A2
            header = ElectMasterResponseHeader(
                master_broker_id=req.broker_id, master_address=addr, master_epoch=3, sync_state_set_epoch=4
            )
            body = ElectMasterResponseBody(
                BrokerMemberGroup("DefaultCluster", req.broker_name, {1: A1, 2: A2}),
                frozenset({req.broker_id}),
            )
            return cmd.make_response(ResponseCode.SUCCESS, None, header.to_ext_fields(), body.to_json())
        return cmd.make_response(ResponseCode.SUCCESS)

    async def _epoch(self, cmd: RemotingCommand, channel: Channel) -> RemotingCommand:
        cache = EpochEntryCache(
            "DefaultCluster", "broker-a", 2, (EpochEntry(1, 0, 4096), EpochEntry(2, 4096)), 8192
        )
        return cmd.make_response(ResponseCode.SUCCESS, body=cache.to_json())


def _replicas(name: str) -> ReplicasInfo:
    return ReplicasInfo(
        master_broker_id=1,
        master_address=A1,
        master_epoch=2,
        sync_state_set_epoch=5,
        in_sync_replicas=(ReplicaIdentity(name, 1, A1, True), ReplicaIdentity(name, 2, A2, True)),
        not_in_sync_replicas=(ReplicaIdentity(name, 3, "127.0.0.1:30931", False),),
    )


@pytest.fixture
def doubles() -> Iterator[Doubles]:
    d = Doubles()
    d.start()
    try:
        yield d
    finally:
        d.stop()


def test_get_controller_metadata_prints_java_lines(
    doubles: Doubles, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["getControllerMetaData", "-a", doubles.addrs["leader"]]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:3] == [
        "#ControllerGroup\tDefaultControllerGroup",
        "#ControllerLeaderId\tn1",
        f"#ControllerLeaderAddress\t{doubles.addrs['leader']}",
    ]
    assert "#Peer:\tn2-127.0.0.1:9882" in out and "#IsLeader\ttrue" in out


def test_get_sync_state_set_follows_the_leader(doubles: Doubles, capsys: pytest.CaptureFixture[str]) -> None:
    controllers = f"{doubles.addrs['follower']};{doubles.addrs['leader']}"
    assert main(["getSyncStateSet", "-a", doubles.addrs["follower"], "-b", "broker-a"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:7] == [
        "#brokerName\tbroker-a",
        "#MasterBrokerId\t1",
        f"#MasterAddr\t{A1}",
        "#MasterEpoch\t2",
        "#SyncStateSetEpoch\t5",
        "#SyncStateSetNums\t2",
        "#InSyncReplicas:",
    ]
    assert "#Broker\t3\t127.0.0.1:30931\t#Alive\tfalse" in out
    assert len(doubles.follower_requests) == 1 and len(doubles.leader_requests) == 1
    assert main(["getSyncStateSet", "-a", controllers, "-b", "broker-a"]) == 0


def test_elect_master_and_its_refusal(doubles: Doubles, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "electMaster",
        "-a",
        doubles.addrs["follower"],
        "-c",
        "DefaultCluster",
        "-bn",
        "broker-a",
        "-b",
        "2",
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "#ClusterName\tDefaultCluster",
        "#BrokerName\tbroker-a",
        f"#BrokerMasterAddr\t{A2}",
        "#MasterEpoch\t3",
        "#SyncStateSetEpoch\t4",
        f"\t#Broker\t1\t{A1}",
        f"\t#Broker\t2\t{A2}",
    ]
    req = ElectMasterRequestHeader.from_ext_fields(doubles.leader_requests[-1].ext_fields)
    assert req.designate_elect and req.broker_id == 2 and req.cluster_name == "DefaultCluster"
    doubles.elect_code = ResponseCode.CONTROLLER_ELECT_MASTER_FAILED
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert f"CODE: {int(ResponseCode.CONTROLLER_ELECT_MASTER_FAILED)}" in err and "SyncStateSet" in err


def test_clean_broker_metadata_sends_the_id_list(
    doubles: Doubles, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["cleanBrokerMetadata", "-a", doubles.addrs["leader"], "-bn", "broker-a", "-b", "3;2", "-c", "c1"]
    assert main(argv) == 0
    ext = doubles.leader_requests[-1].ext_fields
    assert ext["brokerControllerIdsToClean"] == "2;3" and ext["brokerName"] == "broker-a"
    assert "success" in capsys.readouterr().out


def test_get_broker_epoch_of_one_broker(doubles: Doubles, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["getBrokerEpoch", "-b", doubles.addrs["broker"]]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "#brokerId\t2" in out
    assert "#Epoch: EpochEntry{epoch=1, startOffset=0, endOffset=4096}" in out
    assert "#Epoch: EpochEntry{epoch=2, startOffset=4096, endOffset=MAX}" in out


def test_usage_errors_name_what_is_missing(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["getSyncStateSet", "-a", "127.0.0.1:1"])
    assert "-b brokerName or -c clusterName" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["getBrokerEpoch", "-c", "DefaultCluster"])
    assert "-n host:port" in capsys.readouterr().err
    with pytest.raises(MQClientError):
        parse_controller_addrs("nohostport")


def test_unreachable_controllers_are_reported(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["getSyncStateSet", "-a", "127.0.0.1:1", "-b", "broker-a"]) == 1
    assert "getSyncStateSet failed" in capsys.readouterr().err


def test_metadata_header_only_answer_builds_the_result(doubles: Doubles) -> None:
    from rocketq.client.admin import AsyncAdmin
    from rocketq.client.admin_controller import AsyncControllerAdmin

    async def scenario() -> ControllerMetadata:
        admin = AsyncAdmin(doubles.addrs["leader"])
        try:
            return await AsyncControllerAdmin(admin.api).get_controller_metadata(doubles.addrs["leader"])
        finally:
            await admin.close()

    meta = asyncio.run(scenario())
    assert meta.is_leader and meta.controller_leader_id == "n1" and meta.peers.count(";") == 2
