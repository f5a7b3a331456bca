"""mqadmin consumerStatus against a real NameServer and broker: GET_CONSUMER_RUNNING_INFO goes
through the broker to the named client and back.  The answering client is a raw remoting client
that heartbeats as a consumer and answers as Java's consumers do (a fastjson ConsumerRunningInfo
with MessageQueue map keys); a rocketq LitePullConsumer, which does not answer it, makes the
command fail with REQUEST_CODE_NOT_SUPPORTED; an unknown client id with "not online".
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketq.client.api import MQClientAPI
from rocketq.client.consumer import LitePullConsumer
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.vocabulary import SubscriptionData
from rocketq.client.testing import (
    ServerProcess,
    create_topic,
    heartbeat_consumer,
    run_mqadmin,
    spawn_broker,
    spawn_namesrv,
    wait_for,
)
from rocketq.server import Channel

TOPIC = "consumer-status-t"
GROUP = "cg-status"

# what a Java consumer answers (fastjson writes MessageQueue objects as map keys)
RUNNING_INFO = (
    '{"jstack":"\\"main\\" prio=5 RUNNABLE","mqTable":{{"brokerName":"broker-a","queueId":1,"topic":"'
    + TOPIC
    + '"}:{"commitOffset":7,"cachedMsgCount":2,"locked":false}},"properties":{"PROP_CONSUME_TYPE":'
    '"CONSUME_PASSIVELY","PROP_NAMESERVER_ADDR":"x"},"subscriptionSet":[{"classFilterMode":false,'
    '"subString":"TagA","topic":"' + TOPIC + '"}]}'
)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    tmp: Path = tmp_path_factory.mktemp("consumer-status")
    with spawn_namesrv(tmp / "ns") as ns, spawn_broker(tmp / "b", ns.addr) as b:
        create_topic(ns.addr, TOPIC, 2)
        yield ns, b


async def answering_client(ns: str, broker: str, *argv: str) -> tuple[str, str, int, str, str]:
    api = MQClientAPI(ns)
    asked: list[dict[str, str]] = []

    async def running_info(cmd: RemotingCommand, channel: Channel) -> RemotingCommand:
        asked.append(dict(cmd.ext_fields))
        return cmd.make_response(ResponseCode.SUCCESS, body=RUNNING_INFO.encode())

    api.register_processor(RequestCode.GET_CONSUMER_RUNNING_INFO, running_info)
    try:
        await heartbeat_consumer(api, broker, GROUP, SubscriptionData(TOPIC, "TagA"))
        args = [a.replace("CLIENT", api.client_id) for a in argv]
        done = await asyncio.to_thread(run_mqadmin, *args)
        listed = await asyncio.to_thread(run_mqadmin, "consumerStatus", "-n", ns, "-g", GROUP)
    finally:
        await api.close()
    assert all(a.get("clientId") == api.client_id for a in asked), asked
    return api.client_id, done.stdout, done.returncode, done.stderr, listed.stdout


def test_consumer_status_prints_what_the_client_answers(cluster: tuple[ServerProcess, ServerProcess]) -> None:
    ns, broker = cluster
    client_id, stdout, code, stderr, listed = asyncio.run(
        answering_client(
            ns.addr, broker.addr, "consumerStatus", "-n", ns.addr, "-g", GROUP, "-i", "CLIENT", "-s"
        )
    )
    assert code == 0, stderr
    lines = stdout.splitlines()
    assert lines[0] == "#Consumer Properties#"
    assert re.fullmatch(r"PROP_CONSUME_TYPE +: CONSUME_PASSIVELY", lines[1]), lines
    sub = lines.index("#Consumer Subscription#")
    assert re.fullmatch(rf"001 Topic: {TOPIC} +ClassFilter: false +SubExpression: TagA", lines[sub + 1])
    offsets = lines.index("#Consumer Offset#")
    assert re.fullmatch(rf"{TOPIC} +broker-a +1 +7", lines[offsets + 2]), lines
    detail = lines.index("#Consumer MQ Detail#")
    assert '"cachedMsgCount": 2' in lines[detail + 2]
    assert lines[-2:] == ["#Consumer jstack#", '"main" prio=5 RUNNABLE']
    assert re.fullmatch(rf"001  {re.escape(client_id)} +\d+ +answered \(use -i to print it\)\n", listed), (
        listed
    )


def test_consumer_status_of_a_client_that_does_not_answer(
    cluster: tuple[ServerProcess, ServerProcess],
) -> None:
    ns, _ = cluster
    done = run_mqadmin("consumerStatus", "-n", ns.addr, "-g", GROUP, "-i", "10.0.0.1@nobody")
    assert done.returncode == 1 and f"The Consumer <{GROUP}> <10.0.0.1@nobody> not online" in done.stderr
    consumer = LitePullConsumer(ns.addr, consumer_group="cg-status-rocketq")
    consumer.subscribe(TOPIC, "*")
    consumer.start()
    try:
        probe = ("consumerConnection", "-n", ns.addr, "-g", "cg-status-rocketq")
        wait_for(lambda: run_mqadmin(*probe).returncode == 0, "the consumer online", 30)
        listed = run_mqadmin("consumerStatus", "-n", ns.addr, "-g", "cg-status-rocketq")
        client_id = listed.stdout.split()[1]
        done = run_mqadmin("consumerStatus", "-n", ns.addr, "-g", "cg-status-rocketq", "-i", client_id)
    finally:
        consumer.shutdown()
    assert listed.returncode == 0 and "no running info" in listed.stdout, listed.stdout
    assert done.returncode == 1 and "CODE: 3 " in done.stderr, done.stderr
