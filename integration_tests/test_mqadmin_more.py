"""More mqadmin subcommands against a real NameServer and broker, one cluster for the module.

``queryMsgById -i id -g G -d clientId``: CONSUME_MESSAGE_DIRECTLY goes to the broker storing the
message, which hands it to the named rocketq push consumer; its listener runs on the message and
the printed ConsumeMessageDirectlyResult carries the listener's outcome (success, later, raised);
a POP push consumer answers the same way; a consumer without a listener (LitePullConsumer)
answers "not exist in this consumer".

The other subcommands: setConsumeMode, getConsumerConfig, skipAccumulatedMessage, exportMetadata,
exportConfigs, updateTopicList, updateSubGroupList, getControllerConfig (its own controller),
printMsgByQueue, sendMsgStatus and resetOffsetByTime of one queue, each output checked for content.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

from rocketq.client.admin_export import EXPORTED_BROKER_KEYS
from rocketq.client.consumer import LitePullConsumer, PopPushConsumer, PushConsumer
from rocketq.client.consumer.listener import ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus
from rocketq.client.launcher import broker_store_dir, spawn_controllers
from rocketq.client.model import Message, MessageExt
from rocketq.client.producer import Producer
from rocketq.client.remoting.vocabulary import MessageQueue
from rocketq.client.testing import (
    ServerProcess,
    create_topic,
    run_mqadmin,
    spawn_broker,
    spawn_namesrv,
    wait_for,
)

TOPIC = "mqadmin-more-t"
DIRECT_GROUP = "cg-direct"
CHECK_LATER = "please check the result later."


class Cluster(NamedTuple):
    ns: ServerProcess
    broker: ServerProcess
    store_dir: Path


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    tmp: Path = tmp_path_factory.mktemp("mqadmin-more")
    with spawn_namesrv(tmp / "ns") as ns, spawn_broker(tmp / "b", ns.addr) as b:
        create_topic(ns.addr, TOPIC, 2)
        yield Cluster(ns, b, broker_store_dir(tmp / "b"))


def mqadmin_ok(*args: str) -> str:
    done = run_mqadmin(*args)
    assert done.returncode == 0, f"mqadmin {' '.join(args)}: {done.stderr}"
    return done.stdout


def test_query_msg_by_id_has_a_push_consumer_consume_the_message(
    cluster: Cluster,
) -> None:
    ns = cluster.ns
    with Producer(ns.addr, producer_group="pg-direct") as producer:
        sent = {b: producer.send(Message(TOPIC, b.encode(), tags="direct")) for b in ("ok", "later", "boom")}
    seen: list[str] = []
    lock = threading.Lock()

    def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus:
        body = msgs[0].body.decode()
        with lock:
            seen.append(f"{body}@{ctx.message_queue.broker_name}")
        if body == "boom":
            raise ValueError("listener refuses boom")
        if body == "later":
            return ConsumeConcurrentlyStatus.RECONSUME_LATER
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(ns.addr, consumer_group=DIRECT_GROUP)
    consumer.subscribe(TOPIC, "nothing-matches")  # the normal flow delivers none of them
    consumer.register_message_listener(listener)
    consumer.start()
    try:
        probe = ("consumerConnection", "-n", ns.addr, "-g", DIRECT_GROUP)
        wait_for(lambda: run_mqadmin(*probe).returncode == 0, "the consumer online", 30)
        client_id = consumer.async_consumer.instance.client_id
        done = {
            body: run_mqadmin(
                "queryMsgById", "-n", ns.addr, "-i", result.offset_msg_id, "-g", DIRECT_GROUP, "-d", client_id
            )
            for body, result in sent.items()
        }
        unique = run_mqadmin(
            "queryMsgById",
            "-n",
            ns.addr,
            "-t",
            TOPIC,
            "-i",
            sent["ok"].msg_id,
            "-g",
            DIRECT_GROUP,
            "-d",
            client_id,
        )
        offline = run_mqadmin(
            "queryMsgById",
            "-n",
            ns.addr,
            "-i",
            sent["ok"].offset_msg_id,
            "-g",
            DIRECT_GROUP,
            "-d",
            "x@nobody",
        )
        half = run_mqadmin("queryMsgById", "-n", ns.addr, "-i", sent["ok"].offset_msg_id, "-g", DIRECT_GROUP)
    finally:
        consumer.shutdown()
    for body, expected in (("ok", "CR_SUCCESS"), ("later", "CR_LATER"), ("boom", "CR_THROW_EXCEPTION")):
        assert done[body].returncode == 0, done[body].stderr
        assert re.fullmatch(
            rf"ConsumeMessageDirectlyResult \[order=false, autoCommit=true, consumeResult={expected}, "
            r"remark=(.*), spentTimeMills=\d+\]\n",
            done[body].stdout,
        ), done[body].stdout
    assert "remark=ValueError: listener refuses boom" in done["boom"].stdout
    assert "remark=None" in done["ok"].stdout
    assert unique.returncode == 0 and "consumeResult=CR_SUCCESS" in unique.stdout, unique.stderr
    assert sorted(seen) == sorted(["ok@broker-a", "later@broker-a", "boom@broker-a", "ok@broker-a"]), seen
    assert (
        offline.returncode == 1 and f"The Consumer <{DIRECT_GROUP}> <x@nobody> not online" in offline.stderr
    )
    assert half.returncode != 0 and "-d clientId" in half.stderr, half.stderr


def test_set_consume_mode_stores_the_mode_on_the_broker(cluster: Cluster) -> None:
    ns, broker = cluster.ns, cluster.broker
    args = ("setConsumeMode", "-n", ns.addr, "-t", TOPIC, "-g", "cg-mode", "-m", "POP", "-q", "2")
    by_broker = mqadmin_ok(*args, "-b", broker.addr)
    by_cluster = mqadmin_ok(*args, "-c", "DefaultCluster")
    expected = (
        f"set consume mode to {broker.addr} success.\n"
        f"topic[{TOPIC}] group[cg-mode] consume mode[POP] popShareQueueNum[2]\n"
    )
    assert by_broker == expected and by_cluster == expected, (by_broker, by_cluster)
    stored = json.loads((cluster.store_dir / "config" / "messageRequestMode.json").read_text())
    assert stored["messageRequestModeMap"][TOPIC]["cg-mode"]["mode"] == "POP"
    assert stored["messageRequestModeMap"][TOPIC]["cg-mode"]["popShareQueueNum"] == 2
    bad = run_mqadmin(
        "setConsumeMode", "-n", ns.addr, "-t", TOPIC, "-g", "cg-mode", "-m", "PUSH", "-b", broker.addr
    )
    assert bad.returncode == 2 and "bad mode 'PUSH': PULL or POP" in bad.stderr and "usage:" in bad.stderr
    neither = run_mqadmin("setConsumeMode", "-n", ns.addr, "-t", TOPIC, "-g", "cg-mode", "-m", "PULL")
    assert neither.returncode == 1 and "-b brokerAddr" in neither.stderr


def test_get_consumer_config_prints_the_group_per_broker(
    cluster: Cluster,
) -> None:
    ns, broker = cluster.ns, cluster.broker
    mqadmin_ok("updateSubGroup", "-n", ns.addr, "-b", broker.addr, "-g", "cg-config", "-r", "5", "-q", "3")
    lines = mqadmin_ok("getConsumerConfig", "-n", ns.addr, "-g", "cg-config").splitlines()
    assert lines[0] == "=" * 29 + "DefaultCluster:broker-a" + "=" * 29
    assert f"{'groupName':<40}=  cg-config" in lines
    assert f"{'retryMaxTimes':<40}=  5" in lines and f"{'retryQueueNums':<40}=  3" in lines
    assert f"{'consumeEnable':<40}=  true" in lines
    missing = run_mqadmin("getConsumerConfig", "-n", ns.addr, "-g", "cg-no-such-group")
    assert (
        missing.returncode == 1 and "no broker has the subscription group cg-no-such-group" in missing.stderr
    )


def test_skip_accumulated_message_moves_the_group_to_the_end(
    cluster: Cluster,
) -> None:
    ns = cluster.ns
    with Producer(ns.addr, producer_group="pg-skip") as producer:
        for i in range(6):
            producer.send(Message(TOPIC, f"skip-{i}".encode()))
    before = mqadmin_ok("consumerProgress", "-n", ns.addr, "-g", "cg-skip", "-t", TOPIC)
    lines = mqadmin_ok("skipAccumulatedMessage", "-n", ns.addr, "-g", "cg-skip", "-t", TOPIC).splitlines()
    assert lines[0].split() == ["#brokerName", "#queueId", "#offset"]
    skipped = {int(q): int(o) for _, q, o in (line.split() for line in lines[1:])}
    assert sorted(skipped) == [0, 1] and sum(skipped.values()) >= 6, lines
    progress = mqadmin_ok("consumerProgress", "-n", ns.addr, "-g", "cg-skip", "-t", TOPIC)
    rows = [line.split() for line in progress.splitlines() if line.startswith(TOPIC)]
    assert rows and all(r[3] == r[4] and r[5] == "0" for r in rows), (before, progress)


def test_export_metadata_writes_topics_and_groups(cluster: Cluster, tmp_path: Path) -> None:
    ns, broker = cluster.ns, cluster.broker
    mqadmin_ok("updateSubGroup", "-n", ns.addr, "-b", broker.addr, "-g", "cg-export")
    create_topic(ns.addr, "%RETRY%cg-export", 1)  # as a consumer of the group would have it
    printed = mqadmin_ok("exportMetadata", "-n", ns.addr, "-c", "DefaultCluster", "-f", str(tmp_path))
    assert printed == f"export {tmp_path / 'metadata.json'} success\n"
    doc = json.loads((tmp_path / "metadata.json").read_text())
    assert doc["topicConfigTable"][TOPIC]["writeQueueNums"] == 2
    assert (
        "cg-export" in doc["subscriptionGroupTable"] and "TOOLS_CONSUMER" not in doc["subscriptionGroupTable"]
    )
    assert not [t for t in doc["topicConfigTable"] if t.startswith(("%RETRY%", "rmq_sys_", "TBW102"))]
    assert isinstance(doc["exportTime"], int)
    mqadmin_ok("exportMetadata", "-n", ns.addr, "-b", broker.addr, "-f", str(tmp_path), "-t", "-s")
    topics = json.loads((tmp_path / "topic.json").read_text())
    assert "subscriptionGroupTable" not in topics and TOPIC in topics["topicConfigTable"]
    assert "%RETRY%cg-export" in topics["topicConfigTable"], sorted(topics["topicConfigTable"])
    neither = run_mqadmin("exportMetadata", "-n", ns.addr)
    assert (
        neither.returncode == 2
        and "one of the arguments -c/--clusterName -b/--brokerAddr is required" in neither.stderr
    )


def test_update_topic_list_and_sub_group_list_from_files(cluster: Cluster, tmp_path: Path) -> None:
    ns, broker = cluster.ns, cluster.broker
    topics = tmp_path / "topics.json"
    topics.write_text(
        json.dumps(
            [
                {"topicName": "batch-t1", "readQueueNums": 3, "writeQueueNums": 3, "perm": 6},
                {"topicName": "batch-t2", "readQueueNums": 1, "writeQueueNums": 1, "perm": 4,
                 "attributes": {"message.type": "FIFO"}},
            ]
        )
    )  # fmt: skip
    printed = mqadmin_ok("updateTopicList", "-n", ns.addr, "-c", "DefaultCluster", "-f", str(topics))
    assert printed == f"submit batch of topic config to {broker.addr} success, {CHECK_LATER}\n"
    route = json.loads(mqadmin_ok("topicRoute", "-n", ns.addr, "-t", "batch-t2"))
    assert [(q["writeQueueNums"], q["perm"]) for q in route["queueDatas"]] == [(1, 4)], route
    route = json.loads(mqadmin_ok("topicRoute", "-n", ns.addr, "-t", "batch-t1"))
    assert [(q["writeQueueNums"], q["perm"]) for q in route["queueDatas"]] == [(3, 6)], route
    groups = tmp_path / "groups.json"
    groups.write_text(json.dumps([{"groupName": "batch-g1", "retryMaxTimes": 7}, {"groupName": "batch-g2"}]))
    printed = mqadmin_ok("updateSubGroupList", "-n", ns.addr, "-b", broker.addr, "-f", str(groups))
    assert printed == f"submit batch of group config to {broker.addr} success, {CHECK_LATER}\n"
    config = mqadmin_ok("getConsumerConfig", "-n", ns.addr, "-g", "batch-g1").splitlines()
    assert f"{'retryMaxTimes':<40}=  7" in config
    assert mqadmin_ok("getConsumerConfig", "-n", ns.addr, "-g", "batch-g2")
    missing = run_mqadmin(
        "updateTopicList", "-n", ns.addr, "-b", broker.addr, "-f", str(tmp_path / "nope.json")
    )
    assert missing.returncode == 1 and "does not exist" in missing.stderr
    groups.write_text('[{"retryMaxTimes": 1}]')
    unnamed = run_mqadmin("updateSubGroupList", "-n", ns.addr, "-b", broker.addr, "-f", str(groups))
    assert unnamed.returncode == 1 and "each with 'groupName'" in unnamed.stderr


def test_get_controller_config_prints_each_controller(tmp_path: Path) -> None:
    (controller,) = spawn_controllers(tmp_path, 1)
    try:
        lines = mqadmin_ok("getControllerConfig", "-a", controller.addr).splitlines()
    finally:
        controller.kill9()
    assert lines[0] == f"============{controller.addr}============"
    assert f"{'controllerDLegerSelfId':<50}=  n0" in lines, lines
    config = {key.strip(): value for key, _, value in (line.partition("=  ") for line in lines[1:])}
    assert config["controllerStorePath"].startswith(str(tmp_path)), config
    unknown = run_mqadmin("getControllerConfig", "-a", "127.0.0.1:1")
    assert unknown.returncode == 1 and "127.0.0.1:1" in unknown.stderr


def test_print_msg_by_queue_prints_one_queue_and_counts_tags(cluster: Cluster) -> None:
    ns = cluster.ns
    create_topic(ns.addr, "print-by-queue-t", 2)
    queue = MessageQueue("print-by-queue-t", "broker-a", 1)
    with Producer(ns.addr, producer_group="pg-print-queue") as producer:
        for body, tag in (("a1", "TagA"), ("b1", "TagB"), ("a2", "TagA")):
            producer.send(Message("print-by-queue-t", body.encode(), tags=tag), queue=queue)
        producer.send(
            Message("print-by-queue-t", b"other queue", tags="TagC"),
            queue=MessageQueue("print-by-queue-t", "broker-a", 0),
        )
    args = ("printMsgByQueue", "-n", ns.addr, "-t", "print-by-queue-t", "-a", "broker-a", "-i", "1")
    assert mqadmin_ok(*args) == ""  # Java prints only what -p / -f ask for
    lines = mqadmin_ok(*args, "-p", "true", "-d", "true", "-f", "true").splitlines()
    bodies = [line.rsplit(" BODY: ", 1)[1] for line in lines if line.startswith("MSGID: ")]
    assert bodies == ["a1", "b1", "a2"], lines
    assert lines[-2:] == [f"Tag: {'TagA':<30} Count: 2", f"Tag: {'TagB':<30} Count: 1"]
    no_body = mqadmin_ok(*args, "-p", "true", "-s", "TagB")
    assert no_body.count("MSGID: ") == 1 and no_body.endswith(" BODY: NOT PRINT BODY\n"), no_body


def test_send_msg_status_times_sends_to_the_brokers_own_topic(cluster: Cluster) -> None:
    ns = cluster.ns
    lines = mqadmin_ok("sendMsgStatus", "-n", ns.addr, "-b", "broker-a", "-s", "64", "-c", "3").splitlines()
    assert len(lines) == 3, lines
    pattern = (
        r"rt=\d+ms, SendResult=SendResult \[sendStatus=SEND_OK, msgId=[0-9A-F]{32}, "
        r"offsetMsgId=[0-9A-F]{32}, "
        r"messageQueue=MessageQueue \[topic=broker-a, brokerName=broker-a, queueId=0\], queueOffset=(\d+)\]"
    )
    offsets = [int(m.group(1)) for m in (re.fullmatch(pattern, line) for line in lines) if m]
    assert len(offsets) == 3 and offsets == list(range(offsets[0], offsets[0] + 3)), lines
    bad = run_mqadmin("sendMsgStatus", "-n", ns.addr, "-b", "broker-a", "-s", "0")
    assert bad.returncode == 1 and "messageSize must be >= 1" in bad.stderr


def test_export_configs_writes_the_masters_settings(cluster: Cluster, tmp_path: Path) -> None:
    ns = cluster.ns
    printed = mqadmin_ok("exportConfigs", "-n", ns.addr, "-c", "DefaultCluster", "-f", str(tmp_path))
    assert printed == f"export {tmp_path / 'configs.json'} success\n"
    doc = json.loads((tmp_path / "configs.json").read_text())
    assert doc["clusterScale"] == {"namesrvSize": 1, "masterBrokerSize": 1, "slaveBrokerSize": 0}
    broker = doc["brokerConfigs"]["broker-a"]
    assert broker["brokerClusterName"] == "DefaultCluster" and broker["brokerId"] == "0", broker
    assert set(broker) <= set(EXPORTED_BROKER_KEYS) and "flushDiskType" in broker, broker
    unknown = run_mqadmin("exportConfigs", "-n", ns.addr, "-c", "NoSuchCluster", "-f", str(tmp_path))
    assert unknown.returncode == 1 and "the cluster NoSuchCluster does not exist" in unknown.stderr


def test_reset_offset_by_time_of_one_queue(cluster: Cluster) -> None:
    ns, broker = cluster.ns, cluster.broker
    create_topic(ns.addr, "reset-queue-t", 2)
    with Producer(ns.addr, producer_group="pg-reset-queue") as producer:
        for i in range(4):
            producer.send(
                Message("reset-queue-t", f"r{i}".encode()), queue=MessageQueue("reset-queue-t", "broker-a", 1)
            )
    base = ("resetOffsetByTime", "-n", ns.addr, "-g", "cg-reset-queue", "-t", "reset-queue-t", "-s", "now")
    lines = mqadmin_ok(*base, "-b", broker.addr, "-q", "1", "-o", "3").splitlines()
    assert lines[0].startswith(
        "start reset consumer offset by specified, group[cg-reset-queue], topic[reset-queue-t], queueId[1]"
    )
    assert lines[1] == "reset consumer offset to 3"
    progress = mqadmin_ok("consumerProgress", "-n", ns.addr, "-g", "cg-reset-queue", "-t", "reset-queue-t")
    row = next(
        line.split()
        for line in progress.splitlines()
        if line.startswith("reset-queue-t") and line.split()[2] == "1"
    )
    assert row[3:6] == ["4", "3", "1"], progress
    by_time = mqadmin_ok(*base[:-1], "0", "-b", broker.addr, "-q", "1").splitlines()
    assert by_time[1] == "reset consumer offset to 0", by_time
    half = run_mqadmin(*base, "-q", "1")
    assert half.returncode == 1 and "give both -b brokerAddr and -q queueId" in half.stderr


def test_query_msg_by_id_to_a_consumer_without_a_listener(cluster: Cluster) -> None:
    ns = cluster.ns
    with Producer(ns.addr, producer_group="pg-direct-lite") as producer:
        sent = producer.send(Message(TOPIC, b"for a lite pull consumer"))
    consumer = LitePullConsumer(ns.addr, consumer_group="cg-direct-lite")
    consumer.subscribe(TOPIC, "*")
    consumer.start()
    try:
        probe = ("consumerConnection", "-n", ns.addr, "-g", "cg-direct-lite")
        wait_for(lambda: run_mqadmin(*probe).returncode == 0, "the consumer online", 30)
        client_id = consumer.async_consumer.instance.client_id
        args = ("-i", sent.offset_msg_id, "-g", "cg-direct-lite", "-d", client_id)
        done = run_mqadmin("queryMsgById", "-n", ns.addr, *args)
    finally:
        consumer.shutdown()
    assert done.returncode == 1, done.stdout
    assert "The Consumer Group <cg-direct-lite> not exist in this consumer" in done.stderr, done.stderr


def test_query_msg_by_id_has_a_pop_push_consumer_consume_the_message(cluster: Cluster) -> None:
    ns = cluster.ns
    with Producer(ns.addr, producer_group="pg-direct-pop") as producer:
        sent = producer.send(Message(TOPIC, b"for a pop push consumer"))
    seen: list[bytes] = []

    def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus:
        seen.extend(m.body for m in msgs)
        return ConsumeConcurrentlyStatus.RECONSUME_LATER

    # a tag nothing carries: the POP flow itself delivers none of the topic's messages
    consumer = PopPushConsumer(ns.addr, "cg-direct-pop", {TOPIC: "nothing-matches"}, await_duration_s=1.0)
    consumer.register_message_listener_concurrently(listener)
    consumer.start()
    try:
        probe = ("consumerStatus", "-n", ns.addr, "-g", "cg-direct-pop")
        wait_for(lambda: run_mqadmin(*probe).returncode == 0, "the consumer online", 30)
        client_id = run_mqadmin(*probe).stdout.split()[1]
        args = ("-i", sent.offset_msg_id, "-g", "cg-direct-pop", "-d", client_id)
        done = run_mqadmin("queryMsgById", "-n", ns.addr, *args)
    finally:
        consumer.shutdown()
    assert done.returncode == 0, done.stderr
    assert "order=false, autoCommit=true, consumeResult=CR_LATER" in done.stdout, done.stdout
    assert seen == [b"for a pop push consumer"]
