"""MQClientAPI: the typed request/response layer between the client APIs and the transport.

Each method builds one RemotingCommand from a typed header (:mod:`rocketq.client.remoting.headers`),
sends it with the asyncio :class:`~rocketq.client.transport.aio.RemotingClient` and turns the
response into a typed result, or raises :class:`~rocketq.client.errors.MQBrokerError` carrying the
response code, the remark and the address.  Expected outcomes stay values: a pull that found
nothing is a :class:`PullResult` with a status, an unknown consumer offset is ``None``.

NameServer requests go to one address of the ``;``-separated list and fail over to the next on
a transport error.  Every request carries ``version`` 401 (V4_9_4) so Java NameServers answer
standard JSON.  One MQClientAPI serves a whole client instance (producers, consumers, admin of
one process share it through :class:`~rocketq.client.instance.ClientInstance`) and owns the
``client_id`` (``ip@pid#nanotime``) that brokers know it by.

:class:`BlockingMQClientAPI` offers the same methods as blocking calls, running the asyncio
instance on the background loop (:mod:`rocketq.client.loop`).  Broker/NameServer bodies that
are JSON are parsed leniently (fastjson writes unquoted and object keys).

rocketq's batched transactions (:mod:`rocketq.client.remoting.txn_batch`) are feature-detected
per broker with :meth:`MQClientAPI.supports_transaction_batch` (GET_BROKER_RUNTIME_INFO, cached per
address) and ended with :meth:`MQClientAPI.end_transaction_ranges`; the producer-level API is
:mod:`rocketq.client.producer.transaction_batch`.
"""

from __future__ import annotations

import functools
import json
import random
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from typing import Any, TypeVar

from rocketq.client.blocking_facade import blocking_method
from rocketq.client.config import ClientConfig, local_ip, make_client_id, parse_namesrv_addr
from rocketq.client.errors import (
    MQBrokerError,
    MQClientError,
    NameServerUnreachableError,
    NoRouteError,
    RemotingError,
)
from rocketq.client.loop import acquire_loop, release_loop
from rocketq.client.model import Message, MessageExt, PullResult, PullStatus, SendResult, SendStatus
from rocketq.client.remoting import headers as h
from rocketq.client.remoting.acl import sign_request
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.frame import SerializeType
from rocketq.client.remoting.lenient_json import loads as lenient_loads
from rocketq.client.remoting.message import iter_stored_messages
from rocketq.client.remoting.properties import MessageConst
from rocketq.client.remoting.route import ClusterInfo, TopicRouteData
from rocketq.client.remoting.txn_batch import (
    ENDED_FIELD,
    FEATURE_KEY,
    RANGES_FIELD,
    SKIPPED_FIELD,
    encode_ranges_body,
)
from rocketq.client.remoting.vip_channel import VIA_VIP_CHANNEL, vip_channel_addr
from rocketq.client.remoting.vocabulary import MessageQueue, PullSysFlag, SubscriptionData
from rocketq.client.transport.aio import RemotingClient

__all__ = [
    "BlockingMQClientAPI",
    "MQClientAPI",
    "PullSysFlag",
    "local_ip",
    "make_client_id",
    "parse_namesrv_addr",
]

Processor = Callable[[RemotingCommand, Any], Awaitable[RemotingCommand | None]]
_T = TypeVar("_T")

_SEND_STATUS = {
    ResponseCode.SUCCESS: SendStatus.SEND_OK,
    ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE,
}
_PULL_STATUS = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}


