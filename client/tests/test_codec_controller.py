"""Golden tests of the controller-mode wire vocabulary (codes, headers and JSON bodies).

The expected extFields and JSON texts are written by hand from RocketMQ 5's header and body
classes (field names) and ``RequestCode``/``ResponseCode`` (numbers); Java-side bodies use
fastjson's bare numeric map keys, which the reader must accept.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketq.client.errors import HeaderError, ProtocolError
from rocketq.client.remoting import controller as c
from rocketq.client.remoting.codes import RequestCode, ResponseCode


def test_request_code_numbers() -> None:
    expected = {
        "CONTROLLER_ALTER_SYNC_STATE_SET": 1001,
        "CONTROLLER_ELECT_MASTER": 1002,
        "CONTROLLER_REGISTER_BROKER": 1003,
        "CONTROLLER_GET_REPLICA_INFO": 1004,
        "CONTROLLER_GET_METADATA_INFO": 1005,
        "CONTROLLER_GET_SYNC_STATE_DATA": 1006,
        "GET_BROKER_EPOCH_CACHE": 1007,
        "NOTIFY_BROKER_ROLE_CHANGED": 1008,
        "UPDATE_CONTROLLER_CONFIG": 1009,
        "GET_CONTROLLER_CONFIG": 1010,
        "CLEAN_BROKER_DATA": 1011,
        "CONTROLLER_GET_NEXT_BROKER_ID": 1012,
        "CONTROLLER_APPLY_BROKER_ID": 1013,
        "BROKER_CLOSE_CHANNEL_REQUEST": 1014,
        "CHECK_NOT_ACTIVE_BROKER_REQUEST": 1015,
        "GET_BROKER_LIVE_INFO_REQUEST": 1016,
        "GET_SYNC_STATE_DATA_REQUEST": 1017,
        "RAFT_BROKER_HEART_BEAT_EVENT_REQUEST": 1018,
        "BROKER_HEARTBEAT": 904,
    }
    assert {name: RequestCode[name].value for name in expected} == expected


def test_response_code_numbers() -> None:
    names = [
        "CONTROLLER_FENCED_MASTER_EPOCH",
        "CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH",
        "CONTROLLER_INVALID_MASTER",
        "CONTROLLER_INVALID_REPLICAS",
        "CONTROLLER_MASTER_NOT_AVAILABLE",
        "CONTROLLER_INVALID_REQUEST",
        "CONTROLLER_BROKER_NOT_ALIVE",
        "CONTROLLER_NOT_LEADER",
        "CONTROLLER_BROKER_METADATA_NOT_EXIST",
        "CONTROLLER_INVALID_CLEAN_BROKER_METADATA",
        "CONTROLLER_BROKER_NEED_TO_BE_REGISTERED",
        "CONTROLLER_MASTER_STILL_EXIST",
        "CONTROLLER_ELECT_MASTER_FAILED",
        "CONTROLLER_ALTER_SYNC_STATE_SET_FAILED",
        "CONTROLLER_BROKER_ID_INVALID",
        "CONTROLLER_JRAFT_INTERNAL_ERROR",
        "CONTROLLER_BROKER_LIVE_INFO_NOT_EXISTS",
    ]
    assert [ResponseCode[n].value for n in names] == list(range(2000, 2017))


def test_heartbeat_header_wire_names() -> None:
    header = c.BrokerHeartbeatRequestHeader(
        cluster_name="DefaultCluster",
        broker_addr="127.0.0.1:10911",
        broker_name="broker-a",
        broker_id=2,
        epoch=3,
        max_offset=4096,
        confirm_offset=4000,
        heartbeat_timeout_ms=10000,
        election_priority=0,
    )
    ext = header.to_ext_fields()
    assert ext == {
        "clusterName": "DefaultCluster",
        "brokerAddr": "127.0.0.1:10911",
        "brokerName": "broker-a",
        "brokerId": "2",
        "epoch": "3",
        "maxOffset": "4096",
        "confirmOffset": "4000",
        "heartbeatTimeoutMills": "10000",
        "electionPriority": "0",
    }
    assert c.BrokerHeartbeatRequestHeader.from_ext_fields(ext) == header
    minimal = {"clusterName": "c", "brokerAddr": "a:1", "brokerName": "b"}
    assert c.BrokerHeartbeatRequestHeader.from_ext_fields(minimal).broker_id is None


def test_heartbeat_header_requires_cluster() -> None:
    with pytest.raises(HeaderError, match="clusterName"):
        c.BrokerHeartbeatRequestHeader.from_ext_fields({"brokerAddr": "a:1", "brokerName": "b"})


def test_elect_master_header_defaults_as_java() -> None:
    assert c.ElectMasterRequestHeader(broker_name="broker-a").to_ext_fields() == {
        "clusterName": "",
        "brokerName": "broker-a",
        "brokerId": "-1",
        "designateElect": "false",
    }
    admin = c.ElectMasterRequestHeader.from_ext_fields(
        {"clusterName": "c", "brokerName": "b", "brokerId": "2", "designateElect": "true", "invokeTime": "1"}
    )
    assert (admin.broker_id, admin.designate_elect, admin.invoke_time) == (2, True, 1)


def test_alter_sync_state_set_header() -> None:
    header = c.AlterSyncStateSetRequestHeader(broker_name="b", master_broker_id=1, master_epoch=2)
    assert header.to_ext_fields() == {"brokerName": "b", "masterBrokerId": "1", "masterEpoch": "2"}
    assert c.AlterSyncStateSetResponseHeader(new_sync_state_set_epoch=5).to_ext_fields() == {
        "newSyncStateSetEpoch": "5"
    }


def test_register_and_apply_headers() -> None:
    reg = c.RegisterBrokerToControllerRequestHeader(
        cluster_name="c", broker_name="b", broker_id=1, broker_address="127.0.0.1:10911"
    )
    assert reg.to_ext_fields() == {
        "clusterName": "c",
        "brokerName": "b",
        "brokerId": "1",
        "brokerAddress": "127.0.0.1:10911",
    }
    apply = c.ApplyBrokerIdRequestHeader(
        cluster_name="c",
        broker_name="b",
        applied_broker_id=1,
        register_check_code=c.register_check_code("127.0.0.1:10911", 1700000000000),
    )
    assert apply.to_ext_fields()["registerCheckCode"] == "127.0.0.1:10911;1700000000000"
    assert apply.to_ext_fields()["appliedBrokerId"] == "1"
    resp = c.GetNextBrokerIdResponseHeader.from_ext_fields({"clusterName": "c", "nextBrokerId": "3"})
    assert resp.next_broker_id == 3 and resp.broker_name is None


def test_metadata_header_and_notify_header() -> None:
    meta = c.GetMetaDataResponseHeader(
        group="g",
        controller_leader_id="n1",
        controller_leader_address="127.0.0.1:9878",
        is_leader=True,
        peers="p",
    )
    assert meta.to_ext_fields() == {
        "group": "g",
        "controllerLeaderId": "n1",
        "controllerLeaderAddress": "127.0.0.1:9878",
        "isLeader": "true",
        "peers": "p",
    }
    notify = c.NotifyBrokerRoleChangedRequestHeader(
        master_address="a:1", master_epoch=2, sync_state_set_epoch=3, master_broker_id=1
    )
    assert notify.to_ext_fields() == {
        "masterAddress": "a:1",
        "masterEpoch": "2",
        "syncStateSetEpoch": "3",
        "masterBrokerId": "1",
    }


def test_clean_broker_data_ids() -> None:
    header = c.CleanControllerBrokerDataRequestHeader.from_ext_fields(
        {"brokerName": "b", "brokerControllerIdsToClean": "1;3", "isCleanLivingBroker": "true"}
    )
    assert header.broker_ids() == frozenset({1, 3}) and header.is_clean_living_broker
    assert c.CleanControllerBrokerDataRequestHeader(broker_name="b").broker_ids() == frozenset()
    with pytest.raises(ProtocolError, match="brokerControllerIdsToClean"):
        c.CleanControllerBrokerDataRequestHeader(
            broker_name="b", broker_controller_ids_to_clean="1;x"
        ).broker_ids()


def test_sync_state_set_golden() -> None:
    body = c.SyncStateSet(frozenset({2, 1}), 3)
    assert body.to_json() == b'{"syncStateSet":[1,2],"syncStateSetEpoch":3}'
    assert c.SyncStateSet.from_json(b'{"syncStateSet":[2,1],"syncStateSetEpoch":3}') == body


def test_elect_master_body_reads_fastjson_keys() -> None:
    java = (
        b'{"brokerMemberGroup":{"brokerAddrs":{1:"127.0.0.1:10911",2:"127.0.0.1:10921"},'
        b'"brokerName":"broker-a","cluster":"DefaultCluster"},"syncStateSet":[2]}'
    )
    body = c.ElectMasterResponseBody.from_json(java)
    assert body.broker_member_group == c.BrokerMemberGroup(
        "DefaultCluster", "broker-a", {1: "127.0.0.1:10911", 2: "127.0.0.1:10921"}
    )
    assert body.sync_state_set == frozenset({2})
    assert body.to_json() == (
        b'{"brokerMemberGroup":{"brokerAddrs":{"1":"127.0.0.1:10911","2":"127.0.0.1:10921"},'
        b'"brokerName":"broker-a","cluster":"DefaultCluster"},"syncStateSet":[2]}'
    )
    assert c.ElectMasterResponseBody.from_json(body.to_json()) == body


def test_epoch_cache_golden() -> None:
    cache = c.EpochEntryCache(
        cluster_name="c",
        broker_name="b",
        broker_id=1,
        epoch_list=(c.EpochEntry(1, 0, 4096), c.EpochEntry(2, 4096)),
        max_offset=8192,
    )
    assert cache.to_json() == (
        b'{"brokerId":1,"brokerName":"b","clusterName":"c","epochList":['
        b'{"endOffset":4096,"epoch":1,"startOffset":0},'
        b'{"endOffset":9223372036854775807,"epoch":2,"startOffset":4096}],"maxOffset":8192}'
    )
    assert c.EpochEntryCache.from_json(cache.to_json()) == cache
    assert c.EpochEntry.from_obj({"epoch": 1, "startOffset": 5}).end_offset == c.INFINITE_END_OFFSET


def test_replicas_info_round_trip() -> None:
    a1 = c.ReplicaIdentity("broker-a", 1, "127.0.0.1:10911", True)
    a2 = c.ReplicaIdentity("broker-a", 2, "127.0.0.1:10921", False)
    info = c.BrokerReplicasInfo({"broker-a": c.ReplicasInfo(1, "127.0.0.1:10911", 2, 3, (a1,), (a2,))})
    text = info.to_json()
    assert text.startswith(b'{"replicasInfoTable":{"broker-a":{"inSyncReplicas":[{"alive":true,')
    assert c.BrokerReplicasInfo.from_json(text) == info
    assert c.broker_names_from_json(c.broker_names_to_json(["a", "b"])) == ("a", "b")


def test_controller_metadata_round_trip() -> None:
    meta = c.ControllerMetadata(
        group="g",
        controller_leader_id="n0",
        controller_leader_address="127.0.0.1:9878",
        is_leader=False,
        peers="n0-127.0.0.1:9878",
        raft_state="follower",
        commit_index=7,
        last_applied=7,
        has_quorum=True,
        groups={"b": c.ReplicasInfo(None, None, 0, 0, (), ())},
    )
    assert c.ControllerMetadata.from_json(meta.to_json()) == meta
    assert meta.header().controller_leader_address == "127.0.0.1:9878"


@pytest.mark.parametrize(
    ("parse", "body"),
    [
        (c.SyncStateSet.from_json, b"[1,2]"),
        (c.SyncStateSet.from_json, b'{"syncStateSet":["x"]}'),
        (c.SyncStateSet.from_json, b"{not json"),
        (c.ElectMasterResponseBody.from_json, b'{"brokerMemberGroup":{"brokerAddrs":{"x":"a"}}}'),
        (c.EpochEntryCache.from_json, b'{"epochList":{}}'),
        (c.EpochEntryCache.from_json, b'{"maxOffset":"big"}'),
        (c.BrokerReplicasInfo.from_json, b'{"replicasInfoTable":[]}'),
        (c.broker_names_from_json, b'{"a":1}'),
    ],
)
def test_malformed_bodies_raise_protocol_error(parse: object, body: bytes) -> None:
    assert callable(parse)
    with pytest.raises(ProtocolError):
        parse(body)


@given(ids=st.frozensets(st.integers(0, 1 << 40)), epoch=st.integers(0, (1 << 31) - 1))
def test_sync_state_set_round_trip(ids: frozenset[int], epoch: int) -> None:
    body = c.SyncStateSet(ids, epoch)
    assert c.SyncStateSet.from_json(body.to_json()) == body
