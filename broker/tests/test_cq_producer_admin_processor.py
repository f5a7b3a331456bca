"""QUERY_CONSUME_QUEUE and GET_ALL_PRODUCER_INFO on an in-process broker: the raw JSON bodies
(Java's field names, null fields left out), the units read within the consume queue file that
holds ``index`` (as Java's iterator), an SQL92 group's filter data and eval, a header without
``queueId`` refused naming the field, and the producer table filled from a heartbeat."""

from __future__ import annotations

import json
from pathlib import Path

from rocketq.broker.processor.cq_producer_admin import matched_by_consume_queue
from rocketq.broker.server import BrokerController
from rocketq.broker.testing import put_test_message, run_broker
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.javahash import java_string_hash
from rocketq.client.remoting.vocabulary import ExpressionType, build_subscription
from rocketq.client.transport.aio import RemotingClient


def query(**fields: object) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.QUERY_CONSUME_QUEUE, {k: str(v) for k, v in fields.items()})


def test_query_consume_queue_and_producer_table(tmp_path: Path) -> None:
    async def scenario(controller: BrokerController, client: RemotingClient, addr: str) -> None:
        assert controller.ctx is not None
        store = controller.ctx.store
        phys = []
        for _ in range(12):
            phys.append(store.max_phy_offset)
            put_test_message(store, "T", b"z" * 50)
        assert store.wait_dispatched()

        answer = await client.invoke(addr, query(topic="T", queueId=0, index=8, count=5), 5000)
        assert answer.code == ResponseCode.SUCCESS and answer.body is not None
        doc = json.loads(answer.body)
        assert set(doc) == {"queueData", "maxQueueIndex", "minQueueIndex"}
        assert (doc["maxQueueIndex"], doc["minQueueIndex"]) == (12, 0)
        sizes = [b - a for a, b in zip(phys, [*phys[1:], store.max_phy_offset], strict=True)]
        # 10 units per consume queue file: units 8 and 9 only, as Java's iterator stops at the file end
        assert doc["queueData"] == [
            {"eval": False, "physicOffset": phys[i], "physicSize": sizes[i], "tagsCode": 0} for i in (8, 9)
        ]

        heartbeat = {
            "clientID": "cid-1",
            "consumerDataSet": [{
                "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "consumeType": "CONSUME_PASSIVELY",
                "groupName": "G", "messageModel": "CLUSTERING", "unitMode": False,
                "subscriptionDataSet": [build_subscription("T", "a > 1", ExpressionType.SQL92).to_obj()],
            }],
            "producerDataSet": [{"groupName": "PG"}],
        }  # fmt: skip
        beat = RemotingCommand.request(RequestCode.HEART_BEAT, body=json.dumps(heartbeat).encode())
        assert (await client.invoke(addr, beat, 5000)).code == ResponseCode.SUCCESS

        answer = await client.invoke(
            addr, query(topic="T", queueId=0, index=0, count=2, consumerGroup="G"), 5000
        )
        assert answer.body is not None
        doc = json.loads(answer.body)
        assert doc["subscriptionData"]["expressionType"] == "SQL92"
        assert doc["subscriptionData"]["subString"] == "a > 1"
        filter_data = json.loads(doc["filterData"])
        assert (filter_data["consumerGroup"], filter_data["expression"]) == ("G", "a > 1")
        assert [d["eval"] for d in doc["queueData"]] == [True, True]  # SQL92 is not decided from the queue

        answer = await client.invoke(addr, query(topic="T", index=0, count=2), 5000)
        assert answer.code == ResponseCode.SYSTEM_ERROR and "queueId" in (answer.remark or "")
        answer = await client.invoke(addr, query(topic="T", queueId=0, index=12, count=2), 5000)
        assert (answer.code, answer.remark, answer.body or b"") == (
            ResponseCode.SUCCESS,
            "Index 12 of 0@T is not exist!",
            b"",
        )

        answer = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_ALL_PRODUCER_INFO), 5000)
        assert answer.code == ResponseCode.SUCCESS and answer.body is not None
        (info,) = json.loads(answer.body)["data"]["PG"]
        assert set(info) == {"clientId", "remoteIP", "language", "version", "lastUpdateTimestamp"}
        assert info["clientId"] == "cid-1" and info["remoteIP"].startswith("/127.0.0.1:")

    run_broker(tmp_path, scenario, mappedFileSizeConsumeQueue=str(20 * 10))


def test_tag_eval_is_java_is_matched_by_consume_queue() -> None:
    sub = build_subscription("T", "TagA || TagB")
    assert matched_by_consume_queue(sub, java_string_hash("TagA"))
    assert not matched_by_consume_queue(sub, java_string_hash("TagC"))
    assert matched_by_consume_queue(sub, java_string_hash("TagB") + 2**32)  # Long.intValue() truncation
    assert matched_by_consume_queue(build_subscription("T", "*"), 12345)