class MQClientAPI:
    """Typed RPCs to NameServers and brokers (asyncio); one per client instance."""

    def __init__(
        self,
        namesrv_addr: str | Sequence[str],
        *,
        config: ClientConfig | None = None,
        remoting: RemotingClient | None = None,
    ) -> None:
        self.config = config or ClientConfig()
        self.namesrv_addrs = parse_namesrv_addr(namesrv_addr)
        self._ns_index = random.randrange(len(self.namesrv_addrs))
        serialize = SerializeType.JSON if self.config.serialize_json else SerializeType.ROCKETMQ
        credentials = self.config.credentials
        hook = None if credentials is None else functools.partial(sign_request, credentials=credentials)
        self.remoting = remoting or RemotingClient(
            serialize_type=serialize, rpc_hook=hook, ssl_context=self.config.ssl_context()
        )
        self.client_id = make_client_id(self.config)
        self.client_ip = self.client_id.split("@", 1)[0]
        self._txn_batch_support: dict[str, bool] = {}

    # ------------------------------------------------------------------ plumbing

    @property
    def timeout_ms(self) -> int:
        return self.config.mq_client_api_timeout_ms

    def register_processor(self, code: int, processor: Processor) -> None:
        """Handle requests brokers send to us (NOTIFY_CONSUMER_IDS_CHANGED, resets...)."""
        self.remoting.register(code, processor)

    async def invoke(self, addr: str, cmd: RemotingCommand, timeout_ms: int | None = None) -> RemotingCommand:
        return await self.remoting.invoke(self.channel_addr(addr, cmd), cmd, timeout_ms or self.timeout_ms)

    async def invoke_oneway(self, addr: str, cmd: RemotingCommand) -> None:
        await self.remoting.invoke_oneway(self.channel_addr(addr, cmd), cmd)

    def channel_addr(self, addr: str, cmd: RemotingCommand) -> str:
        """Where ``cmd`` for the broker at ``addr`` goes: its VIP channel when enabled and Java
        sends that request there (rocketq.client.remoting.vip_channel), else ``addr``."""
        if self.config.vip_channel_enabled and cmd.code in VIA_VIP_CHANNEL:
            return vip_channel_addr(addr)
        return addr

    async def invoke_namesrv(self, cmd: RemotingCommand, timeout_ms: int | None = None) -> RemotingCommand:
        """Send to the current NameServer; on a transport error try the others in turn."""
        last: RemotingError | None = None
        n = len(self.namesrv_addrs)
        for i in range(n):
            addr = self.namesrv_addrs[(self._ns_index + i) % n]
            try:
                response = await self.remoting.invoke(addr, cmd, timeout_ms or self.timeout_ms)
            except RemotingError as exc:
                last = exc
                continue
            self._ns_index = (self._ns_index + i) % n
            return response
        assert last is not None
        raise last

    @staticmethod
    def check(response: RemotingCommand, addr: str | None, *ok: int) -> RemotingCommand:
        """Return ``response`` if its code is one of ``ok`` (default SUCCESS), else raise."""
        if response.code in (ok or (ResponseCode.SUCCESS,)):
            return response
        raise MQBrokerError.for_code(response.code, response.remark, addr)

    async def _call(
        self,
        addr: str,
        code: int,
        header: h.CommandHeader | None,
        body: bytes = b"",
        timeout_ms: int | None = None,
    ) -> RemotingCommand:
        cmd = RemotingCommand.request(code, header.to_ext_fields() if header else None, body)
        return self.check(await self.invoke(addr, cmd, timeout_ms), addr)

    async def _call_or_oneway(
        self, addr: str, cmd: RemotingCommand, oneway: bool, timeout_ms: int | None = None
    ) -> None:
        """Send ``cmd`` oneway, or two-way and raise MQBrokerError unless the answer is SUCCESS."""
        if oneway:
            await self.invoke_oneway(addr, cmd)
        else:
            self.check(await self.invoke(addr, cmd, timeout_ms), addr)

    # ------------------------------------------------------------------ NameServer

    async def get_topic_route(self, topic: str, timeout_ms: int | None = None) -> TopicRouteData:
        """GET_ROUTEINFO_BY_TOPIC; raises NoRouteError when the NameServer knows no such topic."""
        header = h.GetRouteInfoRequestHeader(topic=topic)
        cmd = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, header.to_ext_fields())
        try:
            response = await self.invoke_namesrv(cmd, timeout_ms)
        except RemotingError as exc:
            raise NameServerUnreachableError(
                topic, f"no NameServer of {';'.join(self.namesrv_addrs)} answered: {exc}"
            ) from exc
        if response.code == ResponseCode.TOPIC_NOT_EXIST:
            raise NoRouteError(topic, response.remark or "")
        self.check(response, "namesrv")
        if not response.body:
            raise NoRouteError(topic, "the NameServer returned an empty route")
        return TopicRouteData.from_json(response.body)

    async def get_broker_cluster_info(self, timeout_ms: int | None = None) -> ClusterInfo:
        cmd = RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO)
        response = self.check(await self.invoke_namesrv(cmd, timeout_ms), "namesrv")
        return ClusterInfo.from_json(response.body)

    async def get_all_topic_list(self, timeout_ms: int | None = None) -> list[str]:
        cmd = RemotingCommand.request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        response = self.check(await self.invoke_namesrv(cmd, timeout_ms), "namesrv")
        data = lenient_loads(response.body) if response.body else {}
        return sorted(str(t) for t in data.get("topicList", []))

    # ------------------------------------------------------------------ send

    async def send_message(
        self,
        addr: str,
        broker_name: str,
        msg: Message,
        header: h.SendMessageRequestHeaderV2,
        timeout_ms: int,
        *,
        body: bytes | None = None,
        msg_id: str | None = None,
    ) -> SendResult:
        """SEND_MESSAGE_V2 (SEND_BATCH_MESSAGE when ``header.batch``); ``body`` overrides msg.body
        (compressed or batch-encoded), ``msg_id`` the UNIQ_KEY reported back (batches)."""
        cmd = self._send_command(msg, header, body)
        response = await self.invoke(addr, cmd, timeout_ms)
        return self.process_send_response(addr, broker_name, msg, response, msg_id)

    async def send_message_oneway(
        self, addr: str, msg: Message, header: h.SendMessageRequestHeaderV2, *, body: bytes | None = None
    ) -> None:
        cmd = self._send_command(msg, header, body)
        cmd.flag |= 0x2
        await self.invoke_oneway(addr, cmd)

    @staticmethod
    def _send_command(
        msg: Message, header: h.SendMessageRequestHeaderV2, body: bytes | None
    ) -> RemotingCommand:
        code = RequestCode.SEND_BATCH_MESSAGE if header.batch else RequestCode.SEND_MESSAGE_V2
        return RemotingCommand.request(code, header.to_ext_fields(), msg.body if body is None else body)

    @staticmethod
    def process_send_response(
        addr: str, broker_name: str, msg: Message, response: RemotingCommand, msg_id: str | None = None
    ) -> SendResult:
        status = _SEND_STATUS.get(ResponseCode(response.code)) if response.code in _SEND_STATUS else None
        if status is None:
            raise MQBrokerError.for_code(response.code, response.remark, addr)
        rh = h.SendMessageResponseHeader.from_ext_fields(response.ext_fields)
        mq = MessageQueue(msg.topic, broker_name, rh.queue_id)
        uniq = msg_id or msg.properties.get(MessageConst.UNIQ_KEY) or rh.msg_id
        return SendResult(
            send_status=status,
            msg_id=uniq,
            offset_msg_id=rh.msg_id,
            message_queue=mq,
            queue_offset=rh.queue_offset,
            transaction_id=rh.transaction_id,
            region_id=rh.msg_region,
            trace_on=rh.trace_on is not False,
            recall_handle=rh.recall_handle,
        )

    async def recall_message(
        self, addr: str, header: h.RecallMessageRequestHeader, timeout_ms: int | None = None
    ) -> str:
        """RECALL_MESSAGE (370): cancel a timer message; the recalled message's id."""
        cmd = RemotingCommand.request(RequestCode.RECALL_MESSAGE, header.to_ext_fields())
        response = self.check(await self.invoke(addr, cmd, timeout_ms), addr)
        return h.RecallMessageResponseHeader.from_ext_fields(response.ext_fields).msg_id

    async def end_transaction(
        self,
        addr: str,
        header: h.EndTransactionRequestHeader,
        remark: str | None = None,
        *,
        oneway: bool = True,
        timeout_ms: int | None = None,
    ) -> None:
        """END_TRANSACTION (37): commit, roll back or report "unknown" for a half message.

        Oneway by default, as Java's ``endTransactionOneway`` (the broker answers nothing and a
        lost request is recovered by the broker's check-back); ``oneway=False`` waits for the
        answer and raises MQBrokerError when it is not SUCCESS.  ``remark`` carries the text of a
        local-transaction failure, as the Java client does.
        """
        cmd = RemotingCommand.request(RequestCode.END_TRANSACTION, header.to_ext_fields(), oneway=oneway)
        cmd.remark = remark
        await self._call_or_oneway(addr, cmd, oneway, timeout_ms)

    async def supports_transaction_batch(self, addr: str, timeout_ms: int | None = None) -> bool:
        """Whether the broker at ``addr`` serves rocketq's batched transactions (cached per address).

        Reads ``rocketqTransactionBatch`` from GET_BROKER_RUNTIME_INFO; an Apache RocketMQ broker
        (no such key) or a refused request gives False.  Transport errors raise and are not cached.
        """
        cached = self._txn_batch_support.get(addr)
        if cached is not None:
            return cached
        cmd = RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO)
        response = await self.invoke(addr, cmd, timeout_ms)
        supported = False
        if response.code == ResponseCode.SUCCESS and response.body:
            try:
                data = lenient_loads(response.body)
            except ValueError:
                data = None
            table = data.get("table") if isinstance(data, dict) else None
            supported = isinstance(table, dict) and str(table.get(FEATURE_KEY, "")) == "1"
        self._txn_batch_support[addr] = supported
        return supported

    async def end_transaction_ranges(
        self,
        addr: str,
        header: h.EndTransactionRequestHeader,
        ranges: Sequence[tuple[int, int]],
        timeout_ms: int | None = None,
    ) -> tuple[int, int]:
        """Ranged END_TRANSACTION (rocketq extension), two-way: ``(ended, skipped)`` half messages.

        ``header`` names the first half message of the first range; raises MQBrokerError (code
        and remark of the broker) unless the answer is SUCCESS.
        """
        ext = header.to_ext_fields()
        ext[RANGES_FIELD] = "true"
        cmd = RemotingCommand.request(RequestCode.END_TRANSACTION, ext, encode_ranges_body(ranges))
        response = self.check(await self.invoke(addr, cmd, timeout_ms), addr)
        fields = response.ext_fields
        return int(fields.get(ENDED_FIELD) or 0), int(fields.get(SKIPPED_FIELD) or 0)

    # ------------------------------------------------------------------ pull and offsets

    async def pull_message(
        self,
        addr: str,
        header: h.PullMessageRequestHeader,
        timeout_ms: int,
        *,
        tags_filter: Iterable[str] | None = None,
    ) -> PullResult:
        """PULL_MESSAGE (LITE_PULL_MESSAGE when the LITE_PULL sysFlag is set).

        ``tags_filter``: the subscription's tags, re-checked on the decoded messages (None or
        an empty set = no client-side filter).  Long-polling pulls need ``timeout_ms`` greater
        than ``header.suspend_timeout_millis``.
        """
        lite = bool(header.sys_flag & PullSysFlag.LITE_PULL)
        code = RequestCode.LITE_PULL_MESSAGE if lite else RequestCode.PULL_MESSAGE
        response = await self.invoke(addr, RemotingCommand.request(code, header.to_ext_fields()), timeout_ms)
        if lite and response.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
            # A broker without LITE_PULL_MESSAGE serves the same request as PULL_MESSAGE.
            cmd = RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext_fields())
            response = await self.invoke(addr, cmd, timeout_ms)
        return self.process_pull_response(addr, response, tags_filter)

    @staticmethod
    def process_pull_response(
        addr: str, response: RemotingCommand, tags_filter: Iterable[str] | None = None
    ) -> PullResult:
        if response.code not in _PULL_STATUS:
            raise MQBrokerError.for_code(response.code, response.remark, addr)
        status = _PULL_STATUS[ResponseCode(response.code)]
        rh = h.PullMessageResponseHeader.from_ext_fields(response.ext_fields)
        tags = frozenset(tags_filter) if tags_filter else None
        return PullResult(
            status=status,
            next_begin_offset=rh.next_begin_offset,
            min_offset=rh.min_offset,
            max_offset=rh.max_offset,
            suggest_which_broker_id=rh.suggest_which_broker_id,
            body=response.body if status is PullStatus.FOUND else b"",
            tags_filter=tags,
        )

    async def query_consumer_offset(
        self, addr: str, group: str, topic: str, queue_id: int, timeout_ms: int = 3000
    ) -> int | None:
        """The group's committed offset of a queue; None when the broker has none (QUERY_NOT_FOUND)."""
        header = h.QueryConsumerOffsetRequestHeader(consumer_group=group, topic=topic, queue_id=queue_id)
        cmd = RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, header.to_ext_fields())
        response = await self.invoke(addr, cmd, timeout_ms)
        if response.code == ResponseCode.QUERY_NOT_FOUND:
            return None
        self.check(response, addr)
        return h.QueryConsumerOffsetResponseHeader.from_ext_fields(response.ext_fields).offset

    async def update_consumer_offset(
        self, addr: str, group: str, topic: str, queue_id: int, offset: int, *, oneway: bool = False
    ) -> None:
        header = h.UpdateConsumerOffsetRequestHeader(
            consumer_group=group, topic=topic, queue_id=queue_id, commit_offset=offset
        )
        cmd = RemotingCommand.request(
            RequestCode.UPDATE_CONSUMER_OFFSET, header.to_ext_fields(), oneway=oneway
        )
        await self._call_or_oneway(addr, cmd, oneway)

    async def get_max_offset(
        self, addr: str, topic: str, queue_id: int, timeout_ms: int | None = None
    ) -> int:
        """The next offset to be written in the queue."""
        header = h.GetMaxOffsetRequestHeader(topic=topic, queue_id=queue_id)
        response = await self._call(addr, RequestCode.GET_MAX_OFFSET, header, timeout_ms=timeout_ms)
        return h.GetMaxOffsetResponseHeader.from_ext_fields(response.ext_fields).offset

    async def get_min_offset(
        self, addr: str, topic: str, queue_id: int, timeout_ms: int | None = None
    ) -> int:
        header = h.GetMinOffsetRequestHeader(topic=topic, queue_id=queue_id)
        response = await self._call(addr, RequestCode.GET_MIN_OFFSET, header, timeout_ms=timeout_ms)
        return h.GetMinOffsetResponseHeader.from_ext_fields(response.ext_fields).offset

    async def search_offset(
        self, addr: str, topic: str, queue_id: int, timestamp_ms: int, timeout_ms: int | None = None
    ) -> int:
        """The first offset whose store time is >= ``timestamp_ms`` (SEARCH_OFFSET_BY_TIMESTAMP)."""
        header = h.SearchOffsetRequestHeader(topic=topic, queue_id=queue_id, timestamp=timestamp_ms)
        response = await self._call(
            addr, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, header, timeout_ms=timeout_ms
        )
        return h.SearchOffsetResponseHeader.from_ext_fields(response.ext_fields).offset

    async def get_earliest_msg_storetime(
        self, addr: str, topic: str, queue_id: int, timeout_ms: int | None = None
    ) -> int:
        header = h.GetEarliestMsgStoretimeRequestHeader(topic=topic, queue_id=queue_id)
        response = await self._call(
            addr, RequestCode.GET_EARLIEST_MSG_STORETIME, header, timeout_ms=timeout_ms
        )
        return h.GetEarliestMsgStoretimeResponseHeader.from_ext_fields(response.ext_fields).timestamp

    # ------------------------------------------------------------------ group membership

    async def send_heartbeat(
        self, addr: str, heartbeat: dict[str, Any], timeout_ms: int | None = None
    ) -> None:
        """HEART_BEAT with a HeartbeatData body (B.8); ``heartbeat`` is its JSON object."""
        body = json.dumps(heartbeat, sort_keys=True, separators=(",", ":")).encode()
        await self._call(addr, RequestCode.HEART_BEAT, None, body, timeout_ms)

    async def check_client_config(
        self, addr: str, group: str, sub: SubscriptionData, timeout_ms: int | None = None
    ) -> None:
        """CHECK_CLIENT_CONFIG: whether the broker serves the subscription's expression type
        (``checkClientInBroker``); raises MQBrokerError with the broker's reason when not."""
        body = {"clientId": self.client_id, "group": group, "subscriptionData": sub.to_obj()}
        payload = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
        await self._call(addr, RequestCode.CHECK_CLIENT_CONFIG, None, payload, timeout_ms)

    async def unregister_client(
        self, addr: str, *, producer_group: str | None = None, consumer_group: str | None = None
    ) -> None:
        header = h.UnregisterClientRequestHeader(
            client_id=self.client_id, producer_group=producer_group, consumer_group=consumer_group
        )
        await self._call(addr, RequestCode.UNREGISTER_CLIENT, header)

    async def get_consumer_id_list(self, addr: str, group: str, timeout_ms: int | None = None) -> list[str]:
        """GET_CONSUMER_LIST_BY_GROUP: the client ids of the group's live members."""
        header = h.GetConsumerListByGroupRequestHeader(consumer_group=group)
        response = await self._call(
            addr, RequestCode.GET_CONSUMER_LIST_BY_GROUP, header, timeout_ms=timeout_ms
        )
        data = lenient_loads(response.body) if response.body else {}
        return [str(c) for c in data.get("consumerIdList", [])]

    def _lock_body(self, group: str, mqs: Iterable[MessageQueue]) -> bytes:
        body = {
            "clientId": self.client_id,
            "consumerGroup": group,
            "mqSet": [mq.to_obj() for mq in mqs],
            "onlyThisBroker": False,
        }
        return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()

    async def lock_batch_mq(
        self, addr: str, group: str, mqs: Iterable[MessageQueue], timeout_ms: int = 1000
    ) -> set[MessageQueue]:
        """LOCK_BATCH_MQ: the subset of ``mqs`` this client now holds the broker lock of."""
        response = await self._call(
            addr, RequestCode.LOCK_BATCH_MQ, None, self._lock_body(group, mqs), timeout_ms
        )
        data = lenient_loads(response.body) if response.body else {}
        return {MessageQueue.from_obj(obj) for obj in data.get("lockOKMQSet", [])}

    async def unlock_batch_mq(
        self,
        addr: str,
        group: str,
        mqs: Iterable[MessageQueue],
        *,
        oneway: bool = False,
        timeout_ms: int = 1000,
    ) -> None:
        cmd = RemotingCommand.request(
            RequestCode.UNLOCK_BATCH_MQ, None, self._lock_body(group, mqs), oneway=oneway
        )
        await self._call_or_oneway(addr, cmd, oneway, timeout_ms)

    async def consumer_send_message_back(
        self,
        addr: str,
        msg: MessageExt,
        group: str,
        delay_level: int,
        max_reconsume_times: int,
        timeout_ms: int | None = None,
    ) -> None:
        """CONSUMER_SEND_MSG_BACK: hand a failed message to the group's retry topic."""
        header = h.ConsumerSendMsgBackRequestHeader(
            offset=msg.physical_offset,
            group=group,
            delay_level=delay_level,
            origin_msg_id=msg.msg_id,  # Java sends getMsgId(): the UNIQ_KEY when there is one
            origin_topic=msg.topic,
            max_reconsume_times=max_reconsume_times,
        )
        await self._call(addr, RequestCode.CONSUMER_SEND_MSG_BACK, header, timeout_ms=timeout_ms)

    # ------------------------------------------------------------------ queries

    async def view_message(self, addr: str, phy_offset: int, timeout_ms: int | None = None) -> MessageExt:
        """VIEW_MESSAGE_BY_ID: the record at a CommitLog offset of the broker at ``addr``."""
        header = h.ViewMessageRequestHeader(offset=phy_offset)
        response = await self._call(addr, RequestCode.VIEW_MESSAGE_BY_ID, header, timeout_ms=timeout_ms)
        for msg in iter_stored_messages(response.body):
            return msg
        raise MQClientError(f"VIEW_MESSAGE_BY_ID at {addr} offset {phy_offset} returned no message")

    async def query_message(
        self,
        addr: str,
        topic: str,
        key: str,
        max_num: int,
        begin_ms: int,
        end_ms: int,
        *,
        unique_key: bool = False,
        timeout_ms: int | None = None,
    ) -> list[MessageExt]:
        """QUERY_MESSAGE by key (or by UNIQ_KEY) on one broker; [] when it finds nothing."""
        header = h.QueryMessageRequestHeader(
            topic=topic,
            key=key,
            max_num=max_num,
            begin_timestamp=begin_ms,
            end_timestamp=end_ms,
            unique_key_query=unique_key,
        )
        cmd = RemotingCommand.request(RequestCode.QUERY_MESSAGE, header.to_ext_fields())
        response = await self.invoke(addr, cmd, timeout_ms)
        if response.code == ResponseCode.QUERY_NOT_FOUND:
            return []
        self.check(response, addr)
        return list(iter_stored_messages(response.body))

    async def close(self) -> None:
        await self.remoting.close()


