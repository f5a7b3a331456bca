"""What the dashboard's JSON API answers: admin calls turned into plain JSON documents.

:class:`DashboardService` holds one :class:`~rocketq.client.admin.AsyncAdmin` (and, once a test
message is sent, one producer) and is the only part of the dashboard that talks to the cluster;
the web layer (:mod:`rocketq.tools.dashboard.app`) maps URLs to its methods.  Everything goes through
the client library's admin API, never through a broker's files.  Message traces come from
:mod:`rocketq.client.trace.lookup` when that module is installed; otherwise a message's trace
is reported as unavailable with the reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import enum
import importlib.util
import time
from collections.abc import Sequence
from typing import Any

from rocketq.client.admin import AsyncAdmin
from rocketq.client.admin_groups import ConsumerConnection, QueueProgress
from rocketq.client.errors import RocketQError
from rocketq.client.model import Message, MessageExt
from rocketq.client.producer.core import AsyncProducer
from rocketq.client.remoting.mq_version import V5_0_0, version_name
from rocketq.client.remoting.vocabulary import (
    DLQ_GROUP_TOPIC_PREFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    TRACE_TOPIC,
    Perm,
    is_internal_topic,
)
from rocketq.tools.dashboard.sampler import Sampler

__all__ = ["DashboardService", "Json", "client_protocol", "connection_json"]

Json = dict[str, Any]
PRODUCER_GROUP = "ROCKETQ_DASHBOARD_PRODUCER"
_BODY_PREVIEW = 2048
_TRACE_MODULE = "rocketq.client.trace.lookup"


def _perm_text(perm: int) -> str:
    p = Perm(perm)
    return ("R" if Perm.READ in p else "-") + ("W" if Perm.WRITE in p else "-")


def _topic_kind(topic: str, own: set[str]) -> str:
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return "retry"
    if topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
        return "DLQ"
    return "system" if is_internal_topic(topic) or topic in own else "normal"


def _plain(value: object) -> object:
    """A JSON-able copy of a trace record's field (enums by value, tuples as lists)."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def message_json(m: MessageExt) -> Json:
    body = bytes(m.body)
    try:
        text: str | None = body[:_BODY_PREVIEW].decode("utf-8")
    except UnicodeDecodeError:
        text = None
    return {
        "msg_id": m.msg_id,
        "offset_msg_id": m.offset_msg_id,
        "topic": m.topic,
        "tags": m.tags,
        "keys": m.keys,
        "queue_id": m.queue_id,
        "queue_offset": m.queue_offset,
        "store_host": f"{m.store_host[0]}:{m.store_host[1]}",
        "born_host": f"{m.born_host[0]}:{m.born_host[1]}",
        "born_timestamp": m.born_timestamp,
        "store_timestamp": m.store_timestamp,
        "reconsume_times": m.reconsume_times,
        "body_length": len(body),
        "body": text,
        "properties": dict(m.properties),
    }


def client_protocol(language: str, version: int) -> str:
    """How a connected client talks to the cluster, as far as its language and version tell:
    ``gRPC 5.x`` for a RocketMQ 5 SDK behind mqproxy (version V5_0_0 or later in a language
    whose 5.x client is gRPC only), ``5.x`` for Java 5 (remoting and gRPC clients look alike),
    ``remoting`` for 4.x clients and rocketq's own (V4_9_4)."""
    if version < V5_0_0:
        return "remoting"
    return "5.x" if language == "JAVA" else "gRPC 5.x"


def connection_json(c: ConsumerConnection) -> Json:
    """A group member with its version's name (``V5_1_2``) and :func:`client_protocol`."""
    return {
        **dataclasses.asdict(c),
        "version_name": version_name(c.version),
        "protocol": client_protocol(c.language, c.version),
    }


def progress_json(q: QueueProgress) -> Json:
    mq = q.message_queue
    return {
        "topic": mq.topic,
        "broker_name": mq.broker_name,
        "queue_id": mq.queue_id,
        "broker_offset": q.broker_offset,
        "consumer_offset": q.consumer_offset,
        "lag": q.lag,
        "last_timestamp": q.last_timestamp_ms,
    }


