"""The transactional producers against an in-test RemotingServer with canned answers.

``TxBroker`` plays the NameServer (one route pointing at itself) and a broker that "stores" half
messages (answers SEND_MESSAGE_V2 with an offset msgId and a queue offset), records heartbeats
and END_TRANSACTION requests, and can call the producer back with CHECK_TRANSACTION_STATE over
the producer's own connection, as a real broker does.  Real brokers: integration_tests/.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest

from rocketq.client.errors import MQClientError
from rocketq.client.model import LocalTransactionState, Message, MessageExt, SendStatus
from rocketq.client.producer import AsyncTransactionProducer, TransactionProducer
from rocketq.client.producer.transaction import as_transaction_state, run_local_transaction
from rocketq.client.remoting import headers as h
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.message import SysFlag, encode_stored_message
from rocketq.client.remoting.msgid import encode_offset_msg_id
from rocketq.client.remoting.properties import MessageConst, decode_properties
from rocketq.client.remoting.route import BrokerData, QueueData, TopicRouteData
from rocketq.client.testing import wait_for
from rocketq.client.transport.aio import Channel
from rocketq.server import RemotingServer

T = TypeVar("T")
COMMIT, ROLLBACK, UNKNOW = (
    LocalTransactionState.COMMIT_MESSAGE,
    LocalTransactionState.ROLLBACK_MESSAGE,
    LocalTransactionState.UNKNOW,
)
TOPIC = "TxTopic"


class TxBroker:
    """NameServer + broker double for transactional sends."""

    def __init__(self) -> None:
        self.server = RemotingServer()
        self.addr = ""
        self.sends: list[RemotingCommand] = []
        self.ends: list[RemotingCommand] = []
        self.heartbeats: list[tuple[dict[str, Any], Channel]] = []
        self.send_codes: list[int] = []  # popped per send; empty = SUCCESS; -1 = never answer
        self.end_event = asyncio.Event()
        self.next_offset = 1000
        for code in (
            RequestCode.GET_ROUTEINFO_BY_TOPIC,
            RequestCode.SEND_MESSAGE_V2,
            RequestCode.HEART_BEAT,
            RequestCode.UNREGISTER_CLIENT,
            RequestCode.END_TRANSACTION,
        ):
            self.server.register(code, self._handle)

    async def start(self) -> None:
        host, port = await self.server.start()
        self.addr = f"{host}:{port}"

    async def _handle(self, cmd: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        if cmd.code == RequestCode.GET_ROUTEINFO_BY_TOPIC:
            route = TopicRouteData(
                [QueueData("broker-a", 2, 2, 6)], [BrokerData("c", "broker-a", {0: self.addr})]
            )
            return cmd.make_response(ResponseCode.SUCCESS, body=route.to_json())
        if cmd.code == RequestCode.HEART_BEAT:
            self.heartbeats.append((json.loads(cmd.body), channel))
            return cmd.make_response(ResponseCode.SUCCESS)
        if cmd.code == RequestCode.END_TRANSACTION:
            self.ends.append(cmd)
            self.end_event.set()
            return None if cmd.is_oneway else cmd.make_response(ResponseCode.SUCCESS)
        if cmd.code == RequestCode.SEND_MESSAGE_V2:
            return await self._on_send(cmd)
        return cmd.make_response(ResponseCode.SUCCESS)

    async def _on_send(self, cmd: RemotingCommand) -> RemotingCommand | None:
        self.sends.append(cmd)
        code = self.send_codes.pop(0) if self.send_codes else ResponseCode.SUCCESS
        if code == -1:
            await asyncio.sleep(30)  # never answers in time
            return None
        if code not in (ResponseCode.SUCCESS, ResponseCode.FLUSH_DISK_TIMEOUT):
            return cmd.make_response(code, f"canned {code}")
        self.next_offset += 100
        host, _, port = self.addr.rpartition(":")
        ext = {
            "msgId": encode_offset_msg_id(host, int(port), self.next_offset),
            "queueId": cmd.ext_fields["e"],
            "queueOffset": str(len(self.sends) + 6),
        }
        return cmd.make_response(code, None, ext)

    async def end_of(self, n: int = 1, timeout_s: float = 10.0) -> list[RemotingCommand]:
        """Wait until ``n`` END_TRANSACTION requests arrived."""
        async with asyncio.timeout(timeout_s):
            while len(self.ends) < n:
                self.end_event.clear()
                await self.end_event.wait()
        return self.ends

    async def check_back(self, props: dict[str, str], header: h.CheckTransactionStateRequestHeader) -> None:
        """Send CHECK_TRANSACTION_STATE (oneway) over the channel the producer heartbeats on."""
        channel = self.heartbeats[-1][1]
        host, _, port = self.addr.rpartition(":")
        body = encode_stored_message(
            topic=TOPIC,
            queue_id=1,
            born_timestamp=1,
            born_host=("127.0.0.1", 5000),
            store_timestamp=2,
            store_host=(host, int(port)),
            body=b"half",
            properties=props,
            flag=0,
            sys_flag=int(SysFlag.TRANSACTION_PREPARED),
            queue_offset=header.tran_state_table_offset,
            physical_offset=header.commit_log_offset,
        )
        cmd = RemotingCommand.request(
            RequestCode.CHECK_TRANSACTION_STATE, header.to_ext_fields(), body, oneway=True
        )
        await channel.invoke_oneway(cmd)

    async def stop(self) -> None:
        await self.server.stop(0)


def run(factory: Callable[[TxBroker], Awaitable[T]]) -> T:
    async def main() -> T:
        broker = TxBroker()
        await broker.start()
        try:
            return await asyncio.wait_for(factory(broker), 30)
        finally:
            await broker.stop()

    return asyncio.run(main())


def props_of(cmd: RemotingCommand) -> dict[str, str]:
    return decode_properties(cmd.ext_fields.get("i", ""))


def end_header(cmd: RemotingCommand) -> h.EndTransactionRequestHeader:
    return h.EndTransactionRequestHeader.from_ext_fields(cmd.ext_fields)


def half_props(tid: str = "7F00000100002A9F0000000000000ABC") -> dict[str, str]:
    return {
        MessageConst.UNIQ_KEY: tid,
        MessageConst.TRANSACTION_PREPARED: "true",
        MessageConst.PRODUCER_GROUP: "pg-tx",
        MessageConst.REAL_TOPIC: TOPIC,
        MessageConst.TRANSACTION_CHECK_TIMES: "1",
    }


# ----------------------------------------------------------------------------- state mapping


def test_state_mapping_to_the_wire_and_lenient_results() -> None:
    assert [s.commit_or_rollback for s in (COMMIT, ROLLBACK, UNKNOW)] == [8, 12, 0]
    assert as_transaction_state(None) is UNKNOW
    assert as_transaction_state("COMMIT_MESSAGE") is UNKNOW  # only real states count
    assert as_transaction_state(ROLLBACK) is ROLLBACK
    msg = Message(TOPIC, b"x")
    assert run_local_transaction(lambda m, a: COMMIT, msg, None) == (COMMIT, None)

    def boom(m: Message, a: Any) -> LocalTransactionState:
        raise ValueError("db down")

    state, error = run_local_transaction(boom, msg, None)
    assert state is UNKNOW and isinstance(error, ValueError)


# ----------------------------------------------------------------------------- the send flow


@pytest.mark.parametrize("state", [COMMIT, ROLLBACK, UNKNOW])
def test_half_send_then_end_transaction_oneway(state: LocalTransactionState) -> None:
    seen: list[tuple[Message, Any]] = []

    def local(msg: Message, arg: Any) -> LocalTransactionState:
        seen.append((msg, arg))
        return state

    async def body(broker: TxBroker) -> None:
        async with AsyncTransactionProducer(broker.addr, producer_group="pg-tx") as producer:
            msg = Message(TOPIC, b"order-1", tags="A", keys="k1")
            result = await producer.send_message_in_transaction(msg, local, arg={"n": 1})
            (end,) = await broker.end_of(1)
        (send,) = broker.sends
        props = props_of(send)
        assert props[MessageConst.TRANSACTION_PREPARED] == "true"
        assert props[MessageConst.PRODUCER_GROUP] == "pg-tx"
        assert int(send.ext_fields["f"]) & SysFlag.TRANSACTION_PREPARED
        uniq = props[MessageConst.UNIQ_KEY]
        # the local transaction saw the message as sent, with the transaction id, and the arg
        assert seen[0][0].properties[MessageConst.UNIQ_KEY] == uniq and seen[0][1] == {"n": 1}
        assert MessageConst.TRANSACTION_PREPARED not in msg.properties  # the caller's message is untouched
        assert end.is_oneway
        eh = end_header(end)
        assert eh.producer_group == "pg-tx" and eh.commit_or_rollback == state.commit_or_rollback
        assert eh.tran_state_table_offset == result.queue_offset == 7
        assert eh.commit_log_offset == 1100 and eh.msg_id == result.offset_msg_id
        assert eh.transaction_id == uniq and eh.from_transaction_check is False and end.remark is None
        assert result.send_status is SendStatus.SEND_OK and result.local_transaction_state is state
        assert result.msg_id == result.transaction_id == uniq
        assert result.message_queue.topic == TOPIC

    run(body)


def test_local_transaction_exception_or_none_is_unknow_with_remark() -> None:
    def boom(msg: Message, arg: Any) -> LocalTransactionState:
        raise RuntimeError("db down")

    async def nothing(msg: Message, arg: Any) -> None:
        return None

    async def body(broker: TxBroker) -> None:
        async with AsyncTransactionProducer(broker.addr, producer_group="pg-tx") as producer:
            r1 = await producer.send_message_in_transaction(Message(TOPIC, b"a"), boom)
            r2 = await producer.send_message_in_transaction(Message(TOPIC, b"b"), nothing)
            ends = await broker.end_of(2)
        assert r1.local_transaction_state is UNKNOW and r2.local_transaction_state is UNKNOW
        assert [end_header(e).commit_or_rollback for e in ends] == [0, 0]
        assert ends[0].remark is not None and "db down" in ends[0].remark
        assert ends[0].remark.startswith("executeLocalTransactionBranch exception")

    run(body)


def test_stored_but_not_ok_rolls_back_without_retry_or_local_transaction() -> None:
    calls: list[Message] = []

    async def body(broker: TxBroker) -> None:
        broker.send_codes = [ResponseCode.FLUSH_DISK_TIMEOUT]
        async with AsyncTransactionProducer(
            broker.addr, producer_group="pg-tx", retry_another_broker_when_not_store_ok=True
        ) as producer:

            def local(msg: Message, arg: Any) -> LocalTransactionState:
                calls.append(msg)
                return COMMIT

            result = await producer.send_message_in_transaction(Message(TOPIC, b"x"), local)
            (end,) = await broker.end_of(1)
        assert len(broker.sends) == 1 and not calls
        assert result.send_status is SendStatus.FLUSH_DISK_TIMEOUT
        assert result.local_transaction_state is ROLLBACK and end_header(end).commit_or_rollback == 12

    run(body)


def test_refused_half_send_is_retried_with_the_same_transaction_id_but_not_after_a_timeout() -> None:
    async def body(broker: TxBroker) -> None:
        async with AsyncTransactionProducer(broker.addr, producer_group="pg-tx") as producer:
            broker.send_codes = [ResponseCode.SYSTEM_BUSY]
            result = await producer.send_message_in_transaction(Message(TOPIC, b"x"), lambda m, a: COMMIT)
            assert len(broker.sends) == 2
            ids = {props_of(s)[MessageConst.UNIQ_KEY] for s in broker.sends}
            assert ids == {result.transaction_id}
            broker.send_codes = [-1]
            with pytest.raises(MQClientError) as info:
                await producer.send_message_in_transaction(
                    Message(TOPIC, b"y"), lambda m, a: COMMIT, timeout_ms=500
                )
            assert len(broker.sends) == 3  # a timed-out half message may be stored: no second copy
            assert "timeout" in str(info.value).lower()
            broker.send_codes = [ResponseCode.MESSAGE_ILLEGAL]
            with pytest.raises(Exception) as refused:
                await producer.send_message_in_transaction(Message(TOPIC, b"z"), lambda m, a: COMMIT)
            assert getattr(refused.value, "code", None) == ResponseCode.MESSAGE_ILLEGAL
            assert "canned" in str(refused.value)
        assert len(broker.ends) == 1

    run(body)


def test_batches_delays_and_missing_local_transaction_are_refused() -> None:
    async def body(broker: TxBroker) -> None:
        async with AsyncTransactionProducer(broker.addr, producer_group="pg-tx") as producer:
            with pytest.raises(MQClientError, match="batch"):
                await producer.send_message_in_transaction([Message(TOPIC, b"a")], lambda m, a: COMMIT)  # type: ignore[arg-type]
            with pytest.raises(MQClientError, match="delayed"):
                await producer.send_message_in_transaction(
                    Message(TOPIC, b"a", delay_time_level=3), lambda m, a: COMMIT
                )
            with pytest.raises(MQClientError, match="no local transaction"):
                await producer.send_message_in_transaction(Message(TOPIC, b"a"))
        assert not broker.sends

    run(body)


# ----------------------------------------------------------------------------- check-back


class Listener:
    def __init__(self, answer: LocalTransactionState) -> None:
        self.answer = answer
        self.checked: list[MessageExt] = []
        self.threads: set[str] = set()

    def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
        return UNKNOW

    def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
        self.checked.append(msg)
        self.threads.add(threading.current_thread().name)
        return self.answer


def test_heartbeat_names_the_group_and_check_back_answers_with_the_header_offsets() -> None:
    listener = Listener(COMMIT)

    async def body(broker: TxBroker) -> None:
        async with AsyncTransactionProducer(
            broker.addr, producer_group="pg-tx", transaction_listener=listener
        ) as producer:
            result = await producer.send_message_in_transaction(Message(TOPIC, b"x"))
            assert result.local_transaction_state is UNKNOW
            await broker.end_of(1)
            # registered with the broker at once (not only at the 30 s tick), as a producer
            hb = broker.heartbeats[0][0]
            assert {"groupName": "pg-tx"} in hb["producerDataSet"]
            header = h.CheckTransactionStateRequestHeader(
                tran_state_table_offset=42,
                commit_log_offset=9000,
                msg_id=result.msg_id,
                transaction_id=result.transaction_id,
                offset_msg_id=result.offset_msg_id,
                topic=TOPIC,
            )
            await broker.check_back(half_props(result.msg_id), header)
            ends = await broker.end_of(2)
        answer = ends[1]
        eh = end_header(answer)
        assert answer.is_oneway and eh.from_transaction_check is True
        assert (eh.tran_state_table_offset, eh.commit_log_offset) == (42, 9000)
        assert eh.commit_or_rollback == 8 and eh.producer_group == "pg-tx"
        assert eh.transaction_id == result.transaction_id and eh.msg_id == result.msg_id
        (checked,) = listener.checked
        assert checked.topic == TOPIC and checked.body == b"half" and checked.uniq_key == result.msg_id
        assert all(t.startswith("rocketq-tx-check") for t in listener.threads)  # the check pool

    run(body)


def test_check_back_without_transaction_id_uses_uniq_key_and_async_checker_errors_are_unknow() -> None:
    async def check(msg: MessageExt) -> LocalTransactionState:
        if msg.body == b"half" and msg.properties.get(MessageConst.TRANSACTION_CHECK_TIMES) == "2":
            raise RuntimeError("lost the database")
        return ROLLBACK

    async def body(broker: TxBroker) -> None:
        async with AsyncTransactionProducer(
            broker.addr, producer_group="pg-tx", check_listener=check
        ) as producer:
            await producer.send_message_in_transaction(Message(TOPIC, b"x"), lambda m, a: UNKNOW)
            await broker.end_of(1)
            header = h.CheckTransactionStateRequestHeader(tran_state_table_offset=5, commit_log_offset=77)
            await broker.check_back(half_props("AA" * 16), header)
            await broker.end_of(2)
            props = dict(half_props("BB" * 16), TRANSACTION_CHECK_TIMES="2")
            await broker.check_back(props, header)
            # a check for a group this client does not produce for, or an undecodable one, is ignored
            await broker.check_back(dict(half_props("CC" * 16), PGROUP="other"), header)
            garbage = RemotingCommand.request(
                RequestCode.CHECK_TRANSACTION_STATE,
                header.to_ext_fields(),
                b"\x00\x00\x00\x09garbage",
                oneway=True,
            )
            await broker.heartbeats[-1][1].invoke_oneway(garbage)
            ends = await broker.end_of(3)
            await asyncio.sleep(0.2)
        assert len(ends) == 3
        first, second = end_header(ends[1]), end_header(ends[2])
        assert first.transaction_id == "AA" * 16 and first.msg_id == "AA" * 16
        assert first.commit_or_rollback == 12 and first.from_transaction_check
        assert second.commit_or_rollback == 0 and ends[2].remark is not None
        assert "lost the database" in ends[2].remark

    run(body)


def test_check_queue_is_bounded_and_checks_stop_at_shutdown() -> None:
    release = threading.Event()

    def slow(msg: MessageExt) -> LocalTransactionState:
        release.wait(5)
        return COMMIT

    async def body(broker: TxBroker) -> None:
        producer = AsyncTransactionProducer(
            broker.addr, producer_group="pg-tx", check_listener=slow, check_request_hold_max=1
        )
        await producer.start()
        await producer.send_message_in_transaction(Message(TOPIC, b"x"), lambda m, a: UNKNOW)
        header = h.CheckTransactionStateRequestHeader(tran_state_table_offset=1, commit_log_offset=2)
        for i in range(4):
            await broker.check_back(half_props(f"{i:032X}"), header)
        async with asyncio.timeout(5):
            while len(producer._check_tasks) < 2:
                await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)
        assert len(producer._check_tasks) == 2  # one running + one waiting; the others were dropped
        release.set()
        await broker.end_of(3)
        await producer.shutdown()
        assert len(broker.ends) == 3

    run(body)


# ----------------------------------------------------------------------------- blocking


def test_blocking_producer_runs_the_local_transaction_in_the_calling_thread() -> None:
    async def body(broker: TxBroker) -> None:
        caller = threading.get_ident()
        threads: list[int] = []

        def local(msg: Message, arg: Any) -> LocalTransactionState:
            threads.append(threading.get_ident())
            return COMMIT if arg == "ok" else ROLLBACK

        def blocking_part() -> list[Any]:
            listener = Listener(ROLLBACK)
            with TransactionProducer(broker.addr, producer_group="pg-tx", transaction_listener=listener) as p:
                results: list[Any] = [
                    p.send_message_in_transaction(Message(TOPIC, b"x"), local, "ok"),
                    p.send_message_in_transaction(Message(TOPIC, b"y"), local, "no"),
                ]
                with pytest.raises(MQClientError, match="AsyncTransactionProducer"):

                    async def coro(msg: Message, arg: Any) -> LocalTransactionState:
                        return COMMIT

                    p.send_message_in_transaction(Message(TOPIC, b"z"), coro)
                results.append(p.send(Message(TOPIC, b"plain")))
                wait_for(lambda: len(broker.ends) >= 2, "both transactions ended", 10, interval_s=0.01)
            return results

        caller = threading.get_ident()
        results = await asyncio.to_thread(blocking_part)
        assert caller not in threads and len(set(threads)) == 1  # the to_thread worker, not the loop
        assert [r.local_transaction_state for r in results[:2]] == [COMMIT, ROLLBACK]
        assert [end_header(e).commit_or_rollback for e in broker.ends] == [8, 12]
        plain = broker.sends[-1]
        assert not int(plain.ext_fields["f"]) & SysFlag.TRANSACTION_PREPARED
        assert MessageConst.TRANSACTION_PREPARED not in props_of(plain)

    run(body)
