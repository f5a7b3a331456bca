"""Client side of replication: which replica a read goes to, failover to a slave and back, the
producer's statuses and retries, and the admin view of HA status.

The broker groups here are tiny in-test remoting servers (``Replica``) with canned answers, one
per broker id, plus a NameServer double whose route the test edits; they are doubles for the
RPC layer, not brokers (integration_tests/test_replication_clients.py runs the real processes).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable
from typing import Any

import pytest

from rocketq.client.admin import AsyncAdmin, HAStatus, slave_lag
from rocketq.client.cli.cluster import cluster_rows, ha_status_lines
from rocketq.client.config import ClientConfig
from rocketq.client.consumer.base import ConsumerBase
from rocketq.client.consumer.offset_store import InstanceOffsetBroker, RemoteBrokerOffsetStore
from rocketq.client.consumer.subscription import build_subscription
from rocketq.client.errors import ProtocolError, RemotingConnectError
from rocketq.client.instance import ClientInstance, UnreachableReplicas, pick_replica
from rocketq.client.model import Message, PullStatus, SendStatus
from rocketq.client.remoting import headers as h
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.message import encode_stored_message
from rocketq.client.remoting.msgid import encode_offset_msg_id
from rocketq.client.remoting.route import BrokerData, QueueData, TopicRouteData
from rocketq.client.remoting.vocabulary import SUB_ALL, MessageQueue, PullSysFlag
from rocketq.client.transport.aio import Channel
from rocketq.server import RemotingServer

TOPIC = "T"

MASTER_HA_BODY = {
    "master": True,
    "brokerRole": "SYNC_MASTER",
    "haListenPort": 10912,
    "masterCommitLogMaxOffset": 1048576,
    "inSyncSlaveNums": 1,
    "haConnectionInfo": [
        {
            "addr": "127.0.0.1:53122",
            "slaveAckOffset": 1048000,
            "diff": 576,
            "inSync": True,
            "transferFromWhere": 1048576,
            "transferredByteInSecond": 0,
            "lagMillis": 1500,
            "lastAckTimestamp": 1764100000000,
            "lastCaughtUpTimestamp": 1764099998500,
        }
    ],
    "haClientRuntimeInfo": None,
}
SLAVE_HA_BODY = {
    "master": False,
    "brokerRole": "SLAVE",
    "haListenPort": 10922,
    "masterCommitLogMaxOffset": 0,
    "inSyncSlaveNums": 0,
    "haConnectionInfo": [],
    "haClientRuntimeInfo": {
        "masterAddr": "127.0.0.1:10912",
        "maxOffset": 1048000,
        "transferredByteInSecond": 0,
        "lastReadTimestamp": 1764100000000,
        "lastWriteTimestamp": 1764100000000,
        "masterFlushOffset": 0,
        "isActivated": True,
        "status": "REPLICATING",
        "statusDetail": "",
    },
}


class Replica:
    """One broker of a group (or the NameServer): canned pulls, offsets and sends, all recorded."""

    def __init__(self, name: str, broker_id: int, *, messages: int = 5) -> None:
        self.name = name
        self.broker_id = broker_id
        self.server = RemotingServer()
        self.addr = ""
        self.requests: list[RemotingCommand] = []
        self.offsets: dict[tuple[str, int], int] = {}
        self.suggest = 0
        self.send_code: int = ResponseCode.SUCCESS
        self.messages = messages
        self.route: TopicRouteData | None = None  # set on the NameServer double
        for code in (
            RequestCode.GET_ROUTEINFO_BY_TOPIC,
            RequestCode.PULL_MESSAGE,
            RequestCode.QUERY_CONSUMER_OFFSET,
            RequestCode.UPDATE_CONSUMER_OFFSET,
            RequestCode.GET_MAX_OFFSET,
            RequestCode.SEND_MESSAGE_V2,
            RequestCode.GET_BROKER_HA_STATUS,
        ):
            self.server.register(code, self._handle)

    async def start(self) -> None:
        host, port = await self.server.start()
        self.addr = f"{host}:{port}"

    async def stop(self) -> None:
        await self.server.stop(0)

    def codes(self, code: int) -> list[RemotingCommand]:
        return [r for r in self.requests if r.code == code]

    async def _handle(self, cmd: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        self.requests.append(cmd)
        e = cmd.ext_fields
        if cmd.code == RequestCode.GET_ROUTEINFO_BY_TOPIC:
            assert self.route is not None
            return cmd.make_response(ResponseCode.SUCCESS, body=self.route.to_json())
        if cmd.code == RequestCode.PULL_MESSAGE:
            return self._pull(cmd)
        if cmd.code == RequestCode.QUERY_CONSUMER_OFFSET:
            off = self.offsets.get((e["topic"], int(e["queueId"])))
            if off is None:
                return cmd.make_response(ResponseCode.QUERY_NOT_FOUND, "Not found")
            return cmd.make_response(ResponseCode.SUCCESS, None, {"offset": str(off)})
        if cmd.code == RequestCode.UPDATE_CONSUMER_OFFSET:
            self.offsets[(e["topic"], int(e["queueId"]))] = int(e["commitOffset"])
            return None if cmd.is_oneway else cmd.make_response(ResponseCode.SUCCESS)
        if cmd.code == RequestCode.GET_MAX_OFFSET:
            return cmd.make_response(ResponseCode.SUCCESS, None, {"offset": str(self.messages)})
        if cmd.code == RequestCode.GET_BROKER_HA_STATUS:
            body = MASTER_HA_BODY if self.broker_id == 0 else SLAVE_HA_BODY
            return cmd.make_response(ResponseCode.SUCCESS, body=json.dumps(body).encode())
        return self._send(cmd)

    def _pull(self, cmd: RemotingCommand) -> RemotingCommand:
        hd = h.PullMessageRequestHeader.from_ext_fields(cmd.ext_fields)
        found = range(hd.queue_offset, min(hd.queue_offset + hd.max_msg_nums, self.messages))
        body = b"".join(
            encode_stored_message(
                topic=hd.topic, queue_id=hd.queue_id, born_timestamp=1, born_host=("10.0.0.9", 5),
                store_host=("127.0.0.1", 1), body=f"m{i}".encode(), queue_offset=i,
                physical_offset=1000 + i, store_timestamp=2,
            )
            for i in found
        )  # fmt: skip
        ext = {
            "suggestWhichBrokerId": str(self.suggest),
            "minOffset": "0",
            "maxOffset": str(self.messages),
            "nextBeginOffset": str(hd.queue_offset + len(found)),
        }
        code = ResponseCode.SUCCESS if found else ResponseCode.PULL_NOT_FOUND
        return cmd.make_response(code, None, ext, body)

    def _send(self, cmd: RemotingCommand) -> RemotingCommand:
        hd = h.SendMessageRequestHeaderV2.from_ext_fields(cmd.ext_fields)
        ext = {
            "msgId": encode_offset_msg_id("127.0.0.1", 1, 1000),
            "queueId": str(hd.queue_id),
            "queueOffset": "0",
        }
        return cmd.make_response(self.send_code, None, ext)


class Group:
    """A NameServer double and broker groups of replicas; the route lists what ``listed`` says."""

    def __init__(self, namesrv: Replica, groups: dict[str, list[Replica]]) -> None:
        self.namesrv = namesrv
        self.groups = groups
        self.listed = {r.addr for rs in groups.values() for r in rs}
        self.publish()

    def publish(self) -> None:
        self.namesrv.route = TopicRouteData(
            [QueueData(name, 1, 1, 6) for name in sorted(self.groups)],
            [
                BrokerData("c", name, {r.broker_id: r.addr for r in rs if r.addr in self.listed})
                for name, rs in sorted(self.groups.items())
            ],
        )


async def start_group(*names: str, slaves: int = 1) -> Group:
    namesrv = Replica("namesrv", -1)
    await namesrv.start()
    groups = {name: [Replica(name, bid) for bid in range(1 + slaves)] for name in names}
    for replicas in groups.values():
        for r in replicas:
            await r.start()
    return Group(namesrv, groups)


async def stop_group(group: Group) -> None:
    for r in [group.namesrv, *(r for rs in group.groups.values() for r in rs)]:
        await r.stop()


def run(coro: Awaitable[Any]) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 30))


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


# ---------------------------------------------------------------------------------------- choice


def test_pick_replica_follows_java_find_broker_address_in_subscribe() -> None:
    addrs = {0: "m:1", 1: "s1:1", 2: "s2:1"}
    master = pick_replica(addrs)
    assert master is not None and master.broker_addr == "m:1" and not master.slave
    suggested = pick_replica(addrs, 1)
    assert suggested is not None and suggested.broker_addr == "s1:1" and suggested.slave
    # a suggested slave that is gone: the next id, as Java tries brokerId + 1
    nxt = pick_replica({0: "m:1", 2: "s2:1"}, 1)
    assert nxt is not None and nxt.broker_id == 2
    assert pick_replica({0: "m:1"}, 1, only_this=True) is None
    # master absent from the route: any slave (the lowest id)
    no_master = pick_replica({1: "s1:1", 2: "s2:1"})
    assert no_master is not None and no_master.broker_addr == "s1:1"
    assert pick_replica({}) is None
    # a master marked unreachable is passed over while a slave is listed
    skip = pick_replica(addrs, unreachable={"m:1"})
    assert skip is not None and skip.broker_addr == "s1:1"
    # every replica unreachable: still the wanted one (someone must be tried)
    last = pick_replica({0: "m:1"}, unreachable={"m:1"})
    assert last is not None and last.broker_addr == "m:1"
    # a replica that just failed is never returned
    assert pick_replica({0: "m:1"}, exclude={"m:1"}) is None


def test_unreachable_marks_expire_after_the_backoff() -> None:
    clock = FakeClock()
    marks = UnreachableReplicas(5_000, clock)
    marks.mark("m:1")
    assert "m:1" in marks and "s:1" not in marks
    clock.now += 4.9
    assert "m:1" in marks
    clock.now += 0.2
    assert "m:1" not in marks
    marks.mark("m:1")
    marks.clear("m:1")
    assert "m:1" not in marks


# ---------------------------------------------------------------------------------------- consumers


def _consumer(group: Group, clock: FakeClock) -> ConsumerBase:
    consumer = ConsumerBase(
        group.namesrv.addr, consumer_group="cg", client=ClientConfig(instance_name="repl")
    )
    consumer.instance.unreachable = UnreachableReplicas(5_000, clock)
    return consumer


def _flags(cmd: RemotingCommand) -> int:
    return h.PullMessageRequestHeader.from_ext_fields(cmd.ext_fields).sys_flag


def test_pull_fails_over_to_the_slave_and_returns_to_the_master() -> None:
    async def scenario() -> None:
        group = await start_group("broker-a")
        master, slave = group.groups["broker-a"]
        clock = FakeClock()
        consumer = _consumer(group, clock)
        mq = MessageQueue(TOPIC, "broker-a", 0)
        sub = build_subscription(TOPIC, SUB_ALL)
        try:
            first = await consumer.pull_once(mq, sub, 0, 2, block=False, commit_offset=1)
            assert first.status is PullStatus.FOUND and [m.body for m in first.messages] == [b"m0", b"m1"]
            assert _flags(master.codes(RequestCode.PULL_MESSAGE)[-1]) & PullSysFlag.COMMIT_OFFSET

            await master.stop()  # killed; the NameServer still lists it
            second = await consumer.pull_once(mq, sub, 2, 2, block=False, commit_offset=2)
            assert [m.queue_offset for m in second.messages] == [2, 3]  # the same offsets, nothing skipped
            slave_pull = slave.codes(RequestCode.PULL_MESSAGE)[-1]
            assert not _flags(slave_pull) & PullSysFlag.COMMIT_OFFSET  # slaves never take the commit
            assert master.addr in consumer.instance.unreachable

            # while marked, the next pull goes straight to the slave (no attempt on the master)
            before = len(slave.codes(RequestCode.PULL_MESSAGE))
            third = await consumer.pull_once(mq, sub, 4, 2, block=False)
            assert [m.queue_offset for m in third.messages] == [4]
            assert len(slave.codes(RequestCode.PULL_MESSAGE)) == before + 1

            # the NameServer drops the master: the slave is the only replica left
            group.listed.discard(master.addr)
            group.publish()
            await consumer.instance.update_topic_route(TOPIC)
            assert (await consumer.pull_once(mq, sub, 5, 2, block=False)).status is PullStatus.NO_NEW_MSG

            # the master comes back and registers again: the slave suggested id 0, so back to it
            await master.server.start()
            group.listed.add(master.addr)
            group.publish()
            await consumer.instance.update_topic_route(TOPIC)
            clock.now += 10
            pulls = len(master.codes(RequestCode.PULL_MESSAGE))
            await consumer.pull_once(mq, sub, 5, 2, block=False, commit_offset=5)
            assert len(master.codes(RequestCode.PULL_MESSAGE)) == pulls + 1
            assert _flags(master.codes(RequestCode.PULL_MESSAGE)[-1]) & PullSysFlag.COMMIT_OFFSET
        finally:
            await consumer.instance.close()
            await stop_group(group)

    run(scenario())


def test_pull_follows_suggest_which_broker_id() -> None:
    async def scenario() -> None:
        group = await start_group("broker-a")
        master, slave = group.groups["broker-a"]
        consumer = _consumer(group, FakeClock())
        mq = MessageQueue(TOPIC, "broker-a", 0)
        sub = build_subscription(TOPIC, SUB_ALL)
        try:
            master.suggest = 1  # the master is overloaded (slaveReadEnable): read from slave 1
            await consumer.pull_once(mq, sub, 0, 1, block=False)
            await consumer.pull_once(mq, sub, 1, 1, block=False)
            assert len(master.codes(RequestCode.PULL_MESSAGE)) == 1
            assert len(slave.codes(RequestCode.PULL_MESSAGE)) == 1
            await consumer.pull_once(mq, sub, 2, 1, block=False)  # the slave said 0: the master again
            assert len(master.codes(RequestCode.PULL_MESSAGE)) == 2
        finally:
            await consumer.instance.close()
            await stop_group(group)

    run(scenario())


def test_pull_raises_the_last_transport_error_when_no_replica_answers() -> None:
    async def scenario() -> None:
        group = await start_group("broker-a")
        consumer = _consumer(group, FakeClock())
        mq = MessageQueue(TOPIC, "broker-a", 0)
        try:
            for r in group.groups["broker-a"]:
                await r.stop()
            with pytest.raises(RemotingConnectError):
                await consumer.pull_once(mq, build_subscription(TOPIC, SUB_ALL), 0, 1, block=False)
        finally:
            await consumer.instance.close()
            await group.namesrv.stop()

    run(scenario())


def test_offsets_are_committed_to_the_slave_while_the_master_is_down() -> None:
    async def scenario() -> None:
        group = await start_group("broker-a")
        master, slave = group.groups["broker-a"]
        clock = FakeClock()
        instance = ClientInstance(group.namesrv.addr, config=ClientConfig(instance_name="off"))
        instance.unreachable = UnreachableReplicas(5_000, clock)
        store = RemoteBrokerOffsetStore(InstanceOffsetBroker(instance), "cg")
        mq = MessageQueue(TOPIC, "broker-a", 0)
        try:
            await store.commit_sync(mq, 3)
            assert master.offsets[(TOPIC, 0)] == 3 and (TOPIC, 0) not in slave.offsets
            await master.stop()
            await store.commit_sync(mq, 7)  # the master refuses connections: the slave takes it
            assert slave.offsets[(TOPIC, 0)] == 7
            store.update_offset(mq, 8)
            await store.persist_all([mq])  # oneway, also to the slave
            await asyncio.sleep(0.1)
            assert slave.offsets[(TOPIC, 0)] == 8
            assert await InstanceOffsetBroker(instance).query_offset("cg", mq) == 8
            await master.server.start()
            clock.now += 10
            await store.commit_sync(mq, 9)
            assert master.offsets[(TOPIC, 0)] == 9  # back on the master
        finally:
            await instance.close()
            await stop_group(group)

    run(scenario())


# ---------------------------------------------------------------------------------------- producer


def test_producer_leaves_a_dead_master_for_another_group_and_never_writes_to_a_slave() -> None:
    from rocketq.client.producer import AsyncProducer

    async def scenario() -> None:
        group = await start_group("broker-a", "broker-b")
        a_master, a_slave = group.groups["broker-a"]
        b_master, _ = group.groups["broker-b"]
        try:
            async with AsyncProducer(
                group.namesrv.addr, producer_group="pg", send_latency_fault_enable=True
            ) as producer:
                await a_master.stop()  # killed; the NameServer still lists it until it expires
                for i in range(6):
                    result = await producer.send(Message(TOPIC, f"m{i}".encode()))
                    assert result.send_status is SendStatus.SEND_OK
                    assert result.message_queue.broker_name == "broker-b"
                assert not a_slave.codes(RequestCode.SEND_MESSAGE_V2)
                # the latency fault tolerance now keeps broker-a out of the first choice
                assert not producer.fault_strategy.fault_tolerance.is_available("broker-a")
                assert len(b_master.codes(RequestCode.SEND_MESSAGE_V2)) == 6
        finally:
            await stop_group(group)

    run(scenario())


@pytest.mark.parametrize("code", [ResponseCode.SLAVE_NOT_AVAILABLE, ResponseCode.FLUSH_SLAVE_TIMEOUT])
@pytest.mark.parametrize("retry_another", [False, True])
def test_not_store_ok_statuses_and_retry_another_broker(code: int, retry_another: bool) -> None:
    from rocketq.client.producer import AsyncProducer

    async def scenario() -> None:
        group = await start_group("broker-a", "broker-b", slaves=0)
        a, b = group.groups["broker-a"][0], group.groups["broker-b"][0]
        a.send_code = b.send_code = code
        try:
            async with AsyncProducer(
                group.namesrv.addr, producer_group="pg", retry_another_broker_when_not_store_ok=retry_another
            ) as producer:
                result = await producer.send(Message(TOPIC, b"x"))
                sends = len(a.codes(RequestCode.SEND_MESSAGE_V2)) + len(b.codes(RequestCode.SEND_MESSAGE_V2))
                assert result.send_status is SendStatus(ResponseCode(code).name)
                assert sends == (3 if retry_another else 1)  # 1 + retry_times_when_send_failed
                a.send_code = b.send_code = ResponseCode.SUCCESS
                if retry_another:
                    a.send_code = code
                    ok = await producer.send(Message(TOPIC, b"y"), timeout_ms=3000)
                    assert ok.send_status is SendStatus.SEND_OK
        finally:
            await stop_group(group)

    run(scenario())


# ---------------------------------------------------------------------------------------- admin


def test_ha_status_parses_the_documented_bodies() -> None:
    master = HAStatus.from_json(json.dumps(MASTER_HA_BODY).encode())
    assert master.master and master.broker_role == "SYNC_MASTER" and master.in_sync_slave_nums == 1
    (conn,) = master.connections
    assert (conn.addr, conn.slave_ack_offset, conn.diff, conn.in_sync, conn.lag_ms) == (
        "127.0.0.1:53122", 1048000, 576, True, 1500,
    )  # fmt: skip
    assert master.client is None
    slave = HAStatus.from_json(json.dumps(SLAVE_HA_BODY))
    assert not slave.master and slave.client is not None
    assert (slave.client.master_addr, slave.client.max_offset, slave.client.activated) == (
        "127.0.0.1:10912", 1048000, True,
    )  # fmt: skip
    assert slave.client.status == "REPLICATING"
    assert slave_lag(master, slave, "127.0.0.1:10921") == (576, 1500)
    assert slave_lag(master, slave, "10.9.9.9:10911") == (576, None)  # no HA connection from there
    for bad in (b"not json", b"[1, 2]", b'{"haListenPort": 1}'):
        with pytest.raises(ProtocolError):
            HAStatus.from_json(bad)


def test_ha_status_written_by_to_json_reads_back_the_same() -> None:
    for body in (MASTER_HA_BODY, SLAVE_HA_BODY):
        status = HAStatus.from_json(json.dumps(body))
        assert HAStatus.from_json(status.to_json()) == status
        assert json.loads(status.to_json()).keys() == body.keys()


def test_ha_status_and_cluster_rows_and_ha_status_lines() -> None:
    async def scenario() -> None:
        group = await start_group("broker-a")
        master, slave = group.groups["broker-a"]
        try:
            async with AsyncAdmin(group.namesrv.addr) as admin:
                st = await admin.ha_status(master.addr)
                assert st.master and st.connections[0].diff == 576
                st_slave = await admin.ha_status(slave.addr)
                assert st_slave.client is not None and st_slave.client.max_offset == 1048000
                lines = ha_status_lines(master.addr, st)
                assert "#Role: SYNC_MASTER" in lines[0] and any("127.0.0.1:53122" in line for line in lines)
                slave_lines = "\n".join(ha_status_lines(slave.addr, st_slave))
                assert "#MasterAddr: 127.0.0.1:10912" in slave_lines and "REPLICATING" in slave_lines
        finally:
            await stop_group(group)

    run(scenario())
    from rocketq.client.admin import BrokerReplica

    rows = cluster_rows([
        BrokerReplica("c", "broker-a", 0, "127.0.0.1:10911", "SYNC_MASTER", "V4_9_4", "1.00", "2.00"),
        BrokerReplica("c", "broker-a", 1, "127.0.0.1:10921", "SLAVE", "V4_9_4", "0.00", "0.00", 576, 1500),
        BrokerReplica("c", "broker-b", 0, "127.0.0.1:10931", "?", "", "", "", error="refused"),
    ])  # fmt: skip
    assert rows[0][:5] == ("#Cluster Name", "#Broker Name", "#BID", "#Role", "#Addr")
    assert rows[0][-2:] == ("#Lag(bytes)", "#Lag(s)")
    assert rows[1][2] == 0 and rows[1][-2:] == ("-", "-")
    assert rows[2][2] == 1 and rows[2][-2:] == (576, "1.5")
    assert rows[3][5] == "unreachable"
