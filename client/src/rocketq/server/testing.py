"""Scripted servers for client tests: a POP cluster, a test double of the wire, not a broker.

``PopServer`` plays a NameServer and a broker that answers POP_MESSAGE, ACK_MESSAGE,
BATCH_ACK_MESSAGE and CHANGE_MESSAGE_INVISIBLETIME with the header strings RocketMQ 5 brokers
send, built with the protocol module's own builders; a message whose handle is not acked in time
comes back.  :func:`pop_cluster` starts ``n`` of them serving topic ``T`` (``QUEUES`` queues
each), :func:`run` runs a test coroutine with a 30 s bound.  The answers check what a broker
would refuse with ``assert``: a wrong request fails the test that made it.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from typing import Any

from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.headers import SendMessageRequestHeaderV2
from rocketq.client.remoting.message import encode_stored_message
from rocketq.client.remoting.msgid import encode_offset_msg_id
from rocketq.client.remoting.pop import (
    AckMessageRequestHeader,
    BatchAckMessageRequestBody,
    ChangeInvisibleTimeRequestHeader,
    ExtraInfo,
    PopMessageRequestHeader,
    RetryFlag,
    join_info,
    msg_offset_info_entry,
    pop_retry_topic_of,
    real_topic,
    start_offset_info_entry,
)
from rocketq.client.remoting.properties import MessageConst
from rocketq.client.remoting.route import BrokerData, QueueData, TopicRouteData
from rocketq.client.transport.aio import Channel
from rocketq.server import RemotingServer

__all__ = ["QUEUES", "PopServer", "pop_cluster", "run"]

QUEUES = 2


class PopServer:
    """NameServer + POP broker double: per (topic, queue) message lists, leases by offset."""

    def __init__(self, name: str, *, pop: bool = True, batch_ack: bool = True) -> None:
        self.name = name
        self.server = RemotingServer()
        self.addr = ""
        self.topics: dict[str, list[PopServer]] = {}
        self.store: dict[tuple[str, int], list[bytes]] = {}
        self.visible_at: dict[tuple[str, int, int], int] = {}  # leased offsets -> ms
        self.acked: set[tuple[str, int, int]] = set()
        self.requests: list[RemotingCommand] = []
        self.pop_code: int | None = None  # a canned failure answer to POP_MESSAGE
        self.polls: list[int] = []
        self.pop_headers: list[PopMessageRequestHeader] = []
        self.stall_pops = 0  # pops left to answer too late (the client's answer is lost)
        codes = [
            RequestCode.GET_ROUTEINFO_BY_TOPIC,
            RequestCode.HEART_BEAT,
            RequestCode.UNREGISTER_CLIENT,
            RequestCode.SEND_MESSAGE_V2,
        ]
        if pop:
            codes += [
                RequestCode.POP_MESSAGE,
                RequestCode.ACK_MESSAGE,
                RequestCode.CHANGE_MESSAGE_INVISIBLETIME,
            ]
        if pop and batch_ack:
            codes.append(RequestCode.BATCH_ACK_MESSAGE)
        for code in codes:
            self.server.register(code, self._handle)

    async def start(self) -> None:
        host, port = await self.server.start()
        self.addr = f"{host}:{port}"

    def put(self, topic: str, queue_id: int, body: bytes, properties: str = "") -> int:
        records = self.store.setdefault((topic, queue_id), [])
        host, _, port = self.addr.rpartition(":")
        records.append(
            encode_stored_message(
                topic=topic, queue_id=queue_id, born_timestamp=1, born_host=("10.0.0.9", 5),
                store_host=(host, int(port)), body=body, queue_offset=len(records),
                physical_offset=1000 + len(records), store_timestamp=int(time.time() * 1000),
                properties=properties or f"{MessageConst.UNIQ_KEY}\x01{topic}-{queue_id}-{len(records)}\x02",
            )
        )  # fmt: skip
        return len(records) - 1

    async def _handle(self, cmd: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        self.requests.append(cmd)
        result = getattr(self, f"_on_{RequestCode(cmd.code).name.lower()}")(cmd)
        return await result if asyncio.iscoroutine(result) else result  # type: ignore[no-any-return]

    def _on_get_routeinfo_by_topic(self, cmd: RemotingCommand) -> RemotingCommand:
        brokers = self.topics.get(cmd.ext_fields["topic"])
        if brokers is None:
            return cmd.make_response(ResponseCode.TOPIC_NOT_EXIST, "No topic route info in name server")
        route = TopicRouteData(
            [QueueData(b.name, QUEUES, QUEUES, 6) for b in brokers],
            [BrokerData("c", b.name, {0: b.addr}) for b in brokers],
        )
        return cmd.make_response(ResponseCode.SUCCESS, None, None, route.to_json())

    def _on_send_message_v2(self, cmd: RemotingCommand) -> RemotingCommand:
        hd = SendMessageRequestHeaderV2.from_ext_fields(cmd.ext_fields)
        offset = self.put(hd.topic, hd.queue_id, cmd.body, hd.properties or "")
        host, _, port = self.addr.rpartition(":")
        ext = {"msgId": encode_offset_msg_id(host, int(port), offset), "queueId": str(hd.queue_id),
               "queueOffset": str(offset)}  # fmt: skip
        return cmd.make_response(ResponseCode.SUCCESS, None, ext)

    def _on_heart_beat(self, cmd: RemotingCommand) -> RemotingCommand:
        data = json.loads(cmd.body)
        for consumer in data["consumerDataSet"]:
            assert consumer["consumeType"] == "CONSUME_POP"
        return cmd.make_response(ResponseCode.SUCCESS, None)

    def _on_unregister_client(self, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.make_response(ResponseCode.SUCCESS, None)

    async def _on_pop_message(self, cmd: RemotingCommand) -> RemotingCommand:
        hd = PopMessageRequestHeader.from_ext_fields(cmd.ext_fields)
        self.polls.append(hd.poll_time)
        self.pop_headers.append(hd)
        if self.stall_pops:  # answered after the client gave up (and leasing nothing)
            self.stall_pops -= 1
            await asyncio.sleep(1.0)
            return cmd.make_response(ResponseCode.PULL_NOT_FOUND, "too late")
        if self.pop_code is not None:
            return cmd.make_response(self.pop_code, f"canned {self.pop_code}")
        now = int(time.time() * 1000)
        found: list[tuple[str, int, int]] = []
        for topic in (pop_retry_topic_of(hd.topic, hd.consumer_group, RetryFlag.RETRY), hd.topic):
            for qid in range(QUEUES):
                for off, _ in enumerate(self.store.get((topic, qid), [])):
                    key = (topic, qid, off)
                    if (
                        key in self.acked
                        or self.visible_at.get(key, 0) > now
                        or len(found) >= hd.max_msg_nums
                    ):
                        continue
                    found.append(key)
        if not found:
            await asyncio.sleep(min(hd.poll_time, 200) / 1000)  # a short stand-in for the long poll
            return cmd.make_response(ResponseCode.PULL_NOT_FOUND, "no message", {"popTime": "0",
                                     "invisibleTime": "0", "reviveQid": "0", "restNum": "0"})  # fmt: skip
        starts, offsets = [], []
        for topic, qid in sorted({(t, q) for t, q, _ in found}):
            offs = [o for t, q, o in found if (t, q) == (topic, qid)]
            starts.append(start_offset_info_entry(topic, qid, offs[0]))
            offsets.append(msg_offset_info_entry(topic, qid, offs))
        for key in found:
            self.visible_at[key] = now + hd.invisible_time
        ext = {
            "popTime": str(now), "invisibleTime": str(hd.invisible_time), "reviveQid": "3", "restNum": "0",
            "startOffsetInfo": join_info(starts) or "", "msgOffsetInfo": join_info(offsets) or "",
        }  # fmt: skip
        body = b"".join(self.store[(t, q)][o] for t, q, o in found)
        return cmd.make_response(ResponseCode.SUCCESS, None, ext, body)

    def _on_ack_message(self, cmd: RemotingCommand) -> RemotingCommand:
        hd = AckMessageRequestHeader.from_ext_fields(cmd.ext_fields)
        info = ExtraInfo.parse(hd.extra_info)
        assert info.queue_id == hd.queue_id and info.broker_name == self.name
        key = (hd.topic, hd.queue_id, hd.offset)
        if key not in self.visible_at:
            return cmd.make_response(ResponseCode.NO_MESSAGE, f"no such message {key}")
        self.acked.add(key)
        return cmd.make_response(ResponseCode.SUCCESS, None)

    def _on_batch_ack_message(self, cmd: RemotingCommand) -> RemotingCommand:
        body = BatchAckMessageRequestBody.decode(cmd.body)
        assert body.broker_name == self.name
        for ack in body.acks:
            topic = real_topic(ack.topic, ack.consumer_group, ack.retry_flag)
            for index in ack.ack_indexes:
                self.acked.add((topic, ack.queue_id, ack.start_offset + index))
        return cmd.make_response(ResponseCode.SUCCESS, None)

    def _on_change_message_invisibletime(self, cmd: RemotingCommand) -> RemotingCommand:
        hd = ChangeInvisibleTimeRequestHeader.from_ext_fields(cmd.ext_fields)
        key = (hd.topic, hd.queue_id, hd.offset)
        if key not in self.visible_at:
            return cmd.make_response(ResponseCode.NO_MESSAGE, f"no such message {key}")
        now = int(time.time() * 1000)
        self.visible_at[key] = now + hd.invisible_time
        ext = {"popTime": str(now), "invisibleTime": str(hd.invisible_time), "reviveQid": "5"}
        return cmd.make_response(ResponseCode.SUCCESS, None, ext)


@asynccontextmanager
async def pop_cluster(
    n: int = 1, *, pop: bool = True, batch_ack: bool = True
) -> AsyncIterator[list[PopServer]]:
    servers = [PopServer(f"broker-{chr(97 + i)}", pop=pop, batch_ack=batch_ack) for i in range(n)]
    for s in servers:
        await s.start()
    servers[0].topics["T"] = servers
    try:
        yield servers
    finally:
        for s in servers:
            await s.server.stop(0)


def run(coro: Awaitable[Any]) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 30))