class BlockingMQClientAPI:
    """The same RPCs as :class:`MQClientAPI`, as blocking calls (run on the background loop).

    For Spark executors, CLIs and scripts.  Thread-safe: calls from several threads are
    interleaved on the one event loop.  Close it (or use it as a context manager) when done.
    """

    def __init__(self, namesrv_addr: str | Sequence[str], *, config: ClientConfig | None = None) -> None:
        self._loop = acquire_loop()
        self._closed = False

        async def make() -> MQClientAPI:
            return MQClientAPI(namesrv_addr, config=config)

        self.api = self._loop.run(make())

    @property
    def client_id(self) -> str:
        return self.api.client_id

    @property
    def namesrv_addrs(self) -> list[str]:
        return self.api.namesrv_addrs

    def run(self, coro: Coroutine[Any, Any, _T], timeout_s: float | None = None) -> _T:
        """Run a coroutine using :attr:`api` on the background loop and wait for its result."""
        return self._loop.run(coro, timeout_s)

    # The blocking twins of MQClientAPI's methods: same parameters, same docstrings.
    get_topic_route = blocking_method(MQClientAPI.get_topic_route, "api")
    get_broker_cluster_info = blocking_method(MQClientAPI.get_broker_cluster_info, "api")
    get_all_topic_list = blocking_method(MQClientAPI.get_all_topic_list, "api")
    send_message = blocking_method(MQClientAPI.send_message, "api")
    end_transaction = blocking_method(MQClientAPI.end_transaction, "api")
    supports_transaction_batch = blocking_method(MQClientAPI.supports_transaction_batch, "api")
    end_transaction_ranges = blocking_method(MQClientAPI.end_transaction_ranges, "api")
    pull_message = blocking_method(MQClientAPI.pull_message, "api")
    query_consumer_offset = blocking_method(MQClientAPI.query_consumer_offset, "api")
    update_consumer_offset = blocking_method(MQClientAPI.update_consumer_offset, "api")
    get_max_offset = blocking_method(MQClientAPI.get_max_offset, "api")
    get_min_offset = blocking_method(MQClientAPI.get_min_offset, "api")
    search_offset = blocking_method(MQClientAPI.search_offset, "api")
    get_earliest_msg_storetime = blocking_method(MQClientAPI.get_earliest_msg_storetime, "api")
    get_consumer_id_list = blocking_method(MQClientAPI.get_consumer_id_list, "api")
    view_message = blocking_method(MQClientAPI.view_message, "api")

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._loop.run(self.api.close(), 10.0)
        finally:
            release_loop(self._loop)

    def __enter__(self) -> BlockingMQClientAPI:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
