"""Store maintenance of brokers for the admin tools (Java's ``cleanExpiredCQ``,
``deleteExpiredCommitLog``, ``cleanUnusedTopic`` and ``resetMasterFlushOffset``).

Each request goes to one broker (``broker_addr``) or to every master of a cluster (every master
of every cluster when neither is given, as Java's admin does); the result maps each address to
the broker's remark (what it did).  A broker that refuses raises MQBrokerError with its code and
remark: rocketq's brokers refuse RESET_MASTER_FLUSH_OFFSET (their slaves do not use a master
flush offset).
"""

from __future__ import annotations

from rocketq.client.admin import AsyncAdmin
from rocketq.client.remoting.codes import RequestCode
from rocketq.client.remoting.command import RemotingCommand

__all__ = [
    "clean_expired_consume_queue",
    "clean_unused_topic",
    "delete_expired_commit_log",
    "reset_master_flush_offset",
]


async def _targets(admin: AsyncAdmin, broker_addr: str | None, cluster: str | None) -> list[str]:
    if broker_addr:
        return [broker_addr]
    return list((await admin.master_addrs(cluster)).values())


async def _each(
    admin: AsyncAdmin,
    code: int,
    broker_addr: str | None,
    cluster: str | None,
    fields: dict[str, str] | None = None,
) -> dict[str, str]:
    remarks = {}
    for addr in await _targets(admin, broker_addr, cluster):
        response = admin.api.check(await admin.api.invoke(addr, RemotingCommand.request(code, fields)), addr)
        remarks[addr] = response.remark or ""
    return remarks


async def delete_expired_commit_log(
    admin: AsyncAdmin, *, broker_addr: str | None = None, cluster: str | None = None
) -> dict[str, str]:
    """DELETE_EXPIRED_COMMITLOG: one retention round now (segments older than fileReservedTime)."""
    return await _each(admin, RequestCode.DELETE_EXPIRED_COMMITLOG, broker_addr, cluster)


async def clean_expired_consume_queue(
    admin: AsyncAdmin, *, broker_addr: str | None = None, cluster: str | None = None
) -> dict[str, str]:
    """CLEAN_EXPIRED_CONSUMEQUEUE: consume queue files wholly below the CommitLog minimum go."""
    return await _each(admin, RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE, broker_addr, cluster)


async def clean_unused_topic(
    admin: AsyncAdmin, *, broker_addr: str | None = None, cluster: str | None = None
) -> dict[str, str]:
    """CLEAN_UNUSED_TOPIC: consume queues of topics no longer in the broker's topic table go."""
    return await _each(admin, RequestCode.CLEAN_UNUSED_TOPIC, broker_addr, cluster)


async def reset_master_flush_offset(admin: AsyncAdmin, broker_addr: str, offset: int) -> None:
    """RESET_MASTER_FLUSH_OFFSET on a slave (rocketq's brokers refuse it, see the module doc)."""
    await _each(
        admin, RequestCode.RESET_MASTER_FLUSH_OFFSET, broker_addr, None, {"masterFlushOffset": str(offset)}
    )
