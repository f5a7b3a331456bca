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

Masters and slaves (RocketMQ 4.x ``PullMessageProcessor`` and ``DefaultMessageStore.getMessage``;
docs/replication.md "Slave metadata and reads").  Every response carries ``suggestWhichBrokerId``,
the broker the client should pull this queue from next.  With ``slaveReadEnable=false`` (the
default) it is always MASTER_ID.  With ``slaveReadEnable=true`` it is the subscription group's
``whichBrokerWhenConsumeSlowly`` (default 1) when the consumer lags so far behind that its data has
likely left the page cache — the CommitLog bytes after the last record examined exceed
``accessMessageInMemoryMaxRatio`` percent (default 40) of the machine's memory — and the group's
``brokerId`` (default 0, the master) otherwise.  A slave answers pulls from its own replicated
store, whatever ``slaveReadEnable`` says: Java 4.x sets PULL_RETRY_IMMEDIATELY on such a slave
and then overwrites it with the status's own code, so in effect the slave serves the read and
suggests the master; that is what lets consumers go on while the master is down.  Unless
``offsetCheckInSlave=true``, a slave never corrects a consumer's offset: it may simply be behind
its master, so a would-be PULL_OFFSET_MOVED becomes PULL_RETRY_IMMEDIATELY suggesting the group's
``brokerId``, and ``nextBeginOffset`` stays the requested offset.  A slave ignores the piggy-backed
commit offset (offsets are the master's; the slave copies them, see :mod:`rocketq.broker.slave_sync`).

Controller mode (RocketMQ 5's ``readUnCommitted=false``): the store cuts reads at the master's
confirm offset (``MessageStore.read_limit``); a pull that finds nothing confirmed parks as at the
queue's end and is woken when the confirm offset advances (:func:`confirm_waker`).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from rocketq.broker.executor import Busy
from rocketq.broker.filter.expression import Node
from rocketq.broker.filter.message_filter import FilteredRead, read_matching
from rocketq.broker.filter.sql92 import Sql92ParseError, compile_sql92
from rocketq.broker.metadata import SubscriptionGroupConfig
from rocketq.broker.processor.context import BrokerContext, parse_header
from rocketq.broker.processor.status_codes import pull_response_code
from rocketq.broker.store.message_store import MessageStore
from rocketq.broker.store.reader import confirmed_max_offset
from rocketq.broker.store.status import GetMessageResult, GetMessageStatus
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

__all__ = [
    "PullMessageProcessor",
    "PullSuggestion",
    "compile_sql92_subscription",
    "confirm_waker",
    "is_suggest_pulling_from_slave",
    "readable_max_offset",
    "suggest_which_broker",
    "total_physical_memory_bytes",
]

#: A pull whose first record lies within this many bytes of the CommitLog's end is read on the
#: event loop (the pages were written recently and sit in the page cache); older data may fault
#: pages in from disk and is read on the bounded pull executor.
INLINE_READ_MAX_BEHIND_BYTES = 256 * 1024 * 1024

Filter = frozenset[int] | Node | None  # tag codes, a compiled SQL92 expression, or everything

#: statuses whose ``nextBeginOffset`` is a correction of the requested offset, not progress (Java's
#: ``nextOffsetCorrection``, which a slave skips unless ``offsetCheckInSlave``)
_CORRECTING_STATUSES = frozenset(
    {
        GetMessageStatus.NO_MESSAGE_IN_QUEUE,
        GetMessageStatus.NO_MATCHED_LOGIC_QUEUE,
        GetMessageStatus.OFFSET_TOO_SMALL,
        GetMessageStatus.OFFSET_OVERFLOW_BADLY,
        GetMessageStatus.OFFSET_FOUND_NULL,
    }
)


def total_physical_memory_bytes() -> int | None:
    """The machine's physical memory (Java's ``StoreUtil.TOTAL_PHYSICAL_MEMORY_SIZE``); None if unknown."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None
    return total if total > 0 else None


def is_suggest_pulling_from_slave(
    store: MessageStore,
    topic: str,
    queue_id: int,
    requested_offset: int,
    next_begin_offset: int,
    memory_bytes: int | None,
    ratio_percent: int,
) -> bool:
    """Java's ``suggestPullingFromSlave``: the CommitLog bytes after the last record this pull
    examined (queue offset ``next_begin_offset - 1``) exceed ``ratio_percent`` of ``memory_bytes``.

    False when the pull examined nothing or the memory is unknown.
    """
    if memory_bytes is None or next_begin_offset <= requested_offset:
        return False
    cq = store.find_consume_queue(topic, queue_id)
    try:
        unit = cq.unit_at(next_begin_offset - 1) if cq is not None else None
    except ValueError:  # the segment was deleted under us
        unit = None
    if unit is None:
        return False
    in_memory = int(memory_bytes * (ratio_percent / 100.0))
    return store.max_phy_offset - unit[0] > in_memory


def readable_max_offset(store: MessageStore, topic: str, queue_id: int) -> int:
    """The queue's max offset a pull may read up to: the confirmed one in controller mode."""
    limit = store.read_limit() if store.read_limit is not None else None
    if limit is None:
        return int(store.get_max_offset_in_queue(topic, queue_id))
    cq = store.find_consume_queue(topic, queue_id)
    return confirmed_max_offset(cq, limit) if cq is not None else 0


def confirm_waker(ctx: BrokerContext) -> Callable[[], None]:
    """The replicas manager's confirm listener: wakes the parked pulls that may now read."""
    return lambda: ctx.hold.notify_confirmed(lambda t, q: readable_max_offset(ctx.store, t, q))


@dataclass(frozen=True, slots=True)
class PullSuggestion:
    """The response code and ``suggestWhichBrokerId`` a pull is answered with."""

    code: ResponseCode
    suggest_which_broker_id: int


def suggest_which_broker(
    code: ResponseCode,
    group: SubscriptionGroupConfig,
    *,
    is_slave: bool,
    slave_read_enable: bool,
    offset_check_in_slave: bool,
    pulling_from_slave: bool,
) -> PullSuggestion:
    """RocketMQ 4.x's choice of the next broker for a pull answered with ``code`` (module docstring)."""
    if slave_read_enable:
        which = group.which_broker_when_consume_slowly if pulling_from_slave else group.broker_id
    else:
        which = MASTER_ID
    if is_slave and code == ResponseCode.PULL_OFFSET_MOVED and not offset_check_in_slave:
        return PullSuggestion(ResponseCode.PULL_RETRY_IMMEDIATELY, group.broker_id)
    return PullSuggestion(code, which)


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

    def __init__(self, ctx: BrokerContext, *, memory_bytes: int | None = None) -> None:
        """``memory_bytes`` replaces the machine's memory in the slave-read heuristic (tests)."""
        self.ctx = ctx
        self.memory_bytes = total_physical_memory_bytes() if memory_bytes is None else memory_bytes

    async def process(self, request: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        header = parse_header(request, PullMessageRequestHeader)
        if isinstance(header, RemotingCommand):
            return header
        checked = self._check(request, header)
        if isinstance(checked, RemotingCommand):
            return checked
        msg_filter, group = checked
        ctx = self.ctx
        if header.sys_flag & PullSysFlag.COMMIT_OFFSET and ctx.config.is_master:
            ctx.offsets.commit_offset(
                header.consumer_group, header.topic, header.queue_id, header.commit_offset
            )
        suspend = bool(header.sys_flag & PullSysFlag.SUSPEND)
        timeout_ms = (
            header.suspend_timeout_millis
            if ctx.config.long_polling_enable
            else ctx.config.short_polling_time_ms
        )
        deadline = time.monotonic() + max(timeout_ms, 0) / 1000.0
        while True:
            try:
                response, code = await self._read(request, header, msg_filter, group)
            except Busy as busy:
                ctx.stats.busy_rejects += 1
                return request.make_response(ResponseCode.SYSTEM_BUSY, busy.remark)
            remaining_ms = int((deadline - time.monotonic()) * 1000)
            if code != ResponseCode.PULL_NOT_FOUND or not suspend or remaining_ms <= 0:
                return response
            future = ctx.hold.hold(
                header.topic,
                header.queue_id,
                header.queue_offset,
                remaining_ms,
                lambda: readable_max_offset(ctx.store, header.topic, header.queue_id),
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

    def _check(
        self, request: RemotingCommand, header: PullMessageRequestHeader
    ) -> RemotingCommand | tuple[Filter, SubscriptionGroupConfig]:
        """A ready error response, or the filter to apply (None = every message) and the group."""
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
            compiled = self._sql92(request, sub.sub_string)
            return compiled if isinstance(compiled, RemotingCommand) else (compiled, sgc)
        return (None if sub.is_all else sub.code_set), sgc

    def _sql92(self, request: RemotingCommand, text: str) -> RemotingCommand | Node:
        compiled = compile_sql92_subscription(self.ctx.config.enable_property_filter, text)
        if isinstance(compiled, str):
            return request.make_response(ResponseCode.SUBSCRIPTION_PARSE_FAILED, compiled)
        return compiled

    def _subscription(
        self, request: RemotingCommand, header: PullMessageRequestHeader
    ) -> SubscriptionData | RemotingCommand:
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
                f"the consumer's subscription not exist, group: {header.consumer_group} "
                f"topic: {header.topic}",
            )
        if sub.sub_version < header.sub_version:
            return request.make_response(
                ResponseCode.SUBSCRIPTION_NOT_LATEST,
                f"the consumer's subscription not latest, group: {header.consumer_group}",
            )
        return sub

    async def _read(
        self,
        request: RemotingCommand,
        header: PullMessageRequestHeader,
        msg_filter: Filter,
        group: SubscriptionGroupConfig,
    ) -> tuple[RemotingCommand, ResponseCode]:
        ctx = self.ctx
        cfg = ctx.config
        max_nums = max(1, min(header.max_msg_nums, cfg.max_transfer_count_on_message_in_memory))
        max_bytes = cfg.max_transfer_bytes_on_message_in_memory
        if header.max_msg_bytes is not None and header.max_msg_bytes > 0:
            max_bytes = min(max_bytes, header.max_msg_bytes)
        store = ctx.store

        def read() -> tuple[FilteredRead | GetMessageResult, bytes]:
            if isinstance(msg_filter, Node):
                filtered = read_matching(
                    store,
                    header.consumer_group,
                    header.topic,
                    header.queue_id,
                    header.queue_offset,
                    max_nums,
                    max_bytes,
                    msg_filter,
                )
                return filtered, filtered.body
            result = store.get_message(
                header.consumer_group,
                header.topic,
                header.queue_id,
                header.queue_offset,
                max_nums,
                max_bytes,
                msg_filter,
            )
            try:
                body = b"".join(result.buffers) if result.buffers else b""
            finally:
                result.release()
            return result, body

        hot = not isinstance(msg_filter, Node) and store.check_in_mem_by_consume_offset(
            header.topic, header.queue_id, header.queue_offset, INLINE_READ_MAX_BEHIND_BYTES
        )
        if hot:
            result, body = read()  # page-cache resident: a memcpy on the loop beats two thread hops
        else:
            result, body = await ctx.pull_executor.run(read)
        suggestion = self._suggest(header, result, group)
        code = suggestion.code
        next_begin_offset = result.next_begin_offset
        if not cfg.is_master and not cfg.offset_check_in_slave and result.status in _CORRECTING_STATUSES:
            next_begin_offset = header.queue_offset  # a slave may be behind: never move the consumer
        response_header = PullMessageResponseHeader(
            suggest_which_broker_id=suggestion.suggest_which_broker_id,
            next_begin_offset=next_begin_offset,
            min_offset=result.min_offset,
            max_offset=result.max_offset,
        )
        if code == ResponseCode.SUCCESS:
            ctx.stats.get_found += 1
            ctx.stats.get_messages += result.msg_count
            ctx.stats_items.record_get(header.consumer_group, header.topic, result.msg_count, len(body))
            if ctx.metrics is not None:  # docs/observability.md; SQL92 reads have no residency estimate
                ctx.metrics.record_out(
                    header.consumer_group,
                    header.topic,
                    header.queue_id,
                    next_begin_offset,
                    result.msg_count,
                    len(body),
                    None if isinstance(msg_filter, Node) else hot,
                )
        else:
            body = b""
        remark = None if code == ResponseCode.SUCCESS else result.status.name
        response = request.make_response(code, remark, response_header.to_ext_fields(), body)
        return response, code

    def _suggest(
        self,
        header: PullMessageRequestHeader,
        result: FilteredRead | GetMessageResult,
        group: SubscriptionGroupConfig,
    ) -> PullSuggestion:
        cfg = self.ctx.config
        from_slave = cfg.slave_read_enable and is_suggest_pulling_from_slave(
            self.ctx.store,
            header.topic,
            header.queue_id,
            header.queue_offset,
            result.next_begin_offset,
            self.memory_bytes,
            cfg.access_message_in_memory_max_ratio_percent,
        )
        return suggest_which_broker(
            pull_response_code(result.status, header.queue_offset),
            group,
            is_slave=not cfg.is_master,
            slave_read_enable=cfg.slave_read_enable,
            offset_check_in_slave=cfg.offset_check_in_slave,
            pulling_from_slave=from_slave,
        )
