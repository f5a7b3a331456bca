"""A slave copies its master's metadata, and serves a consumer that lost the master (real processes).

A NameServer, a master (``brokerId=0``) and a slave (``brokerRole=SLAVE``, ``brokerId=1``) of
one broker group run as processes; the slave learns its master from the NameServer's answer to
REGISTER_BROKER and synchronises every ``slaveSyncInterval`` (short here).  The consumer's part
of a failover is done with raw requests, as a consumer does it: QUERY_CONSUMER_OFFSET, then
PULL_MESSAGE from that offset, both to the slave after the master was killed with SIGKILL.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from rocketq.client.remoting.codes import RequestCode as RC
from rocketq.client.remoting.codes import ResponseCode as R
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.headers import (
    CreateTopicRequestHeader,
    GetMaxOffsetRequestHeader,
    QueryConsumerOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from rocketq.client.remoting.message import iter_stored_messages
from rocketq.client.remoting.vocabulary import MASTER_ID
from rocketq.client.testing import ServerProcess, pull_header, send_header, spawn_broker, wait_value
from rocketq.client.transport.blocking import BlockingRemotingClient

TOPIC = "SlaveSyncT"
GROUP = "cg-slave-sync"
SYNC_INTERVAL_MS = 300
WAIT_S = 60.0
STORE: dict[str, Any] = {
    "mappedFileSizeCommitLog": 8 << 20,
    "mappedFileSizeConsumeQueue": 20 * 2000,
    "maxHashSlotNum": 1000,
    "maxIndexNum": 4000,
    "brokerName": "broker-sync",
}

T = TypeVar("T")
REPLICATION_DOC = Path(__file__).resolve().parents[1] / "docs" / "replication.md"


@pytest.fixture
def group_of_two(tmp_path: Path, namesrv: ServerProcess) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    master = spawn_broker(tmp_path, namesrv.addr, **STORE)
    slave = spawn_broker(
        tmp_path, namesrv.addr, brokerRole="SLAVE", brokerId=1, slaveSyncInterval=SYNC_INTERVAL_MS, **STORE
    )
    yield master, slave
    for proc in (slave, master):
        if proc.is_alive():
            proc.terminate()
        print(f"--- {proc.name} log tail ---\n{proc.log_tail()}")


def invoke(
    client: BlockingRemotingClient, addr: str, code: int, ext: dict[str, str], body: bytes = b""
) -> RemotingCommand:
    return client.invoke(addr, RemotingCommand.request(code, ext, body), 10_000)


def create_topic(client: BlockingRemotingClient, addr: str) -> None:
    header = CreateTopicRequestHeader(
        topic=TOPIC,
        default_topic="TBW102",
        read_queue_nums=2,
        write_queue_nums=2,
        perm=6,
        topic_filter_type="SINGLE_TAG",
    )
    assert invoke(client, addr, RC.UPDATE_AND_CREATE_TOPIC, header.to_ext_fields()).code == R.SUCCESS


def commit(client: BlockingRemotingClient, addr: str, offset: int, queue_id: int = 0) -> RemotingCommand:
    header = UpdateConsumerOffsetRequestHeader(
        consumer_group=GROUP, topic=TOPIC, queue_id=queue_id, commit_offset=offset
    )
    return invoke(client, addr, RC.UPDATE_CONSUMER_OFFSET, header.to_ext_fields())


def committed(client: BlockingRemotingClient, addr: str, queue_id: int = 0) -> int | None:
    header = QueryConsumerOffsetRequestHeader(
        consumer_group=GROUP, topic=TOPIC, queue_id=queue_id, set_zero_if_not_found=False
    )
    response = invoke(client, addr, RC.QUERY_CONSUMER_OFFSET, header.to_ext_fields())
    return int(response.ext_fields["offset"]) if response.code == R.SUCCESS else None


def max_offset(client: BlockingRemotingClient, addr: str, queue_id: int = 0) -> int:
    header = GetMaxOffsetRequestHeader(topic=TOPIC, queue_id=queue_id)
    response = invoke(client, addr, RC.GET_MAX_OFFSET, header.to_ext_fields())
    assert response.code == R.SUCCESS, response.remark
    return int(response.ext_fields["offset"])


def table(client: BlockingRemotingClient, addr: str, code: int, key: str) -> dict[str, Any]:
    response = invoke(client, addr, code, {})
    assert response.code == R.SUCCESS, response.remark
    doc = json.loads(response.body)
    assert isinstance(doc, dict)
    entries = doc[key]
    assert isinstance(entries, dict)
    return entries


def send(client: BlockingRemotingClient, addr: str, body: bytes) -> None:
    header = send_header(TOPIC, default_topic_queue_nums=2)
    response = invoke(client, addr, RC.SEND_MESSAGE_V2, header.to_ext_fields(), body)
    assert response.code == R.SUCCESS, response.remark


def pull(client: BlockingRemotingClient, addr: str, offset: int) -> RemotingCommand:
    header = pull_header(TOPIC, 0, offset, group=GROUP, max_msg_nums=32, expression_type=None)
    return invoke(client, addr, RC.PULL_MESSAGE, header.to_ext_fields())


def test_topic_offset_and_group_created_on_the_master_appear_on_the_slave(
    group_of_two: tuple[ServerProcess, ServerProcess], blocking_client: BlockingRemotingClient
) -> None:
    master, slave = group_of_two
    client = blocking_client
    assert TOPIC not in table(client, slave.addr, RC.GET_ALL_TOPIC_CONFIG, "topicConfigTable")
    create_topic(client, master.addr)
    assert commit(client, master.addr, 42, queue_id=1).code == R.SUCCESS
    group_body = json.dumps(
        {"groupName": GROUP, "retryMaxTimes": 3, "whichBrokerWhenConsumeSlowly": 1}
    ).encode()
    assert (
        invoke(client, master.addr, RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, group_body).code == R.SUCCESS
    )

    wait_value(
        lambda: table(client, slave.addr, RC.GET_ALL_TOPIC_CONFIG, "topicConfigTable").get(TOPIC),
        "the topic on the slave",
        WAIT_S,
    )
    assert (
        wait_value(lambda: committed(client, slave.addr, queue_id=1), "the offset on the slave", WAIT_S) == 42
    )
    synced = wait_value(
        lambda: table(client, slave.addr, RC.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, "subscriptionGroupTable").get(
            GROUP
        ),
        "the group on the slave",
        WAIT_S,
    )
    assert synced["retryMaxTimes"] == 3
    master_topic = table(client, master.addr, RC.GET_ALL_TOPIC_CONFIG, "topicConfigTable")[TOPIC]
    assert table(client, slave.addr, RC.GET_ALL_TOPIC_CONFIG, "topicConfigTable")[TOPIC] == master_topic


def test_consumer_resumes_on_the_slave_at_the_committed_offset_after_kill_9(
    group_of_two: tuple[ServerProcess, ServerProcess], blocking_client: BlockingRemotingClient
) -> None:
    master, slave = group_of_two
    client = blocking_client
    create_topic(client, master.addr)
    bodies = [f"m{i}".encode() for i in range(20)]
    for body in bodies:
        send(client, master.addr, body)
    assert commit(client, master.addr, 12).code == R.SUCCESS
    # replicated messages (the HA link) and the synchronised offset (this module's duty)
    wait_value(
        lambda: max_offset(client, slave.addr) == len(bodies) or None, "the messages on the slave", WAIT_S
    )
    assert wait_value(lambda: committed(client, slave.addr) == 12 or None, "the offset on the slave", WAIT_S)

    master.kill9()
    resume_at = committed(client, slave.addr)
    assert resume_at == 12
    response = pull(client, slave.addr, resume_at)
    assert response.code == R.SUCCESS, response.remark
    assert [m.body for m in iter_stored_messages(response.body)] == bodies[12:]
    assert response.ext_fields["nextBeginOffset"] == str(len(bodies))
    assert int(response.ext_fields["suggestWhichBrokerId"]) == MASTER_ID
    # ahead of what the slave has: retry, never an offset correction on a slave
    ahead = pull(client, slave.addr, len(bodies) + 7)
    assert ahead.code == R.PULL_RETRY_IMMEDIATELY
    assert ahead.ext_fields["nextBeginOffset"] == str(len(bodies) + 7)
    # Java's slave accepts the consumer's commits while its master is away
    assert commit(client, slave.addr, 20).code == R.SUCCESS
    assert committed(client, slave.addr) == 20


def test_the_documented_example_runs(tmp_path: Path) -> None:
    text = REPLICATION_DOC.read_text(encoding="utf-8")
    section = text.split("## Slave metadata and reads", 1)[1]
    snippet = section.split("```python\n", 1)[1].split("```", 1)[0]
    done = subprocess.run(
        [sys.executable, "-c", snippet], capture_output=True, text=True, timeout=120, cwd=str(tmp_path)
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "the slave has topic Orders" in done.stdout
