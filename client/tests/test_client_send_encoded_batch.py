"""The producer's encoded-batch entry points against a real NameServer and broker.

``send_encoded_batch`` (plain batches, the at-least-once Spark sink's path) and
``send_half_batch`` of a ``PreparedHalfBatch`` (the exactly-once sink's path) own the header,
the route lookup with ``TBW102`` auto-creation and the typed errors.  The last test checks the
producer's failure text after a timeout without any server (only the brokers actually tried).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from rocketq.client.api import BlockingMQClientAPI
from rocketq.client.errors import MQBrokerError, MQClientError, RemotingTimeoutError
from rocketq.client.model import LocalTransactionState, Message, PullStatus, SendStatus
from rocketq.client.producer import AsyncProducer, PreparedHalfBatch, Producer, TransactionProducer
from rocketq.client.producer.fault import TopicPublishInfo
from rocketq.client.remoting.batch import decode_batch, encode_batch
from rocketq.client.remoting.message import iter_stored_messages
from rocketq.client.remoting.route import BrokerData, QueueData, TopicRouteData
from rocketq.client.remoting.vocabulary import MessageQueue, ResponseCode
from rocketq.client.testing import LocalCluster, local_cluster, pull_header, wait_value


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    conf = {"autoCreateTopicEnable": True}
    with local_cluster(tmp_path_factory.mktemp("encoded-batch"), broker_conf=conf) as c:
        yield c


def entries(tag: str, n: int) -> bytes:
    props = [{"KEYS": f"k{i}", "UNIQ_KEY": f"U{tag}{i:04d}"} for i in range(n)]
    return encode_batch([(i, f"{tag}-{i}".encode(), props[i]) for i in range(n)])


def pull_all(api: BlockingMQClientAPI, addr: str, topic: str, queue_id: int) -> list[tuple[bytes, str]]:
    """(body, UNIQ_KEY) of every message of one queue, waiting up to 10 s for the first."""
    header = pull_header(topic, queue_id, 0, group="encoded-reader", max_msg_nums=64)

    def found() -> list[tuple[bytes, str]] | None:
        res = api.pull_message(addr, header, 3000)  # MQBrokerError: the topic may not be dispatched yet
        if res.status is not PullStatus.FOUND:
            return None
        return [(m.body, m.properties["UNIQ_KEY"]) for m in iter_stored_messages(res.body)]

    return wait_value(
        found, f"a message in {topic}:{queue_id}", 10, interval_s=0.1, retry_on=(MQBrokerError,)
    )


def test_send_encoded_batch_stores_the_entries_as_encoded(cluster: LocalCluster) -> None:
    with (
        Producer(cluster.namesrv_addr, producer_group="encoded-pg") as producer,
        BlockingMQClientAPI(cluster.namesrv_addr) as api,
    ):
        (mq, *_) = producer.fetch_publish_message_queues("EncodedNew")  # auto-created: TBW102 template
        result = producer.send_encoded_batch(mq, entries("a", 3), count=3, msg_id="Ua0000,Ua0001,Ua0002")
        assert result.send_status is SendStatus.SEND_OK and result.message_queue == mq
        assert result.msg_id == "Ua0000,Ua0001,Ua0002" and len(result.offset_msg_id.split(",")) == 3
        stored = pull_all(api, cluster.broker_addr, "EncodedNew", mq.queue_id)
    assert stored == [(b"a-0", "Ua0000"), (b"a-1", "Ua0001"), (b"a-2", "Ua0002")]


def test_send_encoded_batch_errors_are_typed(cluster: LocalCluster) -> None:
    with Producer(cluster.namesrv_addr, producer_group="encoded-pg2") as producer:
        (mq, *_) = producer.fetch_publish_message_queues("EncodedErrors")
        with pytest.raises(MQBrokerError) as refused:
            producer.send_encoded_batch(mq, b"\x00\x00\x00\x05junk", count=1)
        assert refused.value.code == ResponseCode.MESSAGE_ILLEGAL and "malformed" in refused.value.remark
        assert not refused.value.retriable
        with pytest.raises(MQClientError) as empty:
            producer.send_encoded_batch(mq, b"", count=0)
        assert empty.value.code == ResponseCode.MESSAGE_ILLEGAL
        with pytest.raises(MQClientError, match="max_message_size"):
            producer.send_encoded_batch(mq, bytes(producer.config.max_message_size + 1), count=1)
        with pytest.raises(MQClientError, match="reserved"):
            producer.send_encoded_batch(MessageQueue("TBW102", mq.broker_name, 0), entries("t", 1), count=1)


def test_async_send_encoded_batch_needs_a_started_producer() -> None:
    async def body() -> None:
        producer = AsyncProducer("127.0.0.1:1", producer_group="never-started")
        with pytest.raises(MQClientError, match="not started"):
            await producer.send_encoded_batch(MessageQueue("T", "broker-a", 0), entries("n", 1), count=1)

    asyncio.run(body())


def test_half_batch_to_a_new_topic_is_auto_created(cluster: LocalCluster) -> None:
    """The exactly-once sink's send on a topic that does not exist yet (autoCreateTopicEnable)."""
    with (
        TransactionProducer(
            cluster.namesrv_addr,
            producer_group="half-new-pg",
            check_listener=lambda m: LocalTransactionState.UNKNOW,
        ) as producer,
        BlockingMQClientAPI(cluster.namesrv_addr) as api,
    ):
        mq = MessageQueue("HalfNewTopic", cluster.broker_name, 1)  # no route: the TBW102 template's queue
        prepared = PreparedHalfBatch.of_encoded(entries("h", 2), producer.config.producer_group)
        assert [m.properties["PGROUP"] for m in decode_batch(prepared.body)] == ["half-new-pg"] * 2
        handle = producer.send_half_batch(mq, prepared)
        assert (handle.ranged, handle.count, handle.transaction_ids) == (True, 2, ("Uh0000", "Uh0001"))
        producer.end_transaction_batch([handle], LocalTransactionState.COMMIT_MESSAGE)
        stored = pull_all(api, cluster.broker_addr, "HalfNewTopic", 1)
    assert stored == [(b"h-0", "Uh0000"), (b"h-1", "Uh0001")]


def test_a_send_timeout_names_only_the_brokers_tried() -> None:
    """broker-a answers after the whole timeout: broker-b is chosen next but never tried."""
    route = TopicRouteData(
        [QueueData("broker-a", 1, 1, 6), QueueData("broker-b", 1, 1, 6)],
        [BrokerData("c", "broker-a", {0: "127.0.0.1:1"}), BrokerData("c", "broker-b", {0: "127.0.0.1:2"})],
    )
    tried: list[str] = []

    async def slow_kernel(msg: Message, mq: MessageQueue, timeout_ms: int, **_: object) -> None:
        tried.append(mq.broker_name)
        await asyncio.sleep(timeout_ms / 1000 + 0.05)
        raise RemotingTimeoutError(f"no answer from {mq.broker_name}")

    async def body() -> MQClientError:
        producer = AsyncProducer("127.0.0.1:1", producer_group="timeout-pg", retry_times_when_send_failed=2)
        producer._running = True  # no server: the route is set below and the kernel replaced
        producer.publish_info["T"] = TopicPublishInfo.from_route("T", route, start=0)
        producer._send_kernel = slow_kernel  # type: ignore[method-assign]
        with pytest.raises(MQClientError) as info:
            await producer.send(Message("T", b"x"), timeout_ms=100)
        return info.value

    error = asyncio.run(body())
    assert tried == ["broker-a"]
    assert "Send [1] times" in str(error) and "BrokersSent: ['broker-a']" in str(error)
