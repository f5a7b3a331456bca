"""Unit tests of the broker's managers: topics (TBW102 auto-creation), offsets, groups, clients,
queue locks and the long-polling hold service."""

from __future__ import annotations

import asyncio
import threading
from typing import cast

from rocketq.broker.client_manager import (
    ClientChannelInfo,
    ConsumerData,
    ConsumerManager,
    ProducerManager,
    SubscriptionData,
    parse_heartbeat,
)
from rocketq.broker.config import BrokerConfig
from rocketq.broker.long_polling import PullRequestHoldService
from rocketq.broker.offset_manager import ConsumerOffsetManager
from rocketq.broker.rebalance_lock import MessageQueue, RebalanceLockManager
from rocketq.broker.subscription_manager import SubscriptionGroupConfig, SubscriptionGroupManager
from rocketq.broker.topic_manager import TopicConfig, TopicConfigManager, is_system_topic, validate_topic
from rocketq.client.remoting.vocabulary import Perm
from rocketq.server import Channel


def _topics(**kw: object) -> TopicConfigManager:
    return TopicConfigManager(BrokerConfig(broker_name="b", **kw))  # type: ignore[arg-type]


def test_tbw102_template_and_auto_create_is_once_and_consistent() -> None:
    changes: list[TopicConfig | None] = []
    tm = _topics()
    tm.add_listener(changes.append)
    tbw = tm.select("TBW102")
    assert tbw is not None and tbw.write_queue_nums == 8 and tbw.perm & Perm.INHERIT
    first = tm.create_in_send_process("NewTopic", "TBW102", 4)
    assert first is not None and first.write_queue_nums == 4 and first.read_queue_nums == 4
    assert not first.perm & Perm.INHERIT
    # a concurrent first send from another producer asking for 16 queues gets the same config
    second = tm.create_in_send_process("NewTopic", "TBW102", 16)
    assert second == first
    assert len(changes) == 1
    # the queue count is capped by the template's write queues
    big = tm.create_in_send_process("BigTopic", "TBW102", 64)
    assert big is not None and big.write_queue_nums == 8


def test_auto_create_disabled() -> None:
    tm = _topics(auto_create_topic_enable=False)
    assert tm.select("TBW102") is None
    assert tm.create_in_send_process("NewTopic", "TBW102", 4) is None
    # a normal topic is not a template
    tm.update(TopicConfig(topic_name="Plain"))
    assert tm.create_in_send_process("Other", "Plain", 4) is None


def test_topic_validation() -> None:
    assert validate_topic("Topic_1-a%b|c") is None
    assert validate_topic("") is not None
    assert validate_topic("bad topic") is not None
    assert validate_topic("x" * 128) is not None and "127" in str(validate_topic("x" * 128))
    assert is_system_topic("TBW102") and not is_system_topic("T1")


def test_topic_table_round_trip_and_versions() -> None:
    tm = _topics()
    v0 = tm.data_version.counter
    assert tm.update(TopicConfig(topic_name="T1", read_queue_nums=2, write_queue_nums=2))
    assert not tm.update(TopicConfig(topic_name="T1", read_queue_nums=2, write_queue_nums=2))
    assert tm.data_version.counter == v0 + 1
    doc = tm.encode()
    assert doc["topicConfigTable"]["T1"]["readQueueNums"] == 2
    tm2 = _topics()
    tm2.load(doc)
    assert tm2.select("T1") == tm.select("T1")
    assert tm2.delete("T1") and tm2.select("T1") is None


def test_offsets() -> None:
    om = ConsumerOffsetManager()
    assert om.query_offset("g", "t", 0) == -1
    om.commit_offset("g", "t", 0, 5)
    om.commit_offset("g", "t", 1, -1)  # ignored
    assert om.query_offset("g", "t", 0) == 5 and om.query_offset("g", "t", 1) == -1
    assert om.dirty
    doc = om.encode()
    assert doc == {"offsetTable": {"t@g": {"0": 5}}}
    om2 = ConsumerOffsetManager()
    om2.load({"offsetTable": {"t@g": {0: 7}}})
    assert om2.query_offset("g", "t", 0) == 7
    assert om2.which_topics_by_consumer("g") == {"t"} and om2.which_groups_by_topic("t") == {"g"}
    om2.reset_offsets("g", "t", {0: 1, 1: 2})
    assert om2.query_offsets("g", "t") == {0: 1, 1: 2}
    om2.remove_topic("t")
    assert om2.query_offset("g", "t", 0) == -1


def test_subscription_groups() -> None:
    saved: list[dict[str, object]] = []
    gm = SubscriptionGroupManager(auto_create=True, persist=saved.append)
    assert gm.find("cg") is not None and saved
    strict = SubscriptionGroupManager(auto_create=False)
    assert strict.find("cg") is None
    strict.update(SubscriptionGroupConfig(group_name="cg", retry_queue_nums=2))
    found = strict.find("cg")
    assert found is not None and found.retry_queue_nums == 2
    again = SubscriptionGroupManager(auto_create=False)
    again.load(strict.encode())
    assert again.get("cg") == found


