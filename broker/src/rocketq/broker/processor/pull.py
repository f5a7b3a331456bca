"""PULL_MESSAGE (11) and LITE_PULL_MESSAGE (361), with long polling, tag and SQL92 filtering.

Theory of operation: the request is checked (broker readable, subscription group, topic, queue
id, subscription), the piggy-backed offset commit (sysFlag COMMIT_OFFSET) is applied, and the
store is read with the transfer caps (at most
``maxTransferCountOnMessageInMemory`` messages and ``maxTransferBytesOnMessageInMemory`` bytes,
or the client's smaller ``maxMsgBytes``), so a pull response is always bounded.  The store's
``GetMessageStatus`` is mapped per B.4; a would-be PULL_NOT_FOUND with the SUSPEND flag is parked
in the :class:`~rocketq.broker.long_polling.PullRequestHoldService` for up to
``suspendTimeoutMillis`` (``shortPollingTimeMills`` when long polling is off) and re-read when a
message arrives.  The response body is the records joined once into one ``bytes``.  Reads of
recently written data (``INLINE_READ_MAX_BEHIND_BYTES`` from the CommitLog's end, page-cache
resident) run on the event loop; older data and SQL92 scans run on the bounded pull executor
(SYSTEM_BUSY ``[REJECTREQUEST]`` / ``[TIMEOUT_CLEAN_QUEUE]`` when it is saturated).

Filters: a TAG subscription is applied to the ConsumeQueue tag codes by the store; a SQL92
subscription (``expressionType=SQL92``, only with ``enablePropertyFilter=true``) is compiled once
(cached) and evaluated on each candidate record's properties by
:func:`rocketq.broker.filter.message_filter.read_matching`; ``nextBeginOffset`` moves past the
records it filtered out.  A disabled filter or an expression that does not parse is answered
SUBSCRIPTION_PARSE_FAILED with a remark saying why (and where).
"""

from __future__ import annotations

import asyncio
import time

from rocketq.broker.executor import Busy
from rocketq.broker.filter.expression import Node
from rocketq.broker.filter.message_filter import FilteredRead, read_matching
from rocketq.broker.filter.sql92 import Sql92ParseError, compile_sql92
from rocketq.broker.processor.context import BrokerContext, parse_header
from rocketq.broker.processor.status_codes import pull_response_code
from rocketq.broker.store.status import GetMessageResult
from rocketq.client.errors import ProtocolError
from rocketq.client.remoting.codes import ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.headers import PullMessageRequestHeader, PullMessageResponseHeader
from rocketq.client.remoting.vocabulary import (
    MASTER_ID,
    ExpressionType,
    PullSysFlag,
    SubscriptionData,
    build_subscription,
    parse_expression_type,
)
from rocketq.server import Channel

__all__ = ["PullMessageProcessor", "compile_sql92_subscription"]

#: A pull whose first record lies within this many bytes of the CommitLog's end is read on the
#: event loop (the pages were written recently and sit in the page cache); older data may fault
#: pages in from disk and is read on the bounded pull executor.
INLINE_READ_MAX_BEHIND_BYTES = 256 * 1024 * 1024

Filter = frozenset[int] | Node | None  # tag codes, a compiled SQL92 expression, or everything


def compile_sql92_subscription(enable_property_filter: bool, text: str) -> Node | str:
    """The compiled SQL92 expression of a subscription, or the SUBSCRIPTION_PARSE_FAILED remark."""
    if not enable_property_filter:
        return (
            "The broker does not support consumer to filter message by SQL92: set enablePropertyFilter=true "
            "in broker.conf to enable SQL92 property filtering"
        )
    try:
        return compile_sql92(text)
    except Sql92ParseError as exc:
        return f"{exc} in [{text}]"


