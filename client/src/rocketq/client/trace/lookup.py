"""Looking traces up: the records of a message id, and the message ids of a business key.

:func:`query_trace` does what RocketMQ's ``queryMsgTraceById`` and the dashboard's trace view do:
QUERY_MESSAGE on the trace topic by the message id (every trace message is keyed by the msgIds
it traces), decode the bodies, keep the lines of that message id, and sort them by time.  Each
:class:`TraceView` carries the client host, the born host of the trace message that carried it
(the traced producer's or consumer's address).  A SubAfter line of an older client has no group:
it takes the group of the SubBefore with the same request id; consume lines, which carry no
topic, take the Pub's.

:func:`msg_ids_by_key` goes from a business key to message ids (QUERY_MESSAGE on the message's
topic by key); :func:`query_trace_by_key` chains both.  The message ids are the producers'
``UNIQ_KEY``s, which is what traces are keyed by.
"""

from __future__ import annotations

import dataclasses
import logging

from rocketq.client.admin import AsyncAdmin
from rocketq.client.errors import MessageFormatError, NoRouteError
from rocketq.client.model import MessageExt
from rocketq.client.remoting.vocabulary import TRACE_TOPIC
from rocketq.client.trace.codec import decode_trace_data
from rocketq.client.trace.model import TraceRecord, TraceType

__all__ = ["TraceView", "msg_ids_by_key", "query_trace", "query_trace_by_key"]

log = logging.getLogger("rocketq.client.trace")

#: a decoded trace line of one message, its ``client_host`` filled in
TraceView = TraceRecord

_TYPE_ORDER = {TraceType.Pub: 0, TraceType.EndTransaction: 1, TraceType.SubBefore: 2, TraceType.SubAfter: 3}


async def query_trace(
    admin: AsyncAdmin,
    msg_id: str,
    *,
    trace_topic: str = TRACE_TOPIC,
    max_num: int = 64,
    begin_ms: int = 0,
    end_ms: int | None = None,
) -> list[TraceView]:
    """The trace records of the message ``msg_id`` (its UNIQ_KEY), oldest first.

    ``max_num`` bounds the trace messages asked from each broker, ``begin_ms``/``end_ms`` their
    store times.  Returns an empty list when nothing was traced, including when the trace topic
    does not exist (yet).  Bodies that do not decode are logged and skipped.  Raises the admin
    client's errors (RemotingError, MQBrokerError) when a broker cannot be asked.
    """
    try:
        carriers = await admin.query_msg_by_key(
            trace_topic, msg_id, max_num=max_num, begin_ms=begin_ms, end_ms=end_ms
        )
    except NoRouteError:
        log.info("no route for the trace topic %s: nothing has been traced there", trace_topic)
        return []
    views: list[TraceView] = []
    seen: set[tuple[str, int]] = set()
    for carrier in carriers:
        for i, record in enumerate(_decode(carrier)):
            if record.msg_id != msg_id or (carrier.offset_msg_id, i) in seen:
                continue
            seen.add((carrier.offset_msg_id, i))
            views.append(dataclasses.replace(record, client_host=record.client_host or _born(carrier)))
    return _sorted_with_groups(views)


def _decode(carrier: MessageExt) -> list[TraceRecord]:
    try:
        return decode_trace_data(carrier.body.decode("utf-8", errors="replace"))
    except MessageFormatError as exc:
        log.warning("skipping the trace message %s: %s", carrier.offset_msg_id, exc)
        return []


def _born(msg: MessageExt) -> str:
    host, port = msg.born_host
    return f"{host}:{port}"


def _sorted_with_groups(views: list[TraceView]) -> list[TraceView]:
    """Oldest first; consume records get the group of their SubBefore and the Pub's topic."""
    groups = {v.request_id: v.group_name for v in views if v.trace_type is TraceType.SubBefore}
    topic = next((v.topic for v in views if v.trace_type is TraceType.Pub), "")
    filled = []
    for v in views:
        if v.trace_type in (TraceType.SubBefore, TraceType.SubAfter):
            v = dataclasses.replace(
                v, group_name=v.group_name or groups.get(v.request_id, ""), topic=v.topic or topic
            )
        filled.append(v)
    return sorted(filled, key=lambda v: (v.timestamp_ms, _TYPE_ORDER[v.trace_type]))


async def msg_ids_by_key(
    admin: AsyncAdmin,
    topic: str,
    key: str,
    *,
    max_num: int = 64,
    begin_ms: int = 0,
    end_ms: int | None = None,
) -> list[str]:
    """The ids (UNIQ_KEYs) of the messages of ``topic`` with the business key ``key``, oldest
    first, without duplicates."""
    msgs = await admin.query_msg_by_key(topic, key, max_num=max_num, begin_ms=begin_ms, end_ms=end_ms)
    return list(dict.fromkeys(m.msg_id for m in msgs))


async def query_trace_by_key(
    admin: AsyncAdmin,
    topic: str,
    key: str,
    *,
    trace_topic: str = TRACE_TOPIC,
    max_num: int = 64,
) -> dict[str, list[TraceView]]:
    """The traces of every message of ``topic`` with the key ``key``: msgId -> its records."""
    ids = await msg_ids_by_key(admin, topic, key, max_num=max_num)
    return {i: await query_trace(admin, i, trace_topic=trace_topic, max_num=max_num) for i in ids}