HEARTBEAT = (
    b'{"clientID":"10.0.0.5@12345#88","consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET",'
    b'"consumeType":"CONSUME_PASSIVELY","groupName":"cg1","messageModel":"CLUSTERING","unitMode":false,'
    b'"subscriptionDataSet":[{"classFilterMode":false,"codeSet":[2598919],"expressionType":"TAG",'
    b'"subString":"TagA","subVersion":1700000000000,"tagsSet":["TagA"],"topic":"T1"}]}],'
    b'"producerDataSet":[{"groupName":"pg1"},{"groupName":"CLIENT_INNER_PRODUCER"}]}'
)


def test_heartbeat_parse() -> None:
    hb = parse_heartbeat(HEARTBEAT)
    assert hb.client_id == "10.0.0.5@12345#88"
    assert hb.producer_groups == ("pg1", "CLIENT_INNER_PRODUCER")
    sub = hb.consumers[0].subscriptions[0]
    assert sub.code_set == frozenset({2598919}) and sub.tags_set == frozenset({"TagA"})


def test_consumer_membership_notifies_and_expires() -> None:
    notified: list[tuple[str, int]] = []
    cm = ConsumerManager(
        channel_expired_timeout_ms=1000, on_ids_changed=lambda g, chs: notified.append((g, len(chs)))
    )
    data = ConsumerData(group_name="cg", subscriptions=(SubscriptionData(topic="T1", sub_version=1),))
    ch1, ch2 = cast(Channel, object()), cast(Channel, object())
    assert cm.register(data, ClientChannelInfo(channel=ch1, client_id="c1", last_update_ms=0))
    assert cm.register(data, ClientChannelInfo(channel=ch2, client_id="c2", last_update_ms=500))
    assert notified == [("cg", 1), ("cg", 2)]
    # a repeated heartbeat changes nothing and notifies nobody
    assert not cm.register(data, ClientChannelInfo(channel=ch2, client_id="c2", last_update_ms=600))
    info = cm.get("cg")
    assert info is not None and info.client_ids() == ["c1", "c2"]
    assert cm.find_subscription("cg", "T1") is not None
    assert cm.scan_not_active(now_ms=1200) == [("cg", "c1")]
    assert notified[-1] == ("cg", 1)
    assert cm.channel_closed(ch2) == ["cg"]
    assert cm.get("cg") is None


def test_producer_manager() -> None:
    pm = ProducerManager(channel_expired_timeout_ms=1000)
    ch = cast(Channel, object())
    pm.register("pg", ClientChannelInfo(channel=ch, client_id="p1", last_update_ms=0))
    assert pm.channel_count() == 1
    assert pm.scan_not_active(now_ms=5000) == 1 and pm.groups() == []


def test_rebalance_locks_expire() -> None:
    lm = RebalanceLockManager(max_live_time_ms=60_000)
    mqs = [MessageQueue("T", "b", 0), MessageQueue("T", "b", 1)]
    assert lm.try_lock_batch("g", mqs, "c1", now_ms=0) == set(mqs)
    assert lm.try_lock_batch("g", mqs, "c2", now_ms=1000) == set()
    assert lm.try_lock_batch("g", mqs[:1], "c1", now_ms=50_000) == {mqs[0]}  # renewal
    assert lm.try_lock_batch("g", mqs, "c2", now_ms=70_000) == {mqs[1]}  # mq1 expired, mq0 renewed
    lm.unlock_batch("g", mqs, "c1")
    assert lm.lock_owner("g", mqs[0], now_ms=70_001) is None
    assert lm.is_locked("g", mqs[1], "c2", now_ms=70_001)


def test_hold_service_wakes_on_arrival_timeout_and_bound() -> None:
    async def run() -> None:
        loop = asyncio.get_running_loop()
        hold = PullRequestHoldService(loop, max_suspended=2)
        woken = hold.hold("T", 0, 5, 10_000, lambda: 5)
        timed = hold.hold("T", 1, 0, 10, lambda: 0)
        assert woken is not None and timed is not None
        assert hold.hold("T", 2, 0, 10, lambda: 0) is None  # bounded
        # the reput thread reports the arrival of offset 5 (new max offset 6)
        threading.Thread(target=hold.arrival_listener, args=("T", 0, 6)).start()
        assert await asyncio.wait_for(woken, 5) is True
        assert await asyncio.wait_for(timed, 5) is False
        assert hold.held_count == 0
        # data that arrived before registration wakes at once
        early = hold.hold("T", 0, 3, 10_000, lambda: 6)
        assert early is not None and early.done() and early.result() is True
        late = hold.hold("T", 0, 6, 10_000, lambda: 6)
        assert late is not None
        hold.shutdown()
        assert await late is False
        assert hold.hold("T", 0, 0, 10, lambda: 0) is None

    asyncio.run(run())
