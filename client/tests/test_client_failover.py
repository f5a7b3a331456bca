"""Clients during a master failover: routes refreshed on failure (rate-limited), sends retried on
the elected master within their budget, pending requests to a stopped master cut, orderly queues
locked again on the new master.

The brokers and the NameServer here are in-test remoting servers with canned answers (doubles of
the RPC layer, not brokers); the test moves the master by editing the NameServer's route, as a
controller election followed by the new master's registration would.  Real processes are in
integration_tests/test_dev_controller.py and the failover integration tests.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

import pytest

from rocketq.client.api import MQClientAPI
from rocketq.client.config import ClientConfig, ConsumerConfig
from rocketq.client.consumer.base import ConsumerBase
from rocketq.client.consumer.offset_store import InstanceOffsetBroker, RemoteBrokerOffsetStore
from rocketq.client.consumer.process_queue import ProcessQueue
from rocketq.client.consumer.rebalance import RebalanceImpl
from rocketq.client.consumer.subscription import build_subscription
from rocketq.client.errors import MQBrokerError, MQClientError
from rocketq.client.instance import ClientInstance
from rocketq.client.model import LocalTransactionState, Message, PullStatus, SendStatus
from rocketq.client.producer import AsyncProducer
from rocketq.client.producer.routes import PublishRoutes, QueueState, queue_unavailable_error
from rocketq.client.producer.selector import SelectMessageQueueByHash
from rocketq.client.producer.transaction_batch import HalfBatchResult, end_transaction_batch
from rocketq.client.remoting import headers as h
from rocketq.client.remoting.batch import encode_batch
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.lenient_json import loads
from rocketq.client.remoting.msgid import encode_offset_msg_id
from rocketq.client.remoting.route import BrokerData, QueueData, TopicRouteData
from rocketq.client.remoting.vocabulary import SUB_ALL, MessageQueue
from rocketq.client.transport.aio import Channel
from rocketq.server import RemotingServer

TOPIC = "T"
GROUP = "broker-a"


class Node:
    """A broker (or NameServer) double: answers sends, pulls, locks and routes; records requests."""

    def __init__(self) -> None:
        self.server = RemotingServer()
        self.addr = ""
        self.requests: list[RemotingCommand] = []
        self.send_code: int = ResponseCode.SUCCESS
        self.send_remark: str | None = None
        self.hang = False  # a SIGSTOPped broker: requests are read and never answered
        self.route: TopicRouteData | None = None
        for code in (
            RequestCode.GET_ROUTEINFO_BY_TOPIC,
            RequestCode.SEND_MESSAGE_V2,
            RequestCode.SEND_BATCH_MESSAGE,
            RequestCode.END_TRANSACTION,
            RequestCode.PULL_MESSAGE,
            RequestCode.LOCK_BATCH_MQ,
        ):
            self.server.register(code, self._handle)

    async def start(self) -> None:
        host, port = await self.server.start()
        self.addr = f"{host}:{port}"

    async def stop(self) -> None:
        await self.server.stop(0)

    def count(self, code: int) -> int:
        return sum(1 for r in self.requests if r.code == code)

    async def _handle(self, cmd: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        self.requests.append(cmd)
        if self.hang:
            await asyncio.Event().wait()
        if cmd.code == RequestCode.GET_ROUTEINFO_BY_TOPIC:
            assert self.route is not None
            return cmd.make_response(ResponseCode.SUCCESS, body=self.route.to_json())
        if cmd.code == RequestCode.END_TRANSACTION:
            return cmd.make_response(ResponseCode.SUCCESS)
        if cmd.code == RequestCode.LOCK_BATCH_MQ:
            body = loads(cmd.body)
            return cmd.make_response(ResponseCode.SUCCESS, body=_json({"lockOKMQSet": body["mqSet"]}))
        if cmd.code == RequestCode.PULL_MESSAGE:
            hd = h.PullMessageRequestHeader.from_ext_fields(cmd.ext_fields)
            ext = {
                "suggestWhichBrokerId": "0",
                "minOffset": "0",
                "maxOffset": "0",
                "nextBeginOffset": str(hd.queue_offset),
            }
            return cmd.make_response(ResponseCode.PULL_NOT_FOUND, None, ext)
        hd2 = h.SendMessageRequestHeaderV2.from_ext_fields(cmd.ext_fields)
        ext = {  # SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE
            "msgId": encode_offset_msg_id("127.0.0.1", 1, 1000),
            "queueId": str(hd2.queue_id),
            "queueOffset": "0",
        }
        return cmd.make_response(self.send_code, self.send_remark, ext)


def _json(obj: Any) -> bytes:
    import json

    return json.dumps(obj).encode()


class Cluster:
    """A NameServer double and one broker group of three replicas; ``publish`` sets the route."""

    def __init__(self, namesrv: Node, replicas: list[Node]) -> None:
        self.namesrv = namesrv
        self.replicas = replicas

    def publish(self, addrs: dict[int, Node]) -> None:
        self.namesrv.route = TopicRouteData(
            [QueueData(GROUP, 2, 2, 6)], [BrokerData("c", GROUP, {i: n.addr for i, n in addrs.items()})]
        )

    def route_requests(self) -> int:
        return self.namesrv.count(RequestCode.GET_ROUTEINFO_BY_TOPIC)


async def start_cluster() -> Cluster:
    nodes = [Node() for _ in range(4)]
    for n in nodes:
        await n.start()
    cluster = Cluster(nodes[0], nodes[1:])
    a, b, c = cluster.replicas
    cluster.publish({0: a, 1: b, 2: c})
    return cluster


async def stop_cluster(cluster: Cluster) -> None:
    for n in [cluster.namesrv, *cluster.replicas]:
        n.hang = False
        await n.stop()


def run(coro: Awaitable[Any]) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 30))


def _client(interval_ms: int = 200) -> ClientConfig:
    return ClientConfig(instance_name="failover", route_refresh_on_failure_interval_ms=interval_ms)


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


# ---------------------------------------------------------------------------------------- instance


def test_route_refresh_after_failure_is_rate_limited_per_topic() -> None:
    async def scenario() -> None:
        cluster = await start_cluster()
        inst = ClientInstance(cluster.namesrv.addr, config=_client(500))
        clock = FakeClock()
        inst.clock = clock
        try:
            await inst.update_topic_route(TOPIC)
            before = cluster.route_requests()
            for _ in range(5):
                await inst.refresh_route_after_failure(TOPIC)
            assert cluster.route_requests() == before + 1  # one lookup, then the cached route
            clock.now += 0.6
            await inst.refresh_route_after_failure(TOPIC)
            assert cluster.route_requests() == before + 2
        finally:
            await inst.close()
            await stop_cluster(cluster)

    run(scenario())


def test_route_refresh_after_failure_keeps_the_cached_route_when_the_namesrv_is_down() -> None:
    async def scenario() -> None:
        cluster = await start_cluster()
        inst = ClientInstance(cluster.namesrv.addr, config=_client())
        try:
            cached = await inst.update_topic_route(TOPIC)
            await cluster.namesrv.stop()
            assert await inst.refresh_route_after_failure(TOPIC) == cached
        finally:
            await inst.close()
            await stop_cluster(cluster)

    run(scenario())


# ---------------------------------------------------------------------------------------- producer


def test_send_waits_for_the_elected_master_within_its_timeout() -> None:
    async def scenario() -> None:
        cluster = await start_cluster()
        a, b, c = cluster.replicas
        try:
            async with AsyncProducer(cluster.namesrv.addr, producer_group="pg", client=_client()) as producer:
                first = await producer.send(Message(TOPIC, b"before"))
                assert first.send_status is SendStatus.SEND_OK and a.count(RequestCode.SEND_MESSAGE_V2) == 1
                await a.stop()  # SIGKILL: the NameServer drops it when its connection closes
                cluster.publish({1: b, 2: c})

                async def elect() -> None:
                    await asyncio.sleep(0.5)
                    cluster.publish({0: b, 2: c})  # b elected, registered as id 0

                election = asyncio.create_task(elect())
                result = await producer.send(Message(TOPIC, b"during"), timeout_ms=20_000)
                await election
                assert result.send_status is SendStatus.SEND_OK
                assert b.count(RequestCode.SEND_MESSAGE_V2) == 1 and not c.count(RequestCode.SEND_MESSAGE_V2)
                # the wait refreshed the route at most once per interval (200 ms), not in a loop
                assert cluster.route_requests() <= 12
        finally:
            await stop_cluster(cluster)

    run(scenario())


def test_send_refused_by_a_demoted_master_goes_to_the_new_one() -> None:
    async def scenario() -> None:
        cluster = await start_cluster()
        a, b, c = cluster.replicas
        try:
            async with AsyncProducer(cluster.namesrv.addr, producer_group="pg", client=_client()) as producer:
                await producer.send(Message(TOPIC, b"warm"))
                # a was demoted: it refuses writes; the NameServer already lists c as master
                a.send_code, a.send_remark = ResponseCode.SERVICE_NOT_AVAILABLE, "broker is a slave"
                cluster.publish({0: c, 1: a, 2: b})
                result = await producer.send(Message(TOPIC, b"x"))
                assert result.send_status is SendStatus.SEND_OK
                assert a.count(RequestCode.SEND_MESSAGE_V2) == 2 and c.count(RequestCode.SEND_MESSAGE_V2) == 1
                assert not b.count(RequestCode.SEND_MESSAGE_V2)  # never to a slave
        finally:
            await stop_cluster(cluster)

    run(scenario())


def test_a_failed_send_without_a_new_master_still_fails_within_its_timeout() -> None:
    async def scenario() -> None:
        cluster = await start_cluster()
        a, b, c = cluster.replicas
        try:
            async with AsyncProducer(cluster.namesrv.addr, producer_group="pg", client=_client()) as producer:
                await producer.send(Message(TOPIC, b"warm"))
                await a.stop()
                cluster.publish({1: b, 2: c})
                with pytest.raises(MQClientError, match="has no master in the route"):
                    await producer.send(Message(TOPIC, b"x"), timeout_ms=800)
                assert not b.count(RequestCode.SEND_MESSAGE_V2) and not c.count(RequestCode.SEND_MESSAGE_V2)
        finally:
            await stop_cluster(cluster)

    run(scenario())


def test_new_master_clears_the_fault_record_of_its_group() -> None:
    async def scenario() -> None:
        cluster = await start_cluster()
        _, b, c = cluster.replicas
        try:
            async with AsyncProducer(
                cluster.namesrv.addr, producer_group="pg", client=_client(), send_latency_fault_enable=True
            ) as producer:
                await producer.send(Message(TOPIC, b"warm"))
                producer.fault_strategy.update_fault_item(GROUP, 100, isolation=True)
                assert not producer.fault_strategy.fault_tolerance.is_available(GROUP)
                cluster.publish({0: b, 2: c})
                await producer.instance.update_topic_route(TOPIC)
                assert producer.fault_strategy.fault_tolerance.is_available(GROUP)
        finally:
            await stop_cluster(cluster)

    run(scenario())


# ---------------------------------------------------------------------------------------- consumer


def test_a_pull_waiting_on_a_stopped_master_moves_to_the_new_master() -> None:
    async def scenario() -> None:
        cluster = await start_cluster()
        a, b, c = cluster.replicas
        consumer = ConsumerBase(
            cluster.namesrv.addr,
            consumer_group="cg",
            consumer_pull_timeout_ms=120_000,  # the pull must not end by timing out
            client=_client(),
        )
        mq = MessageQueue(TOPIC, GROUP, 0)
        try:
            await consumer.instance.update_topic_route(TOPIC)
            a.hang = True  # SIGSTOP

            async def elect() -> None:
                while not a.count(RequestCode.PULL_MESSAGE):
                    await asyncio.sleep(0.05)
                cluster.publish({0: b, 2: c})
                await consumer.instance.update_topic_route(TOPIC)  # e.g. a producer's refresh

            election = asyncio.create_task(elect())
            result = await consumer.pull_once(mq, build_subscription(TOPIC, SUB_ALL), 0, 1, block=False)
            await election
            assert result.status is PullStatus.NO_NEW_MSG
            assert b.count(RequestCode.PULL_MESSAGE) == 1
        finally:
            await consumer.instance.close()
            await stop_cluster(cluster)

    run(scenario())


class _Owner:
    async def start_queue(self, mq: MessageQueue, pq: ProcessQueue, next_offset: int) -> None:
        return None

    async def remove_queue(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        return True

    def queues_changed(self, topic: str, mq_all: set[MessageQueue], mq_divided: set[MessageQueue]) -> None:
        return None


def test_orderly_queues_are_locked_again_on_the_new_master() -> None:
    async def scenario() -> None:
        cluster = await start_cluster()
        a, b, c = cluster.replicas
        inst = ClientInstance(cluster.namesrv.addr, config=_client())
        config = ConsumerConfig(consumer_group="cg")
        store = RemoteBrokerOffsetStore(InstanceOffsetBroker(inst), "cg")
        rebalance = RebalanceImpl(config, inst, store, lambda *args: [], _Owner(), orderly=True)
        mqs = [MessageQueue(TOPIC, GROUP, 0), MessageQueue(TOPIC, GROUP, 1)]

        class Member:
            group = "cg"

            def topics_in_use(self) -> set[str]:
                return {TOPIC}

            def heartbeat_data(self) -> tuple[str, dict[str, Any]]:
                return "consumer", {}

            def on_route_changed(self, topic: str, route: TopicRouteData) -> None:
                rebalance.on_route_changed(topic, route)

            def on_master_changed(self, broker_name: str, master_addr: str | None) -> None:
                rebalance.on_master_changed(broker_name, master_addr)

            async def periodic(self, what: str) -> None:
                return None

        inst.register(Member())
        try:
            await inst.update_topic_route(TOPIC)
            for mq in mqs:
                rebalance.process_queue_table[mq] = ProcessQueue()
                assert await rebalance.lock(mq)
            assert a.count(RequestCode.LOCK_BATCH_MQ) == 2
            assert all(pq.locked for pq in rebalance.process_queue_table.values())

            await a.stop()
            cluster.publish({1: b, 2: c})  # no master for a while: nothing can be locked
            await inst.update_topic_route(TOPIC)
            assert not any(pq.locked for pq in rebalance.process_queue_table.values())
            assert not await rebalance.lock(mqs[0])

            cluster.publish({0: c, 1: b})  # c elected
            await inst.update_topic_route(TOPIC)
            for _ in range(100):
                if all(pq.locked for pq in rebalance.process_queue_table.values()):
                    break
                await asyncio.sleep(0.05)
            assert all(pq.locked for pq in rebalance.process_queue_table.values())
            assert c.count(RequestCode.LOCK_BATCH_MQ) == 1  # one LOCK_BATCH_MQ for both queues
            assert not b.count(RequestCode.LOCK_BATCH_MQ)
        finally:
            await rebalance.stop()
            await inst.close()
            await stop_cluster(cluster)

    run(scenario())


# ------------------------------------------------------------------------- sends to a fixed queue


def test_selector_send_rides_through_a_killed_master_on_the_same_queue() -> None:
    async def scenario() -> None:
        cluster = await start_cluster()
        a, b, c = cluster.replicas
        selector = SelectMessageQueueByHash()
        try:
            async with AsyncProducer(cluster.namesrv.addr, producer_group="pg", client=_client()) as producer:
                first = await producer.send(Message(TOPIC, b"before"), selector=selector, arg="k")
                await a.stop()  # SIGKILL: the NameServer drops it when its connection closes
                cluster.publish({1: b, 2: c})

                async def elect() -> None:
                    await asyncio.sleep(0.5)
                    cluster.publish({0: b, 2: c})

                election = asyncio.create_task(elect())
                result = await producer.send(Message(TOPIC, b"during"), selector=selector, arg="k")
                await election
                assert result.send_status is SendStatus.SEND_OK
                assert result.message_queue.queue_id == first.message_queue.queue_id
                sent = [r for r in b.requests if r.code == RequestCode.SEND_MESSAGE_V2]
                assert len(sent) == 1
                header = h.SendMessageRequestHeaderV2.from_ext_fields(sent[0].ext_fields)
                assert header.queue_id == first.message_queue.queue_id
                assert not c.count(RequestCode.SEND_MESSAGE_V2)
                assert cluster.route_requests() <= 12  # refreshes rate-limited, not a loop
        finally:
            await stop_cluster(cluster)

    run(scenario())


def test_selector_send_to_a_hung_master_moves_once_the_route_names_a_new_one() -> None:
    async def scenario() -> None:
        cluster = await start_cluster()
        a, b, c = cluster.replicas
        try:
            async with AsyncProducer(cluster.namesrv.addr, producer_group="pg", client=_client()) as producer:
                await producer.send(Message(TOPIC, b"warm"), queue=MessageQueue(TOPIC, GROUP, 1))
                a.hang = True  # SIGSTOP: the connection stays open, nothing is answered

                async def elect() -> None:
                    while a.count(RequestCode.SEND_MESSAGE_V2) < 2:
                        await asyncio.sleep(0.05)
                    cluster.publish({0: b, 1: a, 2: c})  # b elected; a still listed as a replica

                election = asyncio.create_task(elect())
                loop = asyncio.get_running_loop()
                began = loop.time()
                result = await producer.send(
                    Message(TOPIC, b"x"), queue=MessageQueue(TOPIC, GROUP, 1), timeout_ms=20_000
                )
                await election
                assert result.send_status is SendStatus.SEND_OK
                assert b.count(RequestCode.SEND_MESSAGE_V2) == 1
                # the route was watched while a did not answer: far sooner than the 20 s timeout
                assert loop.time() - began < 10
        finally:
            await stop_cluster(cluster)

    run(scenario())


def test_encoded_batch_rides_through_a_killed_master() -> None:
    async def scenario() -> None:
        cluster = await start_cluster()
        a, b, c = cluster.replicas
        mq = MessageQueue(TOPIC, GROUP, 0)
        body = encode_batch([(0, b"one", {"UNIQ_KEY": "u1"})])
        try:
            async with AsyncProducer(cluster.namesrv.addr, producer_group="pg", client=_client()) as producer:
                await producer.send(Message(TOPIC, b"warm"))
                await a.stop()
                cluster.publish({0: b, 2: c})
                result = await producer.send_encoded_batch(mq, body, count=1)
                assert result.message_queue.queue_id == 0
                assert b.count(RequestCode.SEND_BATCH_MESSAGE) == 1
        finally:
            await stop_cluster(cluster)

    run(scenario())


def _two_groups(groups: dict[str, dict[int, str]], queues: int = 2) -> TopicRouteData:
    return TopicRouteData(
        [QueueData(name, queues, queues, 6) for name in groups],
        [BrokerData("c", name, addrs) for name, addrs in groups.items()],
    )


def _routes_of(inst: ClientInstance, route: TopicRouteData) -> PublishRoutes:
    routes = PublishRoutes(lambda: inst, "TBW102", 4)
    inst.topic_routes[TOPIC] = route
    inst.broker_addr_table = {bd.broker_name: dict(bd.broker_addrs) for bd in route.broker_datas}
    routes.on_route_changed(TOPIC, route)
    return routes


def test_queue_state_and_selector_queues_keep_a_lost_group() -> None:
    async def scenario() -> None:
        inst = ClientInstance("127.0.0.1:1", config=_client())
        both = _two_groups({"g-a": {0: "h:1", 1: "h:2"}, "g-b": {0: "h:3"}})
        routes = _routes_of(inst, both)
        info = routes.table[TOPIC]
        assert [(q.broker_name, q.queue_id) for q in routes.selector_queues(info)] == [
            ("g-a", 0), ("g-a", 1), ("g-b", 0), ("g-b", 1),
        ]  # fmt: skip
        b0 = MessageQueue(TOPIC, "g-b", 0)
        assert routes.queue_state(b0) is QueueState.WRITABLE
        # g-a's master is gone, its slave is still listed: a master may be elected
        routes = _routes_of(inst, _two_groups({"g-a": {1: "h:2"}, "g-b": {0: "h:3"}}))
        assert routes.queue_state(MessageQueue(TOPIC, "g-a", 0)) is QueueState.NO_MASTER
        # g-b left the route: its queues stay in the selector's list (a key never moves) but are lost
        routes.on_route_changed(TOPIC, both)
        only_a = _two_groups({"g-a": {0: "h:1"}})
        inst.topic_routes[TOPIC] = only_a
        routes.on_route_changed(TOPIC, only_a)
        info = routes.table[TOPIC]
        assert {q.broker_name for q in info.message_queues} == {"g-a"}  # plain sends: g-a only
        assert len(routes.selector_queues(info)) == 4
        assert routes.queue_state(b0) is QueueState.GROUP_LOST
        assert routes.queue_state(MessageQueue(TOPIC, "g-a", 5)) is QueueState.QUEUE_GONE
        error = queue_unavailable_error(b0, QueueState.GROUP_LOST)
        assert "broker group g-b" in str(error) and "queue 0" in str(error) and "order" in str(error)
        await inst.close()

    run(scenario())


def test_selector_send_to_a_lost_group_fails_fast_and_plain_sends_use_the_other() -> None:
    async def scenario() -> None:
        namesrv, a, b = Node(), Node(), Node()
        for n in (namesrv, a, b):
            await n.start()
        namesrv.route = _two_groups({"g-a": {0: a.addr}, "g-b": {0: b.addr}})
        selector = SelectMessageQueueByHash()
        keys = [f"k{i}" for i in range(16)]
        try:
            async with AsyncProducer(namesrv.addr, producer_group="pg", client=_client()) as producer:
                placed = {
                    k: await producer.send(Message(TOPIC, b"x"), selector=selector, arg=k) for k in keys
                }
                on_b = [k for k in keys if placed[k].message_queue.broker_name == "g-b"]
                on_a = [k for k in keys if k not in on_b]
                assert on_a and on_b
                await b.stop()  # SIGKILL, no replica: the NameServer drops the group
                namesrv.route = _two_groups({"g-a": {0: a.addr}})
                loop = asyncio.get_running_loop()
                began = loop.time()
                with pytest.raises(MQClientError, match="broker group g-b") as lost:
                    await producer.send(
                        Message(TOPIC, b"x"), selector=selector, arg=on_b[0], timeout_ms=10_000
                    )
                assert "order" in str(lost.value) and loop.time() - began < 3
                # later sends of that key fail at once, without a request
                with pytest.raises(MQClientError, match="broker group g-b"):
                    await producer.send(Message(TOPIC, b"x"), selector=selector, arg=on_b[0])
                # keys of g-a keep their queue; plain sends all go to g-a
                again = await producer.send(Message(TOPIC, b"x"), selector=selector, arg=on_a[0])
                assert again.message_queue == placed[on_a[0]].message_queue
                for _ in range(4):
                    plain = await producer.send(Message(TOPIC, b"x"))
                    assert plain.message_queue.broker_name == "g-a"
        finally:
            for n in (namesrv, a, b):
                await n.stop()

    run(scenario())


def test_end_transaction_batch_ends_on_the_new_master_after_a_failover() -> None:
    async def scenario() -> None:
        cluster = await start_cluster()
        a, b, c = cluster.replicas
        api = MQClientAPI(cluster.namesrv.addr, config=_client())
        handle = HalfBatchResult(
            broker_addr=a.addr, broker_name=GROUP, topic=TOPIC, queue_id=0, first_half_offset=0, count=2,
            first_commit_log_offset=0, msg_ids=(encode_offset_msg_id("127.0.0.1", 1, 0),) * 2,
            transaction_ids=("t1", "t2"),
        )  # fmt: skip
        try:
            await a.stop()  # SIGKILL of the master the halves went to; b elected
            cluster.publish({0: b, 2: c})
            await end_transaction_batch(api, "pg", [handle], LocalTransactionState.COMMIT_MESSAGE)
            assert b.count(RequestCode.END_TRANSACTION) == 1 and not c.count(RequestCode.END_TRANSACTION)
        finally:
            await api.close()
            await stop_cluster(cluster)

    run(scenario())


def test_selector_send_refused_by_a_demoted_master_goes_to_the_same_queue_on_the_new_one() -> None:
    async def scenario() -> None:
        cluster = await start_cluster()
        a, b, c = cluster.replicas
        mq = MessageQueue(TOPIC, GROUP, 1)
        try:
            async with AsyncProducer(cluster.namesrv.addr, producer_group="pg", client=_client()) as producer:
                await producer.send(Message(TOPIC, b"warm"), queue=mq)
                a.send_code, a.send_remark = ResponseCode.SERVICE_NOT_AVAILABLE, "broker is a slave"
                cluster.publish({0: c, 1: a, 2: b})
                result = await producer.send(Message(TOPIC, b"x"), queue=mq)
                assert result.send_status is SendStatus.SEND_OK and result.message_queue == mq
                assert a.count(RequestCode.SEND_MESSAGE_V2) == 2 and c.count(RequestCode.SEND_MESSAGE_V2) == 1
        finally:
            await stop_cluster(cluster)

    run(scenario())


def test_selector_send_raises_a_non_retriable_refusal_at_once() -> None:
    async def scenario() -> None:
        cluster = await start_cluster()
        a, _, _ = cluster.replicas
        try:
            async with AsyncProducer(cluster.namesrv.addr, producer_group="pg", client=_client()) as producer:
                await producer.send(Message(TOPIC, b"warm"), queue=MessageQueue(TOPIC, GROUP, 0))
                a.send_code, a.send_remark = ResponseCode.MESSAGE_ILLEGAL, "bad message"
                with pytest.raises(MQBrokerError, match="bad message"):
                    await producer.send(Message(TOPIC, b"x"), queue=MessageQueue(TOPIC, GROUP, 0))
                assert a.count(RequestCode.SEND_MESSAGE_V2) == 2  # one attempt, no retry
        finally:
            await stop_cluster(cluster)

    run(scenario())


def test_a_failed_selector_send_without_a_new_master_waits_then_fails_within_its_timeout() -> None:
    async def scenario() -> None:
        cluster = await start_cluster()
        a, b, c = cluster.replicas
        try:
            async with AsyncProducer(cluster.namesrv.addr, producer_group="pg", client=_client()) as producer:
                await producer.send(Message(TOPIC, b"warm"), queue=MessageQueue(TOPIC, GROUP, 0))
                await a.stop()
                cluster.publish({1: b, 2: c})  # replicas, no master: an election may come
                loop = asyncio.get_running_loop()
                began = loop.time()
                q0 = MessageQueue(TOPIC, GROUP, 0)
                with pytest.raises(MQClientError, match="has no master"):
                    await producer.send(Message(TOPIC, b"x"), queue=q0, timeout_ms=1500)
                assert 1.0 < loop.time() - began < 5.0  # waited for a master, up to the timeout
                assert not b.count(RequestCode.SEND_MESSAGE_V2) and not c.count(RequestCode.SEND_MESSAGE_V2)
        finally:
            await stop_cluster(cluster)

    run(scenario())


def test_a_pull_on_a_hung_master_watches_the_route_and_moves_to_the_new_master() -> None:
    async def scenario() -> None:
        cluster = await start_cluster()
        a, b, c = cluster.replicas
        consumer = ConsumerBase(
            cluster.namesrv.addr,
            consumer_group="cg",
            consumer_pull_timeout_ms=120_000,  # the pull must not end by timing out
            client=_client(),
        )
        mq = MessageQueue(TOPIC, GROUP, 0)
        try:
            await consumer.instance.update_topic_route(TOPIC)
            a.hang = True  # SIGSTOP

            async def elect() -> None:  # only the NameServer changes: nobody else refreshes
                while not a.count(RequestCode.PULL_MESSAGE):
                    await asyncio.sleep(0.05)
                cluster.publish({0: b, 2: c})

            election = asyncio.create_task(elect())
            result = await consumer.pull_once(mq, build_subscription(TOPIC, SUB_ALL), 0, 1, block=False)
            await election
            assert result.status is PullStatus.NO_NEW_MSG
            assert b.count(RequestCode.PULL_MESSAGE) == 1
        finally:
            await consumer.instance.close()
            await stop_cluster(cluster)

    run(scenario())
