"""Unit tests of the route registry (no sockets, fake clock)."""

from __future__ import annotations

from collections.abc import Hashable
from pathlib import Path

from rocketq.namesrv.kvconfig import KvConfigManager
from rocketq.namesrv.routeinfo import QueueConf, RegisterResult, RouteInfoManager


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


Q4 = QueueConf(4, 4, 6, 0)


def register(
    rim: RouteInfoManager,
    name: str = "broker-a",
    bid: int = 0,
    addr: str = "10.0.0.1:10911",
    topics: dict[str, QueueConf] | None = None,
    version: tuple[int, int, int] = (1, 1, 0),
    channel: Hashable | None = None,
    cluster: str = "DefaultCluster",
) -> RegisterResult:
    return rim.register_broker(
        cluster_name=cluster,
        broker_addr=addr,
        broker_name=name,
        broker_id=bid,
        ha_server_addr=addr.replace("10911", "10912"),
        topic_queues=topics if topics is not None else {"T": Q4},
        data_version=version,
        channel=channel,
    )


def test_register_and_pick_route() -> None:
    rim = RouteInfoManager(clock_ms=Clock())
    res = register(rim)
    assert res.first_registration
    route = rim.pick_topic_route("T")
    assert route is not None
    assert route.queue_datas == {"broker-a": Q4}
    assert [(b.cluster, b.broker_name, b.broker_addrs) for b in route.broker_datas] == [
        ("DefaultCluster", "broker-a", {0: "10.0.0.1:10911"})
    ]
    assert rim.pick_topic_route("nope") is None
    assert rim.all_topics() == ["T"]
    info = rim.cluster_info()
    assert info.cluster_addr_table == {"DefaultCluster": ["broker-a"]}
    assert info.broker_addr_table["broker-a"].broker_addrs == {0: "10.0.0.1:10911"}


def test_slave_listed_under_id_and_gets_master_addresses() -> None:
    rim = RouteInfoManager(clock_ms=Clock())
    register(rim)
    res = register(rim, bid=1, addr="10.0.0.2:10911", topics={"OTHER": Q4})
    assert res.master_addr == "10.0.0.1:10911"
    assert res.ha_server_addr == "10.0.0.1:10912"
    route = rim.pick_topic_route("T")
    assert route is not None
    assert route.broker_datas[0].broker_addrs == {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}
    # queue data comes from the master only
    assert rim.pick_topic_route("OTHER") is None


def test_queue_data_only_updated_when_data_version_changes() -> None:
    rim = RouteInfoManager(clock_ms=Clock())
    register(rim, topics={"T": Q4}, version=(1, 1, 0))
    register(rim, topics={"T": QueueConf(8, 8, 6)}, version=(1, 1, 0))
    route = rim.pick_topic_route("T")
    assert route is not None and route.queue_datas["broker-a"] == Q4
    register(rim, topics={"T": QueueConf(8, 8, 6)}, version=(1, 2, 0))
    route = rim.pick_topic_route("T")
    assert route is not None and route.queue_datas["broker-a"].read_queue_nums == 8


def test_expiry_removes_silent_brokers_only() -> None:
    clock = Clock()
    rim = RouteInfoManager(clock_ms=clock)
    register(rim, name="a", addr="h:1", topics={"T": Q4}, channel="ch-a")
    register(rim, name="b", addr="h:2", topics={"T": Q4, "U": Q4}, channel="ch-b")
    clock.now += 1500
    register(rim, name="b", addr="h:2", topics={"T": Q4, "U": Q4})
    clock.now += 1000
    removed = rim.scan_not_active_brokers(2000)
    assert [(r.broker_addr, r.broker_name, r.channel) for r in removed] == [("h:1", "a", "ch-a")]
    route = rim.pick_topic_route("T")
    assert route is not None and list(route.queue_datas) == ["b"]
    assert rim.cluster_info().cluster_addr_table == {"DefaultCluster": ["b"]}
    clock.now += 5000
    assert len(rim.scan_not_active_brokers(2000)) == 1
    assert rim.all_topics() == []
    assert rim.cluster_info().cluster_addr_table == {}


