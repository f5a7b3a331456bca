"""Unit tests of the controller's replicated state: registration, election rules, fencing, cleaning.

The table is exercised without Raft: plans are made with explicit liveness, events applied in
order, as every controller would apply them from the log.  Also covers the heartbeat manager's
liveness rules (injected clock) and the controller.conf loader.
"""

from __future__ import annotations

import pickle

import pytest

from rocketq.client.remoting.codes import ResponseCode
from rocketq.client.remoting.controller import BrokerHeartbeatRequestHeader
from rocketq.controller.config import ControllerConfig, config_from_properties, parse_peers
from rocketq.controller.errors import ControllerConfigError
from rocketq.controller.heartbeat import BrokerHeartbeatManager
from rocketq.controller.state import (
    AlterSyncStateSetEvent,
    ApplyBrokerIdEvent,
    CandidateInfo,
    CleanBrokerDataEvent,
    ElectMasterEvent,
    ReplicaTable,
    choose_master,
)

B = "broker-a"


def _table(replicas: int = 3) -> ReplicaTable:
    table = ReplicaTable()
    for broker_id in range(1, replicas + 1):
        event = ApplyBrokerIdEvent("c", B, broker_id, f"127.0.0.1:{10900 + broker_id}", f"code{broker_id}")
        assert table.plan_apply_broker_id(event).ok
        assert table.apply(event).ok
    return table


def _elect(table: ReplicaTable, alive: set[int], broker_id: int | None = None, **kw: bool) -> ResponseCode:
    outcome, event = table.plan_election(
        B,
        broker_id=broker_id,
        designate=kw.get("designate", False),
        alive=lambda b: b in alive,
        live_info=lambda b: None,
        unclean=kw.get("unclean", False),
    )
    if event is not None:
        applied = table.apply(event)
        if not applied.ok:
            return applied.code
    return outcome.code


def _with_master_and_set(members: frozenset[int]) -> ReplicaTable:
    table = _table()
    assert _elect(table, {1, 2, 3}, broker_id=1) == ResponseCode.SUCCESS
    group = table.group(B)
    assert group is not None
    if members == group.sync_state_set:
        return table
    event = AlterSyncStateSetEvent(B, 1, group.master_epoch, group.sync_state_set_epoch, members)
    assert table.plan_alter_sync_state_set(event, lambda b: True).ok
    assert table.apply(event).ok
    return table


def test_broker_ids_are_handed_out_from_one() -> None:
    table = ReplicaTable()
    assert table.next_broker_id(B) == 1
    refused = ApplyBrokerIdEvent("c", B, 2, "a:1", "x")
    assert table.apply(refused).code == ResponseCode.CONTROLLER_BROKER_ID_INVALID
    table = _table(2)
    assert table.next_broker_id(B) == 3
    # the same check code may re-apply its id (a restart); another broker may not take it
    assert table.apply(ApplyBrokerIdEvent("c", B, 2, "127.0.0.1:10902", "code2")).ok
    taken = table.apply(ApplyBrokerIdEvent("c", B, 2, "127.0.0.1:9999", "other"))
    assert taken.code == ResponseCode.CONTROLLER_BROKER_ID_INVALID


def test_first_election_takes_the_asking_broker() -> None:
    table = _table()
    assert _elect(table, {2}, broker_id=2) == ResponseCode.SUCCESS
    group = table.group(B)
    assert group is not None
    assert (group.master_broker_id, group.master_epoch) == (2, 1)
    assert (group.sync_state_set, group.sync_state_set_epoch) == (frozenset({2}), 1)
    assert _elect(table, {1, 2}, broker_id=1) == ResponseCode.CONTROLLER_MASTER_STILL_EXIST


