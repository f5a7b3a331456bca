"""Admin view of POP consumers: GET_POP_STATUS (rocketq's code, :mod:`rocketq.client.remoting.pop_status`).

``pop_status`` asks every master (or one broker) for a group's in-flight counts and POP retry
backlog; ``mqadmin popStatus`` prints the rows.  A broker that does not know the code (RocketMQ)
is reported with its error instead of failing the whole command.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from rocketq.client.api import MQClientAPI
from rocketq.client.errors import RocketQError
from rocketq.client.remoting.codes import RequestCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.pop_status import GetPopStatusRequestHeader, PopStatus

__all__ = ["BrokerPopStatus", "pop_status"]


@dataclass(frozen=True, slots=True)
class BrokerPopStatus:
    """One broker's answer, or the error it gave (``status`` None)."""

    broker_name: str
    broker_addr: str
    status: PopStatus | None
    error: str | None = None


async def pop_status(
    api: MQClientAPI,
    masters: Mapping[str, str],
    group: str,
    topic: str | None = None,
    timeout_ms: int | None = None,
) -> list[BrokerPopStatus]:
    """GET_POP_STATUS of ``group`` (one topic or all it pops) at each broker of ``masters``."""
    header = GetPopStatusRequestHeader(consumer_group=group, topic=topic)
    rows = []
    for name, addr in sorted(masters.items()):
        cmd = RemotingCommand.request(RequestCode.GET_POP_STATUS, header.to_ext_fields())
        try:
            response = api.check(await api.invoke(addr, cmd, timeout_ms), addr)
            rows.append(BrokerPopStatus(name, addr, PopStatus.decode(response.body)))
        except RocketQError as exc:
            rows.append(BrokerPopStatus(name, addr, None, str(exc)))
    return rows