def test_channel_close_drops_broker_immediately() -> None:
    rim = RouteInfoManager(clock_ms=Clock())
    register(rim, channel="c1")
    register(rim, bid=1, addr="10.0.0.2:10911", channel="c2")
    removed = rim.on_channel_destroy("c1")
    assert [r.broker_addr for r in removed] == ["10.0.0.1:10911"]
    route = rim.pick_topic_route("T")  # the slave keeps the broker name alive
    assert route is not None and route.broker_datas[0].broker_addrs == {1: "10.0.0.2:10911"}
    assert rim.on_channel_destroy("unknown") == []
    rim.on_channel_destroy("c2")
    assert rim.pick_topic_route("T") is None


def test_unregister_and_role_switch() -> None:
    rim = RouteInfoManager(clock_ms=Clock())
    register(rim, bid=1, addr="h:1")
    register(rim, bid=0, addr="h:1")  # the same address became master
    assert rim.cluster_info().broker_addr_table["broker-a"].broker_addrs == {0: "h:1"}
    assert rim.unregister_broker(
        cluster_name="DefaultCluster", broker_addr="h:1", broker_name="broker-a", broker_id=0
    )
    assert rim.all_topics() == []
    assert rim.live_broker_addrs() == []
    assert not rim.unregister_broker(
        cluster_name="DefaultCluster", broker_addr="h:1", broker_name="broker-a", broker_id=0
    )


def test_query_data_version_refreshes_liveness() -> None:
    clock = Clock()
    rim = RouteInfoManager(clock_ms=clock)
    assert rim.query_data_version_changed("h:1", (1, 1, 0)) == (True, None)
    register(rim, addr="h:1", version=(1, 1, 0))
    clock.now += 1500
    assert rim.query_data_version_changed("h:1", (1, 1, 0)) == (False, (1, 1, 0))
    clock.now += 1000
    assert rim.scan_not_active_brokers(2000) == []
    assert rim.query_data_version_changed("h:1", (1, 2, 0))[0]


def test_delete_topic_whole_or_per_cluster() -> None:
    rim = RouteInfoManager(clock_ms=Clock())
    register(rim, name="a", addr="h:1", cluster="c1")
    register(rim, name="b", addr="h:2", cluster="c2")
    assert rim.topics_by_cluster("c1") == ["T"]
    assert rim.delete_topic("T", "c1")
    route = rim.pick_topic_route("T")
    assert route is not None and list(route.queue_datas) == ["b"]
    assert rim.delete_topic("T")
    assert rim.pick_topic_route("T") is None
    assert not rim.delete_topic("T")


def test_write_perm_wipe_and_add() -> None:
    rim = RouteInfoManager(clock_ms=Clock())
    register(rim, topics={"T": Q4, "U": Q4})
    assert rim.update_write_perm("broker-a", writable=False) == 2
    route = rim.pick_topic_route("U")
    assert route is not None and route.queue_datas["broker-a"].perm == 4
    assert rim.update_write_perm("broker-a", writable=True) == 2
    route = rim.pick_topic_route("U")
    assert route is not None and route.queue_datas["broker-a"].perm == 6


def test_kv_config_persists_atomically(tmp_path: Path) -> None:
    path = tmp_path / "kv" / "kvConfig.json"
    kv = KvConfigManager(path)
    kv.put("ORDER_TOPIC_CONFIG", "T", "broker-a:4")
    kv.put("ns", "k", "v")
    assert kv.delete("ns", "k")
    assert not kv.delete("ns", "k")
    again = KvConfigManager(path)
    again.load()
    assert again.get("ORDER_TOPIC_CONFIG", "T") == "broker-a:4"
    assert again.namespace("ns") == {}
    assert not path.with_name("kvConfig.json.tmp").exists()


# -- elected masters (controller mode) --------------------------------------------------------


def _group(rim: RouteInfoManager) -> dict[int, str]:
    return dict(rim.cluster_info().broker_addr_table["broker-a"].broker_addrs)


def _three_replicas(rim: RouteInfoManager, epoch: int = 1) -> None:
    """h:1 master (epoch in stateVersion), h:2 and h:3 slaves under their own ids."""
    register(rim, bid=0, addr="h:1", version=(1, 1, epoch), channel="c1")
    register(rim, bid=2, addr="h:2", version=(1, 1, epoch), channel="c2")
    register(rim, bid=3, addr="h:3", version=(1, 1, epoch), channel="c3")


