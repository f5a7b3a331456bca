"""mqproxy's renewal of push consumers' receipt handles, and its PullMessage / GetOffset /
UpdateOffset / QueryOffset, against real mqnamesrv, mqbroker and mqproxy processes.

Renewal: the official Python SDK 5.1.2 (its venv built by test_grpc_python_sdk.py's fixture) runs
``grpc_sdk/python_sdk_renew.py``: PushConsumers whose listener sleeps 9 s on a message, through a
proxy with ``defaultInvisibleTimeMills`` 4 s (renewal due 2 s ahead, 4 s slices, scans every
0.5 s).  With renewal the message is consumed once and stays acked for the quiet time after (an ack
with a stale handle would bring it back within one slice); the same script through a proxy with
``enableProxyAutoRenew=false`` sees the message delivered a second time while the listener sleeps,
which is what renewal prevents.  A normal group and a FIFO group (``updateSubGroup -o true``,
orderly POP) both.

Offsets: the published SDKs never call the four pull RPCs, so rocketq's generated stubs do, and
the answers are cross-checked with the remoting side: an offset set by UpdateOffset is the one
``Admin.consumer_progress`` reads, an offset reset over remoting is the one GetOffset answers, and
pulled messages are the remoting producer's, in queue order.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from rocketq.client.admin import Admin
from rocketq.client.launcher import spawn_proxy
from rocketq.client.model import Message
from rocketq.client.producer import Producer
from rocketq.client.testing import ServerProcess, create_topic, run_mqadmin, spawn_broker, spawn_namesrv
from rocketq.proxy.v2 import definition_pb2 as pb
from rocketq.proxy.v2 import service_pb2 as spb
from rocketq.proxy.v2.service_pb2_grpc import MessagingServiceStub

RENEW_SCRIPT = Path(__file__).with_name("grpc_sdk") / "python_sdk_renew.py"
#: the listener's sleep, and how long the consumers stay after it (more than one 4 s slice)
LISTENER_SLEEP_S, QUIET_S = 9, 6
#: short leases and frequent scans, so a 9 s listener outlives two invisible times
SHORT_LEASES: dict[str, Any] = {
    "defaultInvisibleTimeMills": 4000,
    "renewAheadTimeMillis": 2000,
    "renewSliceTimeMillis": 4000,
    "renewSchedulePeriodMillis": 500,
    "minInvisibleTimeMillsForRecv": 3000,
    "grpcClientConsumerMinLongPollingTimeoutMillis": 1000,
    "grpcClientConsumerMaxLongPollingTimeoutMillis": 3000,
}
OFFSET_TOPIC, OFFSET_GROUP = "off-topic", "g-off"


@dataclass
class Stack:
    namesrv: ServerProcess
    renewing: ServerProcess  # a proxy with SHORT_LEASES
    not_renewing: ServerProcess  # the same with enableProxyAutoRenew=false


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("grpc-renew")
    with spawn_namesrv(tmp / "ns") as ns, spawn_broker(tmp, ns.addr):
        for topic in ("renew-normal", "renew-fifo", "norenew-normal", "norenew-fifo"):
            create_topic(ns.addr, topic, 2)
        create_topic(ns.addr, OFFSET_TOPIC, 1)
        for group in ("g-renew-fifo", "g-norenew-fifo"):
            done = run_mqadmin(
                "updateSubGroup", "-n", ns.addr, "-c", "DefaultCluster", "-g", group, "-o", "true"
            )
            assert done.returncode == 0, done.stdout + done.stderr
        with (
            spawn_proxy(tmp / "px-renew", ns.addr, **SHORT_LEASES) as renewing,
            spawn_proxy(tmp / "px-norenew", ns.addr, enableProxyAutoRenew=False, **SHORT_LEASES) as plain,
        ):
            yield Stack(ns, renewing, plain)


def _run_slow_listeners(python: Path, proxy: ServerProcess, *pairs: str) -> list[dict[str, Any]]:
    run = subprocess.run(
        [str(python), str(RENEW_SCRIPT), proxy.addr, str(LISTENER_SLEEP_S), str(QUIET_S), *pairs],
        capture_output=True,
        text=True,
        timeout=55,
    )
    assert run.returncode == 0, f"SDK script failed:\n{run.stderr[-4000:]}\nproxy log:\n{proxy.log_tail()}"
    deliveries: list[dict[str, Any]] = json.loads(run.stdout.strip().splitlines()[-1])["deliveries"]
    return deliveries


def _in_flight(stack: Stack, group: str, topic: str) -> int:
    """The group's messages popped and neither acked nor back on the broker (POP status)."""
    with Admin(stack.namesrv.addr) as admin:
        answers = admin.pop_status(group, topic)
    assert all(a.status is not None for a in answers), answers
    return sum(t.in_flight for a in answers if a.status is not None for t in a.status.topics)