def test_inactive_master_is_replaced_from_the_sync_state_set_only() -> None:
    table = _with_master_and_set(frozenset({1, 2}))
    assert _elect(table, {2, 3}) == ResponseCode.SUCCESS
    group = table.group(B)
    assert group is not None
    assert (group.master_broker_id, group.master_epoch, group.sync_state_set) == (2, 2, frozenset({2}))
    # broker 3 was never in sync: with 2 dead, nobody takes over and the master is cleared
    assert _elect(table, {3}) == ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE
    assert group.master_broker_id is None and group.master_epoch == 3
    assert group.sync_state_set == frozenset({2})
    # no master, still nobody: no further event, the epoch stays
    assert _elect(table, {3}) == ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE
    assert group.master_epoch == 3
    # the in-sync replica comes back and is elected under a new epoch
    assert _elect(table, {2, 3}) == ResponseCode.SUCCESS
    back = table.group(B)
    assert back is not None and (back.master_broker_id, back.master_epoch) == (2, 4)


def test_unclean_election_only_when_enabled() -> None:
    table = _with_master_and_set(frozenset({1}))
    assert _elect(table, {3}) == ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE
    assert _elect(table, {3}, unclean=True) == ResponseCode.SUCCESS
    group = table.group(B)
    assert group is not None and group.master_broker_id == 3


def test_designated_election_needs_an_alive_in_sync_broker() -> None:
    table = _with_master_and_set(frozenset({1, 2}))
    assert (
        _elect(table, {1, 2, 3}, broker_id=3, designate=True) == ResponseCode.CONTROLLER_ELECT_MASTER_FAILED
    )
    assert _elect(table, {1, 3}, broker_id=2, designate=True) == ResponseCode.CONTROLLER_ELECT_MASTER_FAILED
    assert _elect(table, {1, 2, 3}, broker_id=2, designate=True) == ResponseCode.SUCCESS
    group = table.group(B)
    assert group is not None and group.master_broker_id == 2


def test_policy_ranks_epoch_then_offset_then_priority() -> None:
    infos = {
        1: CandidateInfo(1, epoch=3, max_offset=100),
        2: CandidateInfo(2, epoch=4, max_offset=50),
        3: CandidateInfo(3, epoch=4, max_offset=80, election_priority=5),
        4: CandidateInfo(4, epoch=4, max_offset=80, election_priority=1),
    }
    pick = choose_master(infos, alive=lambda b: True, live_info=infos.get, old_master=None, preferred=None)
    assert pick == 4
    pick = choose_master(infos, alive=lambda b: b != 4, live_info=infos.get, old_master=None, preferred=None)
    assert pick == 3
    assert choose_master({1, 2}, alive=lambda b: True, live_info=infos.get, old_master=1, preferred=None) == 1


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"master_epoch": 0}, ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH),
        ({"sync_state_set_epoch": 1}, ResponseCode.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH),
        ({"master_broker_id": 2}, ResponseCode.CONTROLLER_INVALID_MASTER),
        ({"new_sync_state_set": frozenset({1, 9})}, ResponseCode.CONTROLLER_INVALID_REPLICAS),
        ({"new_sync_state_set": frozenset({2, 3})}, ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED),
        ({"new_sync_state_set": frozenset({1, 2})}, ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED),
    ],
)
def test_alter_sync_state_set_is_fenced(change: dict[str, object], code: ResponseCode) -> None:
    table = _with_master_and_set(frozenset({1, 2}))  # master 1, master epoch 1, set epoch 2
    fields: dict[str, object] = {
        "broker_name": B,
        "master_broker_id": 1,
        "master_epoch": 1,
        "sync_state_set_epoch": 2,
        "new_sync_state_set": frozenset({1, 2, 3}),
    }
    fields.update(change)
    event = AlterSyncStateSetEvent(**fields)  # type: ignore[arg-type]
    assert table.apply(event).code == code
    group = table.group(B)
    assert group is not None and group.sync_state_set == frozenset({1, 2})


def test_alter_refuses_dead_members_when_planned() -> None:
    table = _with_master_and_set(frozenset({1, 2}))
    event = AlterSyncStateSetEvent(B, 1, 1, 2, frozenset({1, 2, 3}))
    outcome = table.plan_alter_sync_state_set(event, lambda b: b != 3)
    assert outcome.code == ResponseCode.CONTROLLER_BROKER_NOT_ALIVE
    assert table.plan_alter_sync_state_set(event, lambda b: True).new_epoch == 3


