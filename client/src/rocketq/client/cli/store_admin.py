"""mqadmin's store maintenance commands: cleanExpiredCQ, deleteExpiredCommitLog, cleanUnusedTopic
and resetMasterFlushOffset (RocketMQ's names and option letters).

The first three go to ``-b brokerAddr``, or every master of ``-c cluster`` (every master when
neither is given) and print Java's ``success``, then one ``<addr>: <what the broker did>`` line
per broker.  ``resetMasterFlushOffset -b slaveAddr -o offset`` prints ``reset master flush offset
to <offset> success``; rocketq's brokers refuse it (their slaves do not use the offset), which
mqadmin reports as an error with the broker's remark.
"""

from __future__ import annotations

import argparse

from rocketq.client.admin import AsyncAdmin
from rocketq.client.admin_store import (
    clean_expired_consume_queue,
    clean_unused_topic,
    delete_expired_commit_log,
    reset_master_flush_offset,
)
from rocketq.client.cli.common import CommandGroup, Handler, out

__all__ = ["GROUP"]


def _print(remarks: dict[str, str]) -> None:
    out("success")
    for addr, remark in remarks.items():
        out(f"{addr}: {remark}")


async def _clean_expired_cq(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    _print(await clean_expired_consume_queue(admin, broker_addr=a.broker_addr, cluster=a.cluster))


async def _delete_expired_commit_log(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    _print(await delete_expired_commit_log(admin, broker_addr=a.broker_addr, cluster=a.cluster))


async def _clean_unused_topic(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    _print(await clean_unused_topic(admin, broker_addr=a.broker_addr, cluster=a.cluster))


async def _reset_master_flush_offset(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    await reset_master_flush_offset(admin, a.broker_addr, a.offset)
    out(f"reset master flush offset to {a.offset} success")


def _add_options(name: str, p: argparse.ArgumentParser) -> None:
    if name == "resetMasterFlushOffset":
        p.add_argument("-b", "--brokerAddr", dest="broker_addr", required=True, help="which broker to reset")
        p.add_argument("-o", "--offset", type=int, required=True, help="the offset to reset at")
        return
    p.add_argument("-b", "--brokerAddr", dest="broker_addr", help="Broker address")
    p.add_argument("-c", "--cluster", dest="cluster", help="cluster name (its masters)")


_COMMANDS: dict[str, tuple[Handler, str]] = {
    "cleanExpiredCQ": (_clean_expired_cq, "Clean expired ConsumeQueue on broker"),
    "deleteExpiredCommitLog": (_delete_expired_commit_log, "Delete expired CommitLog files"),
    "cleanUnusedTopic": (_clean_unused_topic, "Clean unused topic on broker"),
    "resetMasterFlushOffset": (_reset_master_flush_offset, "Reset master flush offset in slave"),
}

GROUP = CommandGroup(commands=_COMMANDS, add_options=_add_options)