def _attempts(deliveries: list[dict[str, Any]]) -> dict[str, list[int]]:
    seen: dict[str, list[int]] = {}
    for d in deliveries:
        seen.setdefault(d["topic"], []).append(d["attempt"])
    return seen


def test_a_push_consumer_s_slow_message_is_renewed_consumed_once_and_acked(
    stack: Stack, sdk_python: Path
) -> None:
    deliveries = _run_slow_listeners(
        sdk_python, stack.renewing, "renew-normal:g-renew", "renew-fifo:g-renew-fifo"
    )
    assert _attempts(deliveries) == {"renew-normal": [1], "renew-fifo": [1]}, deliveries
    # the ack with the client's original handle reached the broker under the renewed one
    assert _in_flight(stack, "g-renew", "renew-normal") == 0
    assert _in_flight(stack, "g-renew-fifo", "renew-fifo") == 0


def test_without_renewal_the_slow_message_is_delivered_again(stack: Stack, sdk_python: Path) -> None:
    deliveries = _run_slow_listeners(
        sdk_python, stack.not_renewing, "norenew-normal:g-norenew", "norenew-fifo:g-norenew-fifo"
    )
    attempts = _attempts(deliveries)
    assert attempts == {"norenew-normal": [1, 2], "norenew-fifo": [1, 2]}, deliveries
    # the second delivery came while the first listener still slept
    second = [d for d in deliveries if d["attempt"] == 2]
    first = {d["topic"]: d["at_s"] for d in deliveries if d["attempt"] == 1}
    assert all(d["at_s"] < first[d["topic"]] + LISTENER_SLEEP_S for d in second), deliveries


# ---------------------------------------------------------------------------------- offsets


def _stub(addr: str) -> tuple[grpc.Channel, MessagingServiceStub]:
    channel = grpc.insecure_channel(addr)
    return channel, MessagingServiceStub(channel)  # type: ignore[no-untyped-call]


def _queue(topic: str = OFFSET_TOPIC, broker: str = "broker-a", queue_id: int = 0) -> pb.MessageQueue:
    return pb.MessageQueue(topic=pb.Resource(name=topic), id=queue_id, broker=pb.Broker(name=broker))


def _pull(
    stub: MessagingServiceStub,
    offset: int,
    batch: int = 32,
    tag: str = "*",
    mq: pb.MessageQueue | None = None,
) -> tuple[pb.Status, list[pb.Message], int | None]:
    request = spb.PullMessageRequest(
        group=pb.Resource(name=OFFSET_GROUP),
        message_queue=mq or _queue(),
        offset=offset,
        batch_size=batch,
        filter_expression=pb.FilterExpression(type=pb.FilterType.TAG, expression=tag),
    )
    answers = list(stub.PullMessage(request, timeout=10))
    assert answers[0].WhichOneof("content") == "status", answers
    messages = [a.message for a in answers[1:] if a.WhichOneof("content") == "message"]
    tail = [a.next_offset for a in answers[1:] if a.WhichOneof("content") == "next_offset"]
    assert len(tail) <= 1 and (not tail or answers[-1].WhichOneof("content") == "next_offset"), answers
    return answers[0].status, messages, tail[0] if tail else None


