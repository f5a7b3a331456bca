"""mqadmin's consumer-group commands: consumerProgress, popStatus and resetOffsetByTime.

``consumerProgress`` prints, per queue of the topic, the broker's and the group's offsets and the
difference, then the total; ``resetOffsetByTime`` moves the group to the first message stored at
or after a timestamp (live consumers are told by the broker) and prints the new offsets; with ``-b
brokerAddr -q queueId`` it moves one queue, to ``-o offset`` or the timestamp's offset, by
committing that offset for the group (live consumers are not told: stop them first).
``popStatus`` (rocketq's, RocketMQ's mqadmin has no POP view) prints, per broker and topic, a POP
group's in-flight messages (popped, not acked or revived) and its POP retry topics' backlog.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from rocketq.client.admin import AsyncAdmin
from rocketq.client.cli.common import CommandGroup, Handler, out, parse_timestamp, table
from rocketq.client.errors import MQClientError

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


async def _pop_status(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    answers = await admin.pop_status(a.group, a.topic, broker_addr=a.broker_addr)
    rows: list[Sequence[object]] = [
        ("#Topic", "#Broker Name", "#InFlight", "#Retry Topic", "#Retry Backlog", "#Retry InFlight")
    ]
    in_flight = backlog = 0
    for answer in answers:
        if answer.status is None:
            out(f"{answer.broker_name} ({answer.broker_addr}): {answer.error}")
            continue
        for t in answer.status.topics:
            in_flight += t.in_flight + t.retry_in_flight
            backlog += t.retry_backlog
            name = answer.broker_name
            if not t.retry_topics:
                rows.append((t.topic, name, t.in_flight, "-", 0, 0))
            for i, r in enumerate(t.retry_topics):  # the topic's own in-flight on its first row
                rows.append((t.topic, name, t.in_flight if i == 0 else "", r.topic, r.backlog, r.in_flight))
    table(rows)
    out()
    out(f"InFlight Total: {in_flight}")
    out(f"Retry Backlog Total: {backlog}")


async def _reset_queue_offset(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    if a.broker_addr is None or a.queue_id is None:
        raise MQClientError("to reset one queue give both -b brokerAddr and -q queueId (and -o offset)")
    out(
        f"start reset consumer offset by specified, group[{a.group}], topic[{a.topic}], "
        f"queueId[{a.queue_id}], broker[{a.broker_addr}], timestamp(long)[{a.timestamp}]"
    )
    api = admin.api
    offset = a.offset
    if offset is None:
        offset = await api.search_offset(a.broker_addr, a.topic, a.queue_id, a.timestamp)
    out(f"reset consumer offset to {offset}")
    await api.update_consumer_offset(a.broker_addr, a.group, a.topic, a.queue_id, offset)


async def _reset_offset_by_time(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    if a.broker_addr is not None or a.queue_id is not None or a.offset is not None:
        await _reset_queue_offset(admin, a)
        return
    offsets = await admin.reset_offset_by_time(a.group, a.topic, a.timestamp, force=a.force)
    rows: list[Sequence[object]] = [("#Broker Name", "#QID", "#Offset")]
    rows += [(mq.broker_name, mq.queue_id, off) for mq, off in sorted(offsets.items())]
    table(rows)


def _add_options(name: str, p: argparse.ArgumentParser) -> None:
    if name == "popStatus":
        p.add_argument("-g", "--group", required=True, help="consumer group")
        p.add_argument("-t", "--topic", help="topic name (default: every topic the group pops)")
        p.add_argument(
            "-b", "--brokerAddr", dest="broker_addr", help="ask this broker only (default: every master)"
        )
        return
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
        p.add_argument(
            "-b",
            "--broker",
            dest="broker_addr",
            help="broker addr; with -q: commit one queue's offset (live consumers are not told)",
        )
        p.add_argument("-q", "--queue", dest="queue_id", type=int, help="queue id (with -b)")
        p.add_argument("-o", "--offset", type=int, help="the queue's new offset (default: by the timestamp)")


_COMMANDS: dict[str, tuple[Handler, str]] = {
    "consumerProgress": (_consumer_progress, "Query consumers's progress, speed"),
    "popStatus": (_pop_status, "POP consumers' in-flight messages and retry backlog (rocketq)"),
    "resetOffsetByTime": (_reset_offset_by_time, "Reset consumer offset by timestamp"),
}

GROUP = CommandGroup(commands=_COMMANDS, add_options=_add_options)