def test_elected_master_replaces_the_old_one_at_once() -> None:
    clock = Clock()
    rim = RouteInfoManager(clock_ms=clock)
    _three_replicas(rim)
    res = register(rim, bid=0, addr="h:2", version=(1, 2, 2), channel="c2")  # h:2 promoted, epoch 2
    assert res.accepted and res.replaced_addr == "h:1" and res.first_registration
    assert _group(rim) == {0: "h:2", 3: "h:3"}  # h:2 is listed once, under id 0
    slave = register(rim, bid=3, addr="h:3", version=(1, 2, 2), channel="c3")
    assert slave.master_addr == "h:2" and slave.ha_server_addr == "h:2"  # its HA address
    # the old master's connection closes, or it expires: the new master stays
    assert [r.broker_name for r in rim.on_channel_destroy("c1")] == [None]
    clock.now += 5000
    register(rim, bid=0, addr="h:2", version=(1, 2, 2), channel="c2")
    register(rim, bid=3, addr="h:3", version=(1, 2, 2), channel="c3")
    assert rim.scan_not_active_brokers(2000) == []
    assert _group(rim) == {0: "h:2", 3: "h:3"}
    route = rim.pick_topic_route("T")
    assert route is not None and route.broker_datas[0].broker_addrs[0] == "h:2"


def test_old_master_expiring_after_the_election_keeps_the_new_master() -> None:
    clock = Clock()
    rim = RouteInfoManager(clock_ms=clock)
    _three_replicas(rim)
    clock.now += 1500
    register(rim, bid=0, addr="h:3", version=(1, 2, 2), channel="c3")  # h:1 stopped, h:3 elected
    register(rim, bid=2, addr="h:2", version=(1, 2, 2), channel="c2")
    clock.now += 1000
    removed = rim.scan_not_active_brokers(2000)
    assert [(r.broker_addr, r.channel) for r in removed] == [("h:1", "c1")]
    assert _group(rim) == {0: "h:3", 2: "h:2"}


def test_a_stale_master_cannot_take_id_0_back() -> None:
    rim = RouteInfoManager(clock_ms=Clock())
    _three_replicas(rim, epoch=1)
    register(rim, bid=0, addr="h:2", version=(1, 2, 2), channel="c2")
    stale = register(rim, bid=0, addr="h:1", version=(1, 1, 1), channel="c1")  # SIGCONT, epoch 1
    assert not stale.accepted and stale.master_addr is None
    assert _group(rim) == {0: "h:2", 3: "h:3"}
    assert "h:1" not in rim.live_broker_addrs()
    # stepped down, it registers as a slave under its own id and is listed again
    demoted = register(rim, bid=1, addr="h:1", version=(1, 2, 2), channel="c1")
    assert demoted.accepted and demoted.master_addr == "h:2"
    assert _group(rim) == {0: "h:2", 1: "h:1", 3: "h:3"}
    # a master elected later (a higher epoch) replaces the current one
    assert register(rim, bid=0, addr="h:3", version=(1, 3, 3), channel="c3").replaced_addr == "h:2"
    assert _group(rim) == {0: "h:3", 1: "h:1"}


def test_old_master_reregistering_as_slave_before_the_new_master() -> None:
    rim = RouteInfoManager(clock_ms=Clock())
    _three_replicas(rim)
    res = register(rim, bid=1, addr="h:1", version=(1, 2, 2), channel="c1")
    assert res.master_addr is None and res.ha_server_addr is None  # no master listed right now
    assert _group(rim) == {1: "h:1", 2: "h:2", 3: "h:3"}
    route = rim.pick_topic_route("T")  # the group's queues stay while a new master is elected
    assert route is not None and route.queue_datas == {"broker-a": Q4}


def test_new_master_topics_apply_even_with_an_unchanged_data_version() -> None:
    rim = RouteInfoManager(clock_ms=Clock())
    register(rim, bid=0, addr="h:1", topics={"T": Q4}, version=(1, 1, 1))
    register(rim, bid=2, addr="h:2", topics={"T": Q4}, version=(1, 1, 1))
    register(rim, bid=0, addr="h:2", topics={"T": Q4, "NEW": Q4}, version=(1, 1, 1))
    assert rim.pick_topic_route("NEW") is not None


def test_broker_heartbeat_refreshes_liveness() -> None:
    clock = Clock()
    rim = RouteInfoManager(clock_ms=clock)
    assert not rim.update_broker_info_update_timestamp("h:1")
    register(rim, addr="h:1")
    clock.now += 1500
    assert rim.update_broker_info_update_timestamp("h:1")
    clock.now += 1000
    assert rim.scan_not_active_brokers(2000) == []
