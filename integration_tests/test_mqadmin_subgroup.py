"""``mqadmin updateSubGroup`` / ``deleteSubGroup`` against a real NameServer and broker: the
settings written change what consumers of the group see.

* ``-r retryMaxTimes``: with 0 the first CONSUMER_SEND_MSG_BACK of a message puts it in the
  group's DLQ; with 16 it goes to the retry topic instead (the DLQ keeps its one message), and
  ``-q retryQueueNums`` sizes that retry topic.
* ``-s consumeEnable false``: a pull of the group is refused with Java's NO_PERMISSION answer.
* ``-i brokerId``: a pull answered by the master suggests that broker id for the next pull
  (the broker runs with ``slaveReadEnable``).
* ``deleteSubGroup`` removes the config: the next pull is served again (the broker re-creates
  the group with the defaults, ``autoCreateSubscriptionGroup``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketq.client.admin import Admin
from rocketq.client.api import BlockingMQClientAPI
from rocketq.client.errors import MQBrokerError
from rocketq.client.model import Message
from rocketq.client.producer import Producer
from rocketq.client.remoting.codes import ResponseCode
from rocketq.client.testing import (
    LocalCluster,
    create_topic,
    local_cluster,
    pull_header,
    pull_queue,
    run_mqadmin,
)

TOPIC, GROUP = "subgroup-t", "subgroup-g"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with local_cluster(tmp_path, broker_conf={"slaveReadEnable": "true"}) as c:
        create_topic(c.namesrv_addr, TOPIC, 1)
        yield c


def mqadmin_ok(*args: str) -> str:
    done = run_mqadmin(*args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def send_back_first(api: BlockingMQClientAPI, addr: str, offset: int) -> None:
    """CONSUMER_SEND_MSG_BACK of the message at ``offset`` as a consumer of GROUP would (delay
    level 0: the broker's choice; no maxReconsumeTimes: the group's retryMaxTimes)."""
    (msg,) = pull_queue(api, addr, TOPIC, 0, group=GROUP, start_offset=offset, max_msg_nums=1)[:1]
    api.run(api.api.consumer_send_message_back(addr, msg, GROUP, 0, -1))


def dlq_bodies(api: BlockingMQClientAPI, addr: str) -> list[bytes]:
    return [m.body for m in pull_queue(api, addr, f"%DLQ%{GROUP}", 0, group="dlq-reader")]


def test_update_sub_group_settings_change_what_consumers_see(cluster: LocalCluster) -> None:
    ns, addr = cluster.namesrv_addr, cluster.broker_addr
    with Producer(ns, producer_group="pg-subgroup") as producer:
        for i in range(2):
            producer.send(Message(TOPIC, f"m{i}".encode()))

    stdout = mqadmin_ok("updateSubGroup", "-n", ns, "-c", "DefaultCluster", "-g", GROUP, "-r", "0", "-q", "3")
    assert stdout.splitlines() == [
        f"create subscription group to {addr} success.",
        f"SubscriptionGroupConfig [groupName={GROUP}, consumeEnable=true, consumeFromMinEnable=false, "
        "consumeBroadcastEnable=false, retryQueueNums=3, retryMaxTimes=0, brokerId=0, "
        "whichBrokerWhenConsumeSlowly=1, notifyConsumerIdsChangedEnable=true]",
    ]
    with BlockingMQClientAPI(ns) as api, Admin(ns) as admin:
        send_back_first(api, addr, 0)
        assert dlq_bodies(api, addr) == [b"m0"]
        assert len(admin.topic_stats(addr, f"%RETRY%{GROUP}")) == 3  # created with retryQueueNums

        mqadmin_ok("updateSubGroup", "-n", ns, "-b", addr, "-g", GROUP, "-r", "16", "-q", "3")
        send_back_first(api, addr, 1)
        assert dlq_bodies(api, addr) == [b"m0"]  # m1 went to retry

        header = pull_header(TOPIC, 0, 0, group=GROUP, max_msg_nums=1)
        mqadmin_ok("updateSubGroup", "-n", ns, "-b", addr, "-g", GROUP, "-i", "1", "-w", "1")
        assert api.pull_message(addr, header, timeout_ms=5000).suggest_which_broker_id == 1
        mqadmin_ok("updateSubGroup", "-n", ns, "-b", addr, "-g", GROUP, "-i", "0")
        assert api.pull_message(addr, header, timeout_ms=5000).suggest_which_broker_id == 0

        mqadmin_ok("updateSubGroup", "-n", ns, "-b", addr, "-g", GROUP, "-s", "false")
        with pytest.raises(MQBrokerError) as refused:
            api.pull_message(addr, header, timeout_ms=5000)
        assert refused.value.code == ResponseCode.NO_PERMISSION
        assert refused.value.remark == f"subscription group no permission, {GROUP}"

        stdout = mqadmin_ok("deleteSubGroup", "-n", ns, "-c", "DefaultCluster", "-g", GROUP)
        assert stdout.splitlines()[0] == (
            f"delete subscription group [{GROUP}] from broker [{addr}] in cluster [DefaultCluster] success."
        )
        assert f"delete topic [%DLQ%{GROUP}] from cluster [DefaultCluster] success." in stdout
        # the refusing config is gone: the broker (autoCreateSubscriptionGroup) answers with defaults
        assert api.pull_message(addr, header, timeout_ms=5000).messages[0].body == b"m0"


def test_delete_sub_group_remove_offset(cluster: LocalCluster) -> None:
    ns, addr = cluster.namesrv_addr, cluster.broker_addr
    with Producer(ns, producer_group="pg-subgroup") as producer:
        for i in range(3):
            producer.send(Message(TOPIC, f"m{i}".encode()))
    with BlockingMQClientAPI(ns) as api:
        mqadmin_ok("updateSubGroup", "-n", ns, "-b", addr, "-g", GROUP)
        api.update_consumer_offset(addr, GROUP, TOPIC, 0, 3)
        assert api.query_consumer_offset(addr, GROUP, TOPIC, 0) == 3
        mqadmin_ok("deleteSubGroup", "-n", ns, "-b", addr, "-g", GROUP)  # offsets kept
        assert api.query_consumer_offset(addr, GROUP, TOPIC, 0) == 3
        stdout = mqadmin_ok("deleteSubGroup", "-n", ns, "-b", addr, "-g", GROUP, "-r", "true")
        assert stdout == f"delete subscription group [{GROUP}] from broker [{addr}] success.\n"
        assert api.query_consumer_offset(addr, GROUP, TOPIC, 0) != 3


def test_sub_group_commands_need_a_target_and_good_values(cluster: LocalCluster) -> None:
    ns = cluster.namesrv_addr
    done = run_mqadmin("updateSubGroup", "-n", ns, "-g", GROUP)
    assert done.returncode == 2
    assert "give -b brokerAddr (one broker) or -c clusterName" in done.stderr
    done = run_mqadmin("updateSubGroup", "-n", ns, "-c", "DefaultCluster", "-g", GROUP, "-s", "yes")
    assert done.returncode == 2
    assert "expected true or false, got 'yes'" in done.stderr
    done = run_mqadmin("deleteSubGroup", "-n", ns, "-c", "NoSuchCluster", "-g", GROUP)
    assert done.returncode == 1
    assert "the cluster 'NoSuchCluster' does not exist" in done.stderr