def _query(
    stub: MessagingServiceStub, policy: pb.QueryOffsetPolicy, at_ms: int | None = None, **mq: Any
) -> spb.QueryOffsetResponse:
    request = spb.QueryOffsetRequest(message_queue=_queue(**mq), query_offset_policy=policy)
    if at_ms is not None:
        stamp = Timestamp()
        stamp.FromMilliseconds(at_ms)
        request.timestamp.CopyFrom(stamp)
    response: spb.QueryOffsetResponse = stub.QueryOffset(request, timeout=10)
    return response


def _get(stub: MessagingServiceStub, group: str = OFFSET_GROUP, **mq: Any) -> spb.GetOffsetResponse:
    response: spb.GetOffsetResponse = stub.GetOffset(
        spb.GetOffsetRequest(group=pb.Resource(name=group), message_queue=_queue(**mq)), timeout=10
    )
    return response


def _update(stub: MessagingServiceStub, offset: int, **mq: Any) -> pb.Status:
    response = stub.UpdateOffset(
        spb.UpdateOffsetRequest(
            group=pb.Resource(name=OFFSET_GROUP), message_queue=_queue(**mq), offset=offset
        ),
        timeout=10,
    )
    result: pb.Status = response.status
    return result


def test_pull_and_offsets_of_a_queue_agree_with_the_remoting_side(stack: Stack) -> None:
    ns = stack.namesrv.addr
    before_ms = int(time.time() * 1000) - 1000
    with Producer(ns, producer_group="pg-grpc-offsets") as producer:
        sent = [
            producer.send(Message(OFFSET_TOPIC, f"m{i}".encode(), tags="TagB" if i % 2 else "TagA"))
            for i in range(5)
        ]
    assert [s.queue_offset for s in sent] == list(range(5))
    channel, stub = _stub(stack.renewing.addr)
    with channel:
        # QueryOffset: the queue's ends and a time before the first message
        ends = [_query(stub, p) for p in (pb.QueryOffsetPolicy.BEGINNING, pb.QueryOffsetPolicy.END)]
        assert [(r.status.code, r.offset) for r in ends] == [(pb.Code.OK, 0), (pb.Code.OK, 5)]
        at = _query(stub, pb.QueryOffsetPolicy.TIMESTAMP, before_ms)
        assert (at.status.code, at.offset) == (pb.Code.OK, 0)
        late_ms = int(time.time() * 1000) + 60_000
        late = _query(stub, pb.QueryOffsetPolicy.TIMESTAMP, late_ms)
        assert late.status.code == pb.Code.OK and late.offset in (4, 5)  # checked against remoting below

        # PullMessage: status, the messages in queue order, then the next offset
        status, messages, next_offset = _pull(stub, 0, batch=3)
        assert status.code == pb.Code.OK, status
        assert [m.body for m in messages] == [b"m0", b"m1", b"m2"] and next_offset == 3
        assert [m.system_properties.message_id for m in messages] == [s.msg_id for s in sent[:3]]
        assert [m.system_properties.queue_offset for m in messages] == [0, 1, 2]
        assert not any(m.system_properties.receipt_handle for m in messages)
        status, messages, next_offset = _pull(stub, 0, tag="TagB")
        assert (status.code, [m.body for m in messages], next_offset) == (pb.Code.OK, [b"m1", b"m3"], 5)
        status, messages, next_offset = _pull(stub, 5)
        assert (status.code, messages, next_offset) == (pb.Code.MESSAGE_NOT_FOUND, [], 5)
        status, messages, next_offset = _pull(stub, 1000)
        # the broker's correction, as RocketMQ's store makes it: the queue's start while it is 0
        assert status.code == pb.Code.ILLEGAL_OFFSET and messages == [] and next_offset == 0, status

        # UpdateOffset -> the remoting admin's view, and a remoting reset -> GetOffset
        with Admin(ns) as admin:
            # no commit yet: the broker answers 0 while the queue's first message is at hand, as
            # RocketMQ's QUERY_CONSUMER_OFFSET does; GetOffset says what remoting sees
            [progress] = admin.consumer_progress(OFFSET_GROUP, OFFSET_TOPIC)
            got = _get(stub)
            assert (got.status.code, got.offset) == (pb.Code.OK, progress.consumer_offset)
            assert _update(stub, 3).code == pb.Code.OK
            got = _get(stub)
            assert (got.status.code, got.offset) == (pb.Code.OK, 3)
            [progress] = admin.consumer_progress(OFFSET_GROUP, OFFSET_TOPIC)
            assert (progress.consumer_offset, progress.broker_offset) == (3, 5)
            assert list(admin.reset_offset_by_time(OFFSET_GROUP, OFFSET_TOPIC, before_ms).values()) == [0]
            got = _get(stub)
            assert (got.status.code, got.offset) == (pb.Code.OK, 0)
            # the broker's own search for a time after the last message, as QueryOffset answered it
            [reset] = admin.reset_offset_by_time(OFFSET_GROUP, OFFSET_TOPIC, late_ms).values()
            assert reset == late.offset and _get(stub).offset == late.offset
        assert _update(stub, 5).code == pb.Code.OK  # the end is a valid offset