def test_a_stale_plan_is_refused_when_applied() -> None:
    table = _with_master_and_set(frozenset({1, 2}))
    _, first = table.plan_election(
        B, broker_id=None, designate=False, alive=lambda b: b == 2, live_info=lambda b: None, unclean=False
    )
    _, second = table.plan_election(
        B, broker_id=None, designate=False, alive=lambda b: b == 2, live_info=lambda b: None, unclean=False
    )
    assert first is not None and second is not None
    assert table.apply(first).ok
    assert table.apply(second).code == ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH
    group = table.group(B)
    assert group is not None and group.master_epoch == 2


def test_clean_broker_data() -> None:
    table = _with_master_and_set(frozenset({1, 2}))
    outcome, event = table.plan_clean(B, frozenset(), clean_living=False, alive=lambda b: False)
    assert outcome.code == ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA and event is None
    outcome, event = table.plan_clean(B, frozenset({3}), clean_living=False, alive=lambda b: b == 3)
    assert outcome.code == ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA
    outcome, event = table.plan_clean(B, frozenset({2}), clean_living=False, alive=lambda b: False)
    assert event is not None and table.apply(event).ok
    group = table.group(B)
    assert group is not None and 2 not in group.broker_addrs and group.sync_state_set == frozenset({1})
    assert table.apply(CleanBrokerDataEvent(B, frozenset())).ok
    assert table.group(B) is None


def test_table_and_events_survive_pickle() -> None:
    table = _with_master_and_set(frozenset({1, 2}))
    copy = pickle.loads(pickle.dumps(table))
    assert copy.groups == table.groups
    event = ElectMasterEvent(B, 2, 1, 2)
    assert pickle.loads(pickle.dumps(event)) == event


def test_heartbeat_liveness() -> None:
    now = [1_000]
    manager = BrokerHeartbeatManager(10_000, clock_ms=lambda: now[0])
    channel = object()
    hdr = BrokerHeartbeatRequestHeader(
        cluster_name="c", broker_addr="a:1", broker_name=B, broker_id=1, heartbeat_timeout_ms=3_000, epoch=2
    )
    manager.on_heartbeat(hdr, channel)
    assert manager.is_active("c", B, 1) and not manager.is_active("c", B, 2)
    now[0] += 3_001
    assert not manager.is_active("c", B, 1)
    assert [i.identity.broker_id for i in manager.scan()] == [1]
    manager.on_heartbeat(hdr, channel)
    assert [i.broker_addr for i in manager.on_channel_close(channel)] == ["a:1"]
    assert not manager.is_active("c", B, 1)
    assert not manager.knows_enough()
    now[0] += 10_000
    assert manager.knows_enough()


def test_config_loader() -> None:
    props = {
        "controllerDLegerGroup": "g1",
        "controllerDLegerPeers": "n0-127.0.0.1:9878;n1-127.0.0.1:9868:19000",
        "controllerDLegerSelfId": "n1",
        "enableElectUncleanMaster": "true",
        "scanNotActiveBrokerInterval": "1000",
        "mappedFileSize": "1",
        "bogus": "x",
    }
    config, unknown = config_from_properties(props)
    assert unknown == ["bogus"]
    assert config.self_peer.raft_port == 19000 and config.other_peers[0].raft_port == 19878
    assert config.enable_elect_unclean_master and config.scan_not_active_broker_interval_ms == 1000
    with pytest.raises(ControllerConfigError, match="n7"):
        ControllerConfig(controller_dleger_peers=parse_peers("n0-h:1"), controller_dleger_self_id="n7")
    for bad in ("n0-h", "n0-h:x", "h:1", "n0-h:1;n0-h:2", "n0-h:70000"):
        with pytest.raises(ControllerConfigError):
            parse_peers(bad)