class PullMessageProcessor:
    """Answers pulls; registered for PULL_MESSAGE and LITE_PULL_MESSAGE."""

    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    async def process(self, request: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        header = parse_header(request, PullMessageRequestHeader)
        if isinstance(header, RemotingCommand):
            return header
        checked = self._check(request, header)
        if isinstance(checked, RemotingCommand):
            return checked
        msg_filter = checked
        ctx = self.ctx
        if header.sys_flag & PullSysFlag.COMMIT_OFFSET and ctx.config.is_master:
            ctx.offsets.commit_offset(header.consumer_group, header.topic, header.queue_id, header.commit_offset)
        suspend = bool(header.sys_flag & PullSysFlag.SUSPEND)
        timeout_ms = header.suspend_timeout_millis if ctx.config.long_polling_enable else ctx.config.short_polling_time_ms
        deadline = time.monotonic() + max(timeout_ms, 0) / 1000.0
        while True:
            try:
                response, code = await self._read(request, header, msg_filter)
            except Busy as busy:
                ctx.stats.busy_rejects += 1
                return request.make_response(ResponseCode.SYSTEM_BUSY, busy.remark)
            remaining_ms = int((deadline - time.monotonic()) * 1000)
            if code != ResponseCode.PULL_NOT_FOUND or not suspend or remaining_ms <= 0:
                return response
            future = ctx.hold.hold(
                header.topic, header.queue_id, header.queue_offset, remaining_ms,
                lambda: int(ctx.store.get_max_offset_in_queue(header.topic, header.queue_id)),
            )
            if future is None:
                if ctx.hold.held_count >= ctx.config.max_suspended_pulls:
                    ctx.stats.busy_rejects += 1
                    return request.make_response(
                        ResponseCode.SYSTEM_BUSY,
                        f"[REJECTREQUEST]system busy, too many suspended pulls ({ctx.hold.held_count})",
                    )
                return response  # shutting down: answer with what the store has
            if not await asyncio.shield(future):
                suspend = False  # timed out or shutdown: one last read, then answer

    def _check(self, request: RemotingCommand, header: PullMessageRequestHeader) -> RemotingCommand | Filter:
        """A ready error response, or the filter to apply (None = every message)."""
        ctx = self.ctx
        if not ctx.readable:
            return request.make_response(
                ResponseCode.NO_PERMISSION, f"the broker[{ctx.broker_addr}] pulling message is forbidden"
            )
        sgc = ctx.groups.find(header.consumer_group)
        if sgc is None:
            return request.make_response(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group [{header.consumer_group}] does not exist, apply first please!",
            )
        if not sgc.consume_enable:
            return request.make_response(
                ResponseCode.NO_PERMISSION, f"subscription group no permission, {header.consumer_group}"
            )
        tc = ctx.topics.select(header.topic)
        if tc is None:
            return request.make_response(
                ResponseCode.TOPIC_NOT_EXIST, f"topic[{header.topic}] not exist, apply first please!"
            )
        if not tc.is_readable:
            return request.make_response(
                ResponseCode.NO_PERMISSION, f"the topic[{header.topic}] pulling message is forbidden"
            )
        if not 0 <= header.queue_id < tc.read_queue_nums:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR,
                f"queueId[{header.queue_id}] is illegal, topic:[{header.topic}] "
                f"topicConfig.readQueueNums:[{tc.read_queue_nums}] consumer:[{header.consumer_group}]",
            )
        sub = self._subscription(request, header)
        if isinstance(sub, RemotingCommand):
            return sub
        if sub.expression_type is ExpressionType.SQL92:
            return self._sql92(request, sub.sub_string)
        return None if sub.is_all else sub.code_set

    def _sql92(self, request: RemotingCommand, text: str) -> RemotingCommand | Node:
        compiled = compile_sql92_subscription(self.ctx.config.enable_property_filter, text)
        if isinstance(compiled, str):
            return request.make_response(ResponseCode.SUBSCRIPTION_PARSE_FAILED, compiled)
        return compiled

    def _subscription(self, request: RemotingCommand, header: PullMessageRequestHeader) -> SubscriptionData | RemotingCommand:
        if header.sys_flag & PullSysFlag.SUBSCRIPTION:
            try:
                expression_type = parse_expression_type(header.expression_type)
            except ProtocolError:
                return request.make_response(
                    ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                    f"The broker does not support consumer to filter message by {header.expression_type}",
                )
            return build_subscription(header.topic, header.subscription, expression_type, header.sub_version)
        group = self.ctx.consumers.get(header.consumer_group)
        if group is None:
            return request.make_response(
                ResponseCode.SUBSCRIPTION_NOT_EXIST,
                f"the consumer's group info not exist, group: {header.consumer_group}",
            )
        sub = group.subscriptions.get(header.topic)
        if sub is None:
            return request.make_response(
                ResponseCode.SUBSCRIPTION_NOT_EXIST,
                f"the consumer's subscription not exist, group: {header.consumer_group} topic: {header.topic}",
            )
        if sub.sub_version < header.sub_version:
            return request.make_response(
                ResponseCode.SUBSCRIPTION_NOT_LATEST,
                f"the consumer's subscription not latest, group: {header.consumer_group}",
            )
        return sub

    async def _read(self, request: RemotingCommand, header: PullMessageRequestHeader,
                    msg_filter: Filter) -> tuple[RemotingCommand, ResponseCode]:
        ctx = self.ctx
        cfg = ctx.config
        max_nums = max(1, min(header.max_msg_nums, cfg.max_transfer_count_on_message_in_memory))
        max_bytes = cfg.max_transfer_bytes_on_message_in_memory
        if header.max_msg_bytes is not None and header.max_msg_bytes > 0:
            max_bytes = min(max_bytes, header.max_msg_bytes)
        store = ctx.store

        def read() -> tuple[FilteredRead | GetMessageResult, bytes]:
            if isinstance(msg_filter, Node):
                filtered = read_matching(store, header.consumer_group, header.topic, header.queue_id,
                                         header.queue_offset, max_nums, max_bytes, msg_filter)
                return filtered, filtered.body
            result = store.get_message(header.consumer_group, header.topic, header.queue_id,
                                       header.queue_offset, max_nums, max_bytes, msg_filter)
            try:
                body = b"".join(result.buffers) if result.buffers else b""
            finally:
                result.release()
            return result, body

        if not isinstance(msg_filter, Node) and store.check_in_mem_by_consume_offset(
                header.topic, header.queue_id, header.queue_offset, INLINE_READ_MAX_BEHIND_BYTES):
            result, body = read()  # page-cache resident: a memcpy on the loop beats two thread hops
        else:
            result, body = await ctx.pull_executor.run(read)
        code = pull_response_code(result.status, header.queue_offset)
        response_header = PullMessageResponseHeader(
            suggest_which_broker_id=MASTER_ID,
            next_begin_offset=result.next_begin_offset,
            min_offset=result.min_offset,
            max_offset=result.max_offset,
        )
        if code == ResponseCode.SUCCESS:
            ctx.stats.get_found += 1
            ctx.stats.get_messages += result.msg_count
        else:
            body = b""
        remark = None if code == ResponseCode.SUCCESS else result.status.name
        response = request.make_response(code, remark, response_header.to_ext_fields(), body)
        return response, code
