"""Group names are validated like topic names wherever they enter the broker.

A group such as ``../../../../x`` must never become a ``%RETRY%``/``%DLQ%`` topic, a subscription
group or an offset-table key; each entry point answers with a remark naming the rule.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rocketq.broker.server import BrokerController
from rocketq.broker.subscription_manager import SubscriptionGroupManager
from rocketq.broker.testing import run_broker
from rocketq.client.remoting.codes import RequestCode as RC
from rocketq.client.remoting.codes import ResponseCode as R
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.headers import (
    ConsumerSendMsgBackRequestHeader,
    QueryConsumerOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from rocketq.client.remoting.vocabulary import MAX_GROUP_LENGTH, validate_group, validate_topic
from rocketq.client.testing import pull_header
from rocketq.client.transport.aio import RemotingClient

BAD_GROUPS = ["../../../../x", "a/b", "g roup", "x" * (MAX_GROUP_LENGTH + 1), "ok\n", "%RETRY%../x"]


@pytest.mark.parametrize("group", ["cg", "CID_RMQ_SYS_TRACE", "a|b%c-d_e", "x" * MAX_GROUP_LENGTH])
def test_valid_groups(group: str) -> None:
    assert validate_group(group) is None


@pytest.mark.parametrize("group", ["", "  ", *BAD_GROUPS])
def test_invalid_groups_explain_why(group: str) -> None:
    remark = validate_group(group)
    assert remark is not None and "group" in remark


def test_topic_rules_live_in_the_vocabulary() -> None:
    assert validate_topic("T1") is None
    assert "illegal characters" in (validate_topic("../x") or "")
    assert "longer than" in (validate_topic("t" * 128) or "")


def test_invalid_group_is_never_auto_created() -> None:
    groups = SubscriptionGroupManager()
    assert groups.find("../../x") is None and groups.get("../../x") is None
    assert groups.find("good") is not None


def _heartbeat(consumer_group: str = "cg", producer_group: str = "pg") -> bytes:
    return json.dumps(
        {
            "clientID": "127.0.0.1@c1",
            "consumerDataSet": [
                {
                    "groupName": consumer_group,
                    "consumeType": "CONSUME_PASSIVELY",
                    "messageModel": "CLUSTERING",
                    "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                    "subscriptionDataSet": [],
                }
            ],
            "producerDataSet": [{"groupName": producer_group}],
        }
    ).encode()


def test_every_entry_point_refuses_an_invalid_group(tmp_path: Path) -> None:
    async def scenario(c: BrokerController, client: RemotingClient, addr: str) -> None:
        assert c.ctx is not None
        topics_before = set(c.ctx.topics.encode()["topicConfigTable"])

        async def call(code: int, ext: dict[str, str] | None = None, body: bytes = b"") -> RemotingCommand:
            return await client.invoke(addr, RemotingCommand.request(code, ext, body), 5000)

        for bad in BAD_GROUPS:
            r = await call(RC.HEART_BEAT, body=_heartbeat(consumer_group=bad))
            assert r.code == R.SYSTEM_ERROR and "group" in (r.remark or ""), r
            r = await call(RC.HEART_BEAT, body=_heartbeat(producer_group=bad))
            assert r.code == R.SYSTEM_ERROR and "group" in (r.remark or ""), r
            back = ConsumerSendMsgBackRequestHeader(
                offset=0, group=bad, delay_level=0, origin_msg_id="00", origin_topic="T1"
            )
            r = await call(RC.CONSUMER_SEND_MSG_BACK, back.to_ext_fields())
            remark = r.remark or ""
            assert r.code == R.SUBSCRIPTION_GROUP_NOT_EXIST and ("illegal" in remark or "longer" in remark), r
            sgc = json.dumps({"groupName": bad}).encode()
            r = await call(RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=sgc)
            assert r.code == R.SYSTEM_ERROR, r
            query = QueryConsumerOffsetRequestHeader(consumer_group=bad, topic="T1", queue_id=0)
            assert (await call(RC.QUERY_CONSUMER_OFFSET, query.to_ext_fields())).code == R.SYSTEM_ERROR
            update = UpdateConsumerOffsetRequestHeader(
                consumer_group=bad, topic="T1", queue_id=0, commit_offset=5
            )
            assert (await call(RC.UPDATE_CONSUMER_OFFSET, update.to_ext_fields())).code == R.SYSTEM_ERROR
            pull = pull_header("T1", 0, 0, group=bad, max_msg_nums=1, sys_flag=0, expression_type=None)
            assert (await call(RC.PULL_MESSAGE, pull.to_ext_fields())).code != R.SUCCESS
            assert c.ctx.groups.get(bad) is None
        topics_after = set(c.ctx.topics.encode()["topicConfigTable"])
        assert topics_after == topics_before, topics_after - topics_before
        assert not any(".." in key for key in json.dumps(c.ctx.offsets.encode()).split('"'))
        # the legal group still works
        assert (await call(RC.HEART_BEAT, body=_heartbeat())).code == R.SUCCESS
        assert c.ctx.topics.select("%RETRY%cg") is not None

    run_broker(tmp_path, scenario)
