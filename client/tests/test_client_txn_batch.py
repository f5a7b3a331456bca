"""Batched transactions on the client: send_half_batch / end_transaction_batch against an in-test server.

``BatchBroker`` plays the NameServer and a broker with or without the rocketq extension: it
answers GET_BROKER_RUNTIME_INFO with or without ``rocketqTransactionBatch``, stores prepared
batches at contiguous "half offsets" (SEND_BATCH_MESSAGE) or single half messages (SEND_MESSAGE_V2),
and records END_TRANSACTION requests, answering with canned codes.  Real brokers: test_txn_batch_e2e.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import pickle
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest

from rocketq.client.api import BlockingMQClientAPI, MQClientAPI
from rocketq.client.errors import MQBrokerError, MQClientError
from rocketq.client.model import LocalTransactionState, Message
from rocketq.client.producer import AsyncTransactionProducer, PreparedHalfBatch, TransactionProducer
from rocketq.client.producer.transaction_batch import (
    HalfBatchResult,
    end_transaction_batch,
    end_transaction_batch_blocking,
)
from rocketq.client.remoting import headers as h
from rocketq.client.remoting.batch import decode_batch, encode_batch
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.message import SysFlag
from rocketq.client.remoting.msgid import decode_offset_msg_id, encode_offset_msg_id
from rocketq.client.remoting.properties import MessageConst, decode_properties
from rocketq.client.remoting.route import BrokerData, MessageQueue, QueueData, TopicRouteData
from rocketq.client.remoting.txn_batch import decode_ranges_body
from rocketq.client.transport.aio import Channel
from rocketq.server import RemotingServer

T = TypeVar("T")
COMMIT, ROLLBACK = LocalTransactionState.COMMIT_MESSAGE, LocalTransactionState.ROLLBACK_MESSAGE
TOPIC = "TxBatch"


class BatchBroker:
    def __init__(self, *, feature: bool = True) -> None:
        self.feature = feature
        self.server = RemotingServer()
        self.addr = ""
        self.requests: dict[int, list[RemotingCommand]] = {}
        self.end_codes: list[tuple[int, str]] = []  # popped per END_TRANSACTION; empty = SUCCESS
        self.next_half = 0
        self.next_phy = 5000
        self.end_delay_s = 0.0  # each END_TRANSACTION answer waits this long
        self.ends_in_flight = 0
        self.max_ends_in_flight = 0
        for code in (
            RequestCode.GET_ROUTEINFO_BY_TOPIC,
            RequestCode.HEART_BEAT,
            RequestCode.UNREGISTER_CLIENT,
            RequestCode.GET_BROKER_RUNTIME_INFO,
            RequestCode.SEND_BATCH_MESSAGE,
            RequestCode.SEND_MESSAGE_V2,
            RequestCode.END_TRANSACTION,
        ):
            self.server.register(code, self._handle)

    async def start(self) -> None:
        host, port = await self.server.start()
        self.addr = f"{host}:{port}"

    def of(self, code: int) -> list[RemotingCommand]:
        return self.requests.get(code, [])

    def _store(self, n: int, queue_id: str) -> dict[str, str]:
        host, _, port = self.addr.rpartition(":")
        ids = []
        for _ in range(n):
            ids.append(encode_offset_msg_id(host, int(port), self.next_phy))
            self.next_phy += 100
        ext = {"msgId": ",".join(ids), "queueId": queue_id, "queueOffset": str(self.next_half)}
        self.next_half += n
        return ext

    async def _handle(self, cmd: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        self.requests.setdefault(cmd.code, []).append(cmd)
        if cmd.code == RequestCode.GET_ROUTEINFO_BY_TOPIC:
            route = TopicRouteData(
                [QueueData("broker-a", 2, 2, 6)], [BrokerData("c", "broker-a", {0: self.addr})]
            )
            return cmd.make_response(ResponseCode.SUCCESS, body=route.to_json())
        if cmd.code == RequestCode.GET_BROKER_RUNTIME_INFO:
            table = {"brokerVersion": "401", **({"rocketqTransactionBatch": "1"} if self.feature else {})}
            return cmd.make_response(ResponseCode.SUCCESS, body=json.dumps({"table": table}).encode())
        if cmd.code == RequestCode.SEND_BATCH_MESSAGE:
            n = len(decode_batch(cmd.body))
            return cmd.make_response(
                ResponseCode.SUCCESS, None, {**self._store(n, cmd.ext_fields["e"]), "rqHalfCount": str(n)}
            )
        if cmd.code == RequestCode.SEND_MESSAGE_V2:
            return cmd.make_response(ResponseCode.SUCCESS, None, self._store(1, cmd.ext_fields["e"]))
        if cmd.code == RequestCode.END_TRANSACTION:
            code, remark = self.end_codes.pop(0) if self.end_codes else (ResponseCode.SUCCESS, "ok")
            self.ends_in_flight += 1
            self.max_ends_in_flight = max(self.max_ends_in_flight, self.ends_in_flight)
            try:
                await asyncio.sleep(self.end_delay_s)
            finally:
                self.ends_in_flight -= 1
            if cmd.is_oneway:
                return None
            return cmd.make_response(code, remark, {"rqEnded": "1", "rqSkipped": "0"})
        return cmd.make_response(ResponseCode.SUCCESS)


def run(factory: Callable[[BatchBroker], Awaitable[T]], *, feature: bool = True) -> T:
    async def main() -> T:
        broker = BatchBroker(feature=feature)
        await broker.start()
        try:
            return await asyncio.wait_for(factory(broker), 30)
        finally:
            await broker.server.stop(0)

    return asyncio.run(main())


def rows(n: int, tag: str) -> list[Message]:
    return [Message(TOPIC, f"{tag}-{i}".encode(), keys=f"k{i}") for i in range(n)]


def end_header(cmd: RemotingCommand) -> h.EndTransactionRequestHeader:
    return h.EndTransactionRequestHeader.from_ext_fields(cmd.ext_fields)


def test_send_half_batch_then_ranged_end_from_another_client() -> None:
    async def body(broker: BatchBroker) -> list[HalfBatchResult]:
        q0, q1 = MessageQueue(TOPIC, "broker-a", 0), MessageQueue(TOPIC, "broker-a", 1)
        async with AsyncTransactionProducer(broker.addr, producer_group="pg-b") as producer:
            handles = [
                await producer.send_half_batch(q0, rows(3, "a")),
                await producer.send_half_batch(q1, rows(2, "b")),
                await producer.send_half_batch(q0, rows(4, "c")),
            ]
        (send, _, _) = broker.of(RequestCode.SEND_BATCH_MESSAGE)
        assert int(send.ext_fields["f"]) & SysFlag.TRANSACTION_PREPARED and send.ext_fields["m"] == "true"
        inner = decode_batch(send.body)
        assert [m.body for m in inner] == [b"a-0", b"a-1", b"a-2"]
        for m, tid in zip(inner, handles[0].transaction_ids, strict=True):
            assert m.properties["TRAN_MSG"] == "true" and m.properties["PGROUP"] == "pg-b"
            assert m.properties["UNIQ_KEY"] == tid and m.properties["KEYS"] in ("k0", "k1", "k2")
        assert len(broker.of(RequestCode.GET_BROKER_RUNTIME_INFO)) == 1  # cached per address
        assert broker.of(RequestCode.HEART_BEAT)  # registered at once for check-backs
        # the driver: a different client, only the picklable handles
        handles = list(pickle.loads(pickle.dumps(handles)))
        api = MQClientAPI(broker.addr)
        try:
            await end_transaction_batch(api, "pg-b", handles, COMMIT)
        finally:
            await api.close()
        return handles

    captured: dict[str, Any] = {}

    async def wrapped(broker: BatchBroker) -> None:
        captured["handles"] = await body(broker)
        captured["ends"] = list(broker.of(RequestCode.END_TRANSACTION))

    run(wrapped)
    a, b, c = captured["handles"]
    assert (a.first_half_offset, a.count, a.queue_id, a.ranged) == (0, 3, 0, True)
    assert (b.first_half_offset, c.first_half_offset) == (3, 5) and len(c.msg_ids) == 4
    assert a.first_commit_log_offset == decode_offset_msg_id(a.msg_ids[0])[2] == 5000
    ends: list[RemotingCommand] = captured["ends"]
    assert len(ends) == 2 and not any(e.is_oneway for e in ends)
    by_queue = {decode_ranges_body(e.body)[0][0]: e for e in ends}
    e0, e1 = by_queue[0], by_queue[3]
    assert e0.ext_fields["rqRanges"] == "true" and decode_ranges_body(e0.body) == [(0, 3), (5, 4)]
    assert decode_ranges_body(e1.body) == [(3, 2)]
    hd = end_header(e0)
    assert (hd.producer_group, hd.tran_state_table_offset, hd.commit_log_offset, hd.commit_or_rollback) == (
        "pg-b",
        0,
        5000,
        8,
    )
    assert (
        hd.msg_id == a.msg_ids[0]
        and hd.transaction_id == a.transaction_ids[0]
        and not hd.from_transaction_check
    )


def test_fallback_without_the_feature_is_per_message() -> None:
    async def body(broker: BatchBroker) -> tuple[HalfBatchResult, list[RemotingCommand]]:
        async with AsyncTransactionProducer(broker.addr, producer_group="pg-f") as producer:
            hb = await producer.send_half_batch(MessageQueue(TOPIC, "broker-a", 1), rows(3, "x"))
            await producer.end_transaction_batch([hb], ROLLBACK)
            with pytest.raises(MQClientError, match="delayed"):
                await producer.send_half_batch(
                    MessageQueue(TOPIC, "broker-a", 1), [Message(TOPIC, b"d", delay_time_level=2)]
                )
        assert not broker.of(RequestCode.SEND_BATCH_MESSAGE)
        return hb, list(broker.of(RequestCode.END_TRANSACTION))

    hb, ends = run(body, feature=False)
    assert hb.ranged is False and hb.count == 3 and sorted(hb.half_offsets) == [0, 1, 2]
    assert len(ends) == 3 and all(not e.is_oneway and "rqRanges" not in e.ext_fields for e in ends)
    headers = [end_header(e) for e in ends]
    assert [x.tran_state_table_offset for x in headers] == list(hb.half_offsets)
    assert [x.transaction_id for x in headers] == list(hb.transaction_ids)
    assert all(x.commit_or_rollback == 12 for x in headers)


def test_end_errors_carry_code_and_remark_and_split_on_request() -> None:
    async def body(broker: BatchBroker) -> None:
        q0 = MessageQueue(TOPIC, "broker-a", 0)
        async with AsyncTransactionProducer(broker.addr, producer_group="pg-e") as producer:
            handles = [await producer.send_half_batch(q0, rows(2, str(i))) for i in range(3)]
            broker.end_codes = [(ResponseCode.SYSTEM_ERROR, "The producer group wrong")]
            with pytest.raises(MQBrokerError) as info:
                await producer.end_transaction_batch(handles, COMMIT)
            assert (
                info.value.code == ResponseCode.SYSTEM_ERROR
                and info.value.remark == "The producer group wrong"
            )
            broker.requests[RequestCode.END_TRANSACTION] = []
            broker.end_codes = [(ResponseCode.MESSAGE_ILLEGAL, "too many: split it into several requests")]
            await producer.end_transaction_batch(handles, COMMIT)
            sent = [decode_ranges_body(e.body) for e in broker.of(RequestCode.END_TRANSACTION)]
            assert sent == [[(0, 2), (2, 2), (4, 2)], [(0, 2)], [(2, 2), (4, 2)]]
            with pytest.raises(MQClientError):
                await producer.end_transaction_batch(handles, LocalTransactionState.UNKNOW)

    run(body)


def test_parallel_bounds_the_queues_ended_at_once() -> None:
    """``parallel=2``: never more than two queues' END_TRANSACTIONs in flight, every queue ended, and a
    failure of one queue does not stop the others (it is raised after all were attempted)."""

    async def body(broker: BatchBroker) -> None:
        async with AsyncTransactionProducer(broker.addr, producer_group="pg-p") as producer:
            sent = [
                await producer.send_half_batch(MessageQueue(TOPIC, "broker-a", 0), rows(2, str(q)))
                for q in range(5)
            ]
        handles = [dataclasses.replace(hb, queue_id=q) for q, hb in enumerate(sent)]  # five queues
        broker.end_delay_s = 0.05
        api = MQClientAPI(broker.addr)
        try:
            await end_transaction_batch(api, "pg-p", handles, COMMIT, parallel=2)
            assert broker.max_ends_in_flight == 2
            assert sorted(decode_ranges_body(e.body) for e in broker.of(RequestCode.END_TRANSACTION)) == [
                [(2 * q, 2)] for q in range(5)
            ]
            broker.requests[RequestCode.END_TRANSACTION] = []
            broker.end_codes = [(ResponseCode.SYSTEM_ERROR, "boom")]
            with pytest.raises(MQBrokerError, match="boom"):
                await end_transaction_batch(api, "pg-p", handles, COMMIT, parallel=1)
            assert len(broker.of(RequestCode.END_TRANSACTION)) == 5 and broker.max_ends_in_flight == 2
            with pytest.raises(MQClientError, match="parallel"):
                await end_transaction_batch(api, "pg-p", handles, COMMIT, parallel=0)
        finally:
            await api.close()

    run(body)


def test_blocking_producer_and_blocking_driver() -> None:
    async def body(broker: BatchBroker) -> None:
        def work() -> None:
            with TransactionProducer(broker.addr, producer_group="pg-s") as producer:
                hb = producer.send_half_batch(MessageQueue(TOPIC, "broker-a", 0), rows(2, "s"))
            with BlockingMQClientAPI(broker.addr) as api:
                assert api.supports_transaction_batch(broker.addr)
                end_transaction_batch_blocking(api, "pg-s", [hb], COMMIT)

        await asyncio.to_thread(work)
        (end,) = broker.of(RequestCode.END_TRANSACTION)
        assert decode_ranges_body(end.body) == [(0, 2)]
        assert (
            decode_properties(broker.of(RequestCode.SEND_BATCH_MESSAGE)[0].ext_fields["i"])[
                MessageConst.WAIT_STORE_MSG_OK
            ]
            == "true"
        )

    run(body)


def test_ranges_body_codec() -> None:
    from rocketq.client.errors import MessageFormatError
    from rocketq.client.remoting.txn_batch import encode_ranges_body

    assert encode_ranges_body([(7, 2), (0, 3)]) == b'{"ranges":[[7,2],[0,3]]}'
    assert decode_ranges_body(b'{"ranges":[[7,2],[0,3]]}') == [(7, 2), (0, 3)]
    for bad in (
        b"",
        b"[]",
        b'{"ranges":[]}',
        b'{"ranges":[[1]]}',
        b'{"ranges":[[-1,2]]}',
        b'{"ranges":[[0,0]]}',
        b'{"ranges":[[0,3],[2,1]]}',
        b'{"ranges":[[0,true]]}',
        b'{"ranges":[["0",1]]}',
    ):
        with pytest.raises(MessageFormatError):
            decode_ranges_body(bad)
    with pytest.raises(MessageFormatError):
        encode_ranges_body([(0, 2), (1, 1)])


def encoded_rows(n: int, tag: str) -> bytes:
    return encode_batch(
        [(i % 2, f"{tag}-{i}".encode(), {"KEYS": f"k{i}", "UNIQ_KEY": f"U{tag}{i}"}) for i in range(n)]
    )


def test_encoded_half_batch_appends_properties_as_bytes() -> None:
    async def body(broker: BatchBroker) -> HalfBatchResult:
        async with AsyncTransactionProducer(broker.addr, producer_group="pg-x") as producer:
            prepared = PreparedHalfBatch.of_encoded(
                encoded_rows(3, "e"), "pg-x", extra_properties={"__RQ_SINK": "s1"}
            )
            hb = await producer.send_half_batch(MessageQueue(TOPIC, "broker-a", 1), prepared)
            with pytest.raises(MQClientError, match="no UNIQ_KEY"):
                PreparedHalfBatch.of_encoded(encode_batch([(0, b"x", {"KEYS": "k"})]), "pg-x")
            with pytest.raises(MQClientError, match="malformed"):
                PreparedHalfBatch.of_encoded(b"\x00\x00\x00\x05junk", "pg-x")
        (send,) = broker.of(RequestCode.SEND_BATCH_MESSAGE)
        inner = decode_batch(send.body)
        assert [(m.flag, m.body) for m in inner] == [(0, b"e-0"), (1, b"e-1"), (0, b"e-2")]
        for i, m in enumerate(inner):
            assert m.properties == {
                "KEYS": f"k{i}",
                "UNIQ_KEY": f"Ue{i}",
                "__RQ_SINK": "s1",
                "TRAN_MSG": "true",
                "PGROUP": "pg-x",
            }
        return hb

    hb = run(body)
    assert (hb.ranged, hb.count, hb.queue_id, hb.transaction_ids) == (True, 3, 1, ("Ue0", "Ue1", "Ue2"))


def test_encoded_half_batch_falls_back_per_message() -> None:
    async def body(broker: BatchBroker) -> tuple[HalfBatchResult, list[RemotingCommand]]:
        async with AsyncTransactionProducer(broker.addr, producer_group="pg-y") as producer:
            prepared = PreparedHalfBatch.of_encoded(
                encoded_rows(2, "f"), "pg-y", extra_properties={"__RQ_SINK": "s2"}
            )
            hb = await producer.send_half_batch(MessageQueue(TOPIC, "broker-a", 0), prepared)
        return hb, list(broker.of(RequestCode.SEND_MESSAGE_V2))

    hb, sends = run(body, feature=False)
    assert hb.ranged is False and hb.count == 2 and len(sends) == 2
    props = [
        decode_properties(h.SendMessageRequestHeaderV2.from_ext_fields(s.ext_fields).properties or "")
        for s in sends
    ]
    assert sorted(p["UNIQ_KEY"] for p in props) == ["Uf0", "Uf1"] and all(
        p["__RQ_SINK"] == "s2" for p in props
    )


def prepared_rows(n: int, tag: str, group: str) -> bytes:
    return encode_batch(
        [
            (
                0,
                f"{tag}-{i}".encode(),
                {"KEYS": f"k{i}", "UNIQ_KEY": f"U{tag}{i}", "TRAN_MSG": "true", "PGROUP": group},
            )
            for i in range(n)
        ]
    )


def test_prepared_half_batch_is_sent_as_is_or_per_message() -> None:
    body_bytes = prepared_rows(3, "p", "pg-p")

    async def ranged(broker: BatchBroker) -> HalfBatchResult:
        async with AsyncTransactionProducer(broker.addr, producer_group="pg-p") as producer:
            hb = await producer.send_half_batch(
                MessageQueue(TOPIC, "broker-a", 1), PreparedHalfBatch(body_bytes, ("Up0", "Up1", "Up2"))
            )
            with pytest.raises(MQClientError, match="at least one"):
                await producer.send_half_batch(
                    MessageQueue(TOPIC, "broker-a", 1), PreparedHalfBatch(body_bytes, ())
                )
        (send,) = broker.of(RequestCode.SEND_BATCH_MESSAGE)
        assert send.body == body_bytes  # not decoded, not re-encoded
        assert h.SendMessageRequestHeaderV2.from_ext_fields(send.ext_fields).sys_flag == int(
            SysFlag.TRANSACTION_PREPARED
        )
        return hb

    hb = run(ranged)
    assert (hb.ranged, hb.count, hb.transaction_ids) == (True, 3, ("Up0", "Up1", "Up2"))

    async def each(broker: BatchBroker) -> tuple[HalfBatchResult, list[RemotingCommand]]:
        async with AsyncTransactionProducer(broker.addr, producer_group="pg-p") as producer:
            hb = await producer.send_half_batch(
                MessageQueue(TOPIC, "broker-a", 0), PreparedHalfBatch(body_bytes, ("Up0", "Up1", "Up2"))
            )
            with pytest.raises(MQClientError, match="malformed"):
                await producer.send_half_batch(
                    MessageQueue(TOPIC, "broker-a", 0), PreparedHalfBatch(b"\x00\x00\x00\x05junk", ("x",))
                )
        return hb, list(broker.of(RequestCode.SEND_MESSAGE_V2))

    hb, sends = run(each, feature=False)
    assert hb.ranged is False and hb.count == 3 and len(sends) == 3
    props = [
        decode_properties(h.SendMessageRequestHeaderV2.from_ext_fields(s.ext_fields).properties or "")
        for s in sends
    ]
    assert sorted(p["UNIQ_KEY"] for p in props) == ["Up0", "Up1", "Up2"]
    assert all(p["PGROUP"] == "pg-p" and p["TRAN_MSG"] == "true" for p in props)
