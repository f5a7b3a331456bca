"""A consumer client's running information for the admin tools (Java's ``consumerStatus``).

GET_CONSUMER_RUNNING_INFO goes to a master broker, which forwards it to the named client over
that client's connection and returns the client's ConsumerRunningInfo: its properties, its
subscriptions, and per queue the ProcessQueueInfo (``commitOffset`` among others).  Java clients
answer it; rocketq's own clients do not (the broker passes on their REQUEST_CODE_NOT_SUPPORTED,
raised here as MQBrokerError).  The masters are asked in turn until one has the client connected.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from rocketq.client.admin import AsyncAdmin
from rocketq.client.errors import MQBrokerError, MQClientError, ProtocolError
from rocketq.client.remoting.codes import RequestCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.lenient_json import loads as lenient_loads
from rocketq.client.remoting.lenient_json import thaw
from rocketq.client.remoting.vocabulary import MessageQueue

__all__ = ["ConsumerRunningInfo", "consumer_running_info", "parse_consumer_running_info"]


@dataclass(frozen=True, slots=True)
class ConsumerRunningInfo:
    """What a consumer client reports about itself."""

    properties: dict[str, str] = field(default_factory=dict)
    #: (topic, subString, classFilterMode)
    subscriptions: tuple[tuple[str, str, bool], ...] = ()
    #: queue -> the client's ProcessQueueInfo object
    mq_table: dict[MessageQueue, dict[str, Any]] = field(default_factory=dict)
    jstack: str | None = None


def _obj(key: object) -> object:
    obj = thaw(key) if isinstance(key, tuple) else key
    if isinstance(obj, str):
        try:
            return json.loads(obj)
        except ValueError:
            return obj
    return obj


def parse_consumer_running_info(body: bytes) -> ConsumerRunningInfo:
    """ConsumerRunningInfo JSON (fastjson writes MessageQueue objects as map keys)."""
    try:
        doc = lenient_loads(body) if body else {}
    except ValueError as exc:
        raise ProtocolError(f"bad ConsumerRunningInfo body: {exc}") from exc
    props = {str(k): str(v) for k, v in (doc.get("properties") or {}).items()}
    subs = tuple(
        sorted(
            (str(s.get("topic", "")), str(s.get("subString", "")), bool(s.get("classFilterMode", False)))
            for s in doc.get("subscriptionSet") or []
            if isinstance(s, dict)
        )
    )
    table: dict[MessageQueue, dict[str, Any]] = {}
    for key, value in (doc.get("mqTable") or {}).items():
        obj = _obj(key)
        if isinstance(obj, dict) and isinstance(value, dict):
            table[MessageQueue.from_obj(obj)] = dict(value)
    jstack = doc.get("jstack")
    return ConsumerRunningInfo(props, subs, dict(sorted(table.items())), str(jstack) if jstack else None)


async def consumer_running_info(
    admin: AsyncAdmin, group: str, client_id: str, *, jstack: bool = False
) -> ConsumerRunningInfo:
    """The running information of client ``client_id`` of ``group``, asked through a master."""
    info = await admin.cluster_list()
    masters = sorted({bd.master_addr for bd in info.broker_addr_table.values() if bd.master_addr})
    if not masters:
        raise MQClientError("no master broker to ask")
    fields = {"consumerGroup": group, "clientId": client_id, "jstackEnable": str(jstack).lower()}
    last: MQBrokerError | None = None
    for addr in masters:
        cmd = RemotingCommand.request(RequestCode.GET_CONSUMER_RUNNING_INFO, fields)
        try:
            response = admin.api.check(await admin.api.invoke(addr, cmd), addr)
        except MQBrokerError as exc:
            if "not online" not in (exc.remark or ""):
                raise
            last = exc
            continue
        return parse_consumer_running_info(response.body)
    assert last is not None
    raise last