def test_pull_and_offset_rpcs_refuse_bad_input_with_status_codes(stack: Stack) -> None:
    channel, stub = _stub(stack.renewing.addr)
    with channel:
        unknown_topic: dict[str, Any] = {"topic": "no-such-topic"}
        unknown_broker: dict[str, Any] = {"broker": "broker-zz"}
        bad_queue: dict[str, Any] = {"queue_id": 7}
        for mq, code in ((unknown_topic, pb.Code.TOPIC_NOT_FOUND), (unknown_broker, pb.Code.BAD_REQUEST)):
            assert _query(stub, pb.QueryOffsetPolicy.END, **mq).status.code == code, mq
            assert _get(stub, **mq).status.code == code, mq
            assert _update(stub, 0, **mq).code == code, mq
            assert _pull(stub, 0, mq=_queue(**mq))[0].code == code, mq
        refused = _get(stub, **bad_queue).status
        assert refused.code == pb.Code.BAD_REQUEST and "0..0" in refused.message, refused
        assert "broker-a" in _get(stub, **unknown_broker).status.message  # names the topic's brokers
        assert _update(stub, -1).code == pb.Code.ILLEGAL_OFFSET
        too_far = _update(stub, 10_000)
        assert too_far.code == pb.Code.ILLEGAL_OFFSET and "max offset" in too_far.message, too_far
        assert _pull(stub, -5)[0].code == pb.Code.ILLEGAL_OFFSET
        no_time = _query(stub, pb.QueryOffsetPolicy.TIMESTAMP)
        assert no_time.status.code == pb.Code.BAD_REQUEST
        assert _get(stub, group="bad group!").status.code == pb.Code.ILLEGAL_CONSUMER_GROUP
        # long polling on an empty end: MESSAGE_NOT_FOUND once the poll is over, the offset kept
        request = spb.PullMessageRequest(
            group=pb.Resource(name=OFFSET_GROUP),
            message_queue=_queue(),
            offset=_query(stub, pb.QueryOffsetPolicy.END).offset,
            batch_size=4,
            long_polling_timeout=Duration(seconds=1),
        )
        answers = list(stub.PullMessage(request, timeout=10))
        assert (
            answers[0].status.code == pb.Code.MESSAGE_NOT_FOUND and answers[-1].next_offset == request.offset
        )
        lite = stub.SyncLiteSubscription(spb.SyncLiteSubscriptionRequest(), timeout=10)
        assert lite.status.code == pb.Code.NOT_IMPLEMENTED
