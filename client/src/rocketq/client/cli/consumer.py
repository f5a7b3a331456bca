"""mqadmin's consumer-group commands: consumerProgress and resetOffsetByTime.

``consumerProgress`` prints, per queue of the topic, the broker's and the group's offsets and the
difference, then the total; ``resetOffsetByTime`` moves the group to the first message stored at
or after a timestamp (live consumers are told by the broker) and prints the new offsets.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from rocketq.client.admin import AsyncAdmin
from rocketq.client.cli.common import CommandGroup, Handler, out, parse_timestamp, table

__all__ = ["GROUP"]


async def _consumer_progress(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    progress = await admin.consumer_progress(a.group, a.topic)
    rows: list[Sequence[object]] = [
        ("#Topic", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset", "#Diff")
    ]
    total = 0
    for p in sorted(progress, key=lambda x: x.message_queue):
        mq = p.message_queue
        rows.append((mq.topic, mq.broker_name, mq.queue_id, p.broker_offset, p.consumer_offset, p.lag))
        total += p.lag
    table(rows)
    out()
    out(f"Diff Total: {total}")


async def _reset_offset_by_time(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    offsets = await admin.reset_offset_by_time(a.group, a.topic, a.timestamp, force=a.force)
    rows: list[Sequence[object]] = [("#Broker Name", "#QID", "#Offset")]
    rows += [(mq.broker_name, mq.queue_id, off) for mq, off in sorted(offsets.items())]
    table(rows)


def _add_options(name: str, p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True, help="topic name")
    p.add_argument("-g", "--group", required=True, help="consumer group")
    if name == "resetOffsetByTime":
        p.add_argument(
            "-s",
            "--timestamp",
            type=parse_timestamp,
            required=True,
            help="ms, 'now' or yyyy-MM-dd#HH:mm:ss:SSS",
        )
        p.add_argument("-f", "--force", type=lambda s: s.lower() == "true", default=True)


_COMMANDS: dict[str, tuple[Handler, str]] = {
    "consumerProgress": (_consumer_progress, "Query consumers's progress, speed"),
    "resetOffsetByTime": (_reset_offset_by_time, "Reset consumer offset by timestamp"),
}

GROUP = CommandGroup(commands=_COMMANDS, add_options=_add_options)