class DashboardService:
    def __init__(self, namesrv_addr: str | Sequence[str], *, sample_interval_s: float = 5.0) -> None:
        self.namesrv_addr = namesrv_addr
        self.admin = AsyncAdmin(namesrv_addr)
        self.sampler = Sampler(self.admin, interval_s=sample_interval_s)
        self._producer: AsyncProducer | None = None
        self._producer_lock = asyncio.Lock()

    async def close(self) -> None:
        await self.sampler.stop()
        if self._producer is not None:
            with contextlib.suppress(RocketQError):
                await self._producer.shutdown()
        await self.admin.close()

    # ------------------------------------------------------------------ cluster

    async def cluster(self) -> Json:
        rows = []
        for r in await self.admin.cluster_replicas():
            disk: float | None = None
            if r.error is None:
                with contextlib.suppress(RocketQError, ValueError):
                    table = await self.admin.broker_runtime_info(r.addr, 3000)
                    disk = float(table.get("commitLogDiskRatio", "nan"))
            recent = self.sampler.latest_tps(r.addr)
            rows.append(
                {
                    "cluster": r.cluster,
                    "broker_name": r.broker_name,
                    "broker_id": r.broker_id,
                    "role": "SLAVE" if r.slave else "MASTER",
                    "broker_role": r.role,
                    "addr": r.addr,
                    "version": r.version,
                    "disk_ratio": disk if disk == disk else None,  # NaN: the broker did not say
                    "put_tps": recent[0] if recent else r.in_tps,
                    "get_tps": recent[1] if recent else r.out_tps,
                    "lag_bytes": r.lag_bytes,
                    "lag_ms": r.lag_ms,
                    "error": r.error,
                }
            )
        return {"namesrv": self.namesrv_addr, "brokers": rows}

    def history(self) -> Json:
        return {
            "interval_s": self.sampler.interval_s,
            "samples": [s.to_json() for s in self.sampler.samples],
        }

    # ------------------------------------------------------------------ topics

    async def topics(self) -> Json:
        names = sorted(await self.admin.topic_list())
        info = await self.admin.cluster_list()
        own = set(info.cluster_addr_table) | set(info.broker_addr_table)  # a cluster's and brokers' topics
        return {"topics": [{"topic": t, "kind": _topic_kind(t, own)} for t in names]}

    async def topic(self, topic: str) -> Json:
        route = await self.admin.topic_route(topic)
        status = await self.admin.topic_status(topic)
        return {
            "topic": topic,
            "brokers": [
                {
                    "broker_name": bd.broker_name,
                    "cluster": bd.cluster,
                    "addrs": {str(k): v for k, v in bd.broker_addrs.items()},
                }
                for bd in route.broker_datas
            ],
            "queue_datas": [
                {
                    "broker_name": qd.broker_name,
                    "read_queue_nums": qd.read_queue_nums,
                    "write_queue_nums": qd.write_queue_nums,
                    "perm": _perm_text(qd.perm),
                }
                for qd in route.queue_datas
            ],
            "queues": [
                {
                    "broker_name": s.message_queue.broker_name,
                    "queue_id": s.message_queue.queue_id,
                    "min_offset": s.min_offset,
                    "max_offset": s.max_offset,
                }
                for s in status
            ],
        }

    async def create_topic(self, topic: str, read_queue_nums: int, write_queue_nums: int) -> Json:
        addrs = await self.admin.create_topic(
            topic, read_queue_nums=read_queue_nums, write_queue_nums=write_queue_nums
        )
        return {"topic": topic, "created_on": addrs}

    async def send_test_message(self, topic: str, body: str, tags: str | None, keys: str | None) -> Json:
        async with self._producer_lock:
            if self._producer is None:
                producer = AsyncProducer(self.namesrv_addr, producer_group=PRODUCER_GROUP)
                await producer.start()
                self._producer = producer
        result = await self._producer.send(
            Message(topic=topic, body=body.encode("utf-8"), tags=tags or None, keys=keys or None)
        )
        return {
            "send_status": result.send_status.name,
            "msg_id": result.msg_id,
            "offset_msg_id": result.offset_msg_id,
            "broker_name": result.message_queue.broker_name,
            "queue_id": result.message_queue.queue_id,
            "queue_offset": result.queue_offset,
        }

    # ------------------------------------------------------------------ groups

    async def groups(self) -> Json:
        rows = []
        for group in await self.admin.group_list():
            conns = await self.admin.consumer_connections(group)
            stats = await self.admin.consume_stats(group)
            rows.append(
                {
                    "group": group,
                    "online": conns.online,
                    "members": len(conns.connections),
                    "grpc_members": sum(
                        client_protocol(c.language, c.version) != "remoting" for c in conns.connections
                    ),
                    "consume_type": conns.consume_type,
                    "message_model": conns.message_model,
                    "topics": sorted({q.message_queue.topic for q in stats}),
                    "lag": sum(q.lag for q in stats),
                }
            )
        return {"groups": rows}

    async def group(self, group: str) -> Json:
        conns = await self.admin.consumer_connections(group)
        stats = await self.admin.consume_stats(group)
        pop = await self.admin.pop_status(group)
        return {
            "group": group,
            "online": conns.online,
            "consume_type": conns.consume_type,
            "message_model": conns.message_model,
            "consume_from_where": conns.consume_from_where,
            "connections": [connection_json(c) for c in conns.connections],
            "subscriptions": [{"topic": t, "expression": e} for t, e in conns.subscriptions],
            "queues": [progress_json(q) for q in stats],
            "lag": sum(q.lag for q in stats),
            # POP consumption (mqadmin popStatus): in flight and retry backlog per broker and topic
            "pop": [
                {
                    "broker_name": b.broker_name,
                    "topic": t.topic,
                    "in_flight": t.in_flight,
                    "retry_backlog": t.retry_backlog,
                    "retry_in_flight": t.retry_in_flight,
                }
                for b in pop
                if b.status is not None
                for t in b.status.topics
            ],
        }

    async def reset_offset(self, group: str, topic: str, timestamp_ms: int) -> Json:
        table = await self.admin.reset_offset_by_time(group, topic, timestamp_ms)
        return {
            "group": group,
            "topic": topic,
            "offsets": [
                {"broker_name": mq.broker_name, "queue_id": mq.queue_id, "offset": off}
                for mq, off in sorted(table.items(), key=lambda kv: (kv[0].broker_name, kv[0].queue_id))
            ],
        }

    # ------------------------------------------------------------------ messages

    async def messages_by_key(self, topic: str, key: str) -> Json:
        return {"messages": [message_json(m) for m in await self.admin.query_msg_by_key(topic, key)]}

    async def message_by_id(self, msg_id: str, topic: str | None) -> Json:
        return {"messages": [message_json(await self.admin.query_msg_by_id(msg_id, topic))]}

    async def messages_by_time(self, topic: str, begin_ms: int, end_ms: int, max_num: int) -> Json:
        msgs = await self.admin.query_msg_by_time(topic, begin_ms, end_ms, max_num=max_num)
        return {"messages": [message_json(m) for m in msgs]}

    @staticmethod
    def traces_unavailable() -> str:
        """Why message traces cannot be shown ("" when they can)."""
        try:
            found = importlib.util.find_spec(_TRACE_MODULE) is not None
        except ImportError:
            found = False
        return "" if found else f"traces unavailable: {_TRACE_MODULE} is not installed"

    async def trace(self, msg_id: str, trace_topic: str | None) -> Json:
        """The trace records of ``msg_id`` (its UNIQ_KEY) in the trace topic, oldest first."""
        try:
            from rocketq.client.trace.lookup import query_trace
        except ImportError as exc:
            return {"available": False, "reason": f"traces unavailable: {exc}", "events": []}
        records = await query_trace(self.admin, msg_id, trace_topic=trace_topic or TRACE_TOPIC)
        events = [{k: _plain(v) for k, v in dataclasses.asdict(r).items()} for r in records]
        return {"available": True, "reason": "", "events": events}

    @staticmethod
    def now_ms() -> int:
        return int(time.time() * 1000)
