"""mqadmin's queryCq and producer (RocketMQ's names, letters and output lines).

``queryCq -t T -q Q -i INDEX [-c COUNT] [-b BROKER] [-g GROUP]`` prints the subscription and
filter data of ``-g`` (when given), the queue's max and min index, then each unit from INDEX as
``idx: i`` and Java's ``ConsumeQueueData{...}`` line, blocks separated by ``=`` rules; without
``-b`` it asks the master of the first broker of the topic's route.  ``producer -b BROKER``
prints ``producer group (G) instance : clientId=...`` for every producer a broker knows.
"""

from __future__ import annotations

import argparse
import json

from rocketq.client.admin import AsyncAdmin
from rocketq.client.admin_cq import get_all_producer_info, query_consume_queue
from rocketq.client.cli.common import CommandGroup, Handler, out

__all__ = ["GROUP"]

RULE = "======================================"


async def _query_cq(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    body = await query_consume_queue(
        admin,
        a.topic.strip(),
        a.queue,
        a.index,
        a.count,
        broker_addr=(a.broker or "").strip() or None,
        consumer_group=a.consumer.strip() if a.consumer else None,
    )
    if body.subscription_data is not None:
        out("Subscription data: ")
        out(json.dumps(body.subscription_data.to_obj(), indent="\t", sort_keys=True))
        out(RULE)
    if body.filter_data is not None:
        out("Filter data: ")
        out(body.filter_data)
        out(RULE)
    out("Queue data: ")
    out(f"max: {body.max_queue_index}, min: {body.min_queue_index}")
    out(RULE)
    for i, data in enumerate(body.queue_data, start=a.index):
        out(f"idx: {i}")
        out(data.java_str())
        out(RULE)


async def _producer(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    table = await get_all_producer_info(admin, a.broker_addr.strip())
    for group, infos in table.items():
        if not infos:
            out(f"producer group ({group}) instances are empty")
            continue
        for info in infos:
            out(f"producer group ({group}) instance : {info.java_str()}")


def _add_options(name: str, p: argparse.ArgumentParser) -> None:
    if name == "producer":
        p.add_argument("-b", "--broker", dest="broker_addr", required=True, help="broker address")
        return
    p.add_argument("-t", "--topic", required=True, help="topic name")
    p.add_argument("-q", "--queue", type=int, required=True, help="queue num, ie. 1")
    p.add_argument("-i", "--index", type=int, required=True, help="start queue index.")
    p.add_argument("-c", "--count", type=int, default=10, help="how many (default 10).")
    p.add_argument("-b", "--broker", help="broker addr (default: the first broker of the topic's route).")
    p.add_argument("-g", "--consumer", help="consumer group: its subscription, filter and eval per unit.")


_COMMANDS: dict[str, tuple[Handler, str]] = {
    "queryCq": (_query_cq, "Query cq command."),
    "producer": (_producer, "Query producer's instances, connection, status, etc."),
}

GROUP = CommandGroup(commands=_COMMANDS, add_options=_add_options)
