"""mqadmin consumerStatus (RocketMQ's name and options): a consumer client's running information.

``consumerStatus -g group -i clientId [-s]`` prints the client's ConsumerRunningInfo as Java's
``formatString`` lays it out: ``#Consumer Properties#`` (``%-40s: %s`` sorted),
``#Consumer Subscription#``, ``#Consumer Offset#`` (topic, broker, queue, the client's commit
offset) and ``#Consumer MQ Detail#`` (each queue's ProcessQueueInfo as JSON); ``-s`` asks for the
client's thread dump (``#Consumer jstack#``).  Without ``-i`` it lists the group's connected
clients, each with its version and whether it answered.  Java clients answer; rocketq's own
clients do not, and the command then fails with the broker's REQUEST_CODE_NOT_SUPPORTED.
"""

from __future__ import annotations

import argparse
import json

from rocketq.client.admin import AsyncAdmin
from rocketq.client.admin_consumer_status import ConsumerRunningInfo, consumer_running_info
from rocketq.client.cli.common import CommandGroup, Handler, out
from rocketq.client.errors import MQClientError, RocketQError

__all__ = ["GROUP"]


def _print_info(info: ConsumerRunningInfo) -> None:
    out("#Consumer Properties#")
    for key, value in sorted(info.properties.items()):
        out(f"{key:<40}: {value}")
    out()
    out("#Consumer Subscription#")
    for i, (topic, expression, class_filter) in enumerate(info.subscriptions, 1):
        mode = str(class_filter).lower()
        out(f"{i:03d} Topic: {topic:<40} ClassFilter: {mode:<8} SubExpression: {expression}")
    out()
    out("#Consumer Offset#")
    out(f"{'#Topic':<64}  {'#Broker Name':<32}  {'#QID':<4}  #Consumer Offset")
    for mq, pq in info.mq_table.items():
        out(f"{mq.topic:<64}  {mq.broker_name:<32}  {mq.queue_id:<4}  {pq.get('commitOffset', '-')}")
    out()
    out("#Consumer MQ Detail#")
    out(f"{'#Topic':<64}  {'#Broker Name':<32}  {'#QID':<4}  #ProcessQueueInfo")
    for mq, pq in info.mq_table.items():
        out(f"{mq.topic:<64}  {mq.broker_name:<32}  {mq.queue_id:<4}  {json.dumps(pq, sort_keys=True)}")
    if info.jstack:
        out()
        out("#Consumer jstack#")
        out(info.jstack)


async def _consumer_status(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    if a.client_id:
        _print_info(await consumer_running_info(admin, a.group, a.client_id, jstack=a.jstack))
        return
    conns = await admin.consumer_connections(a.group)
    if not conns.online:
        raise MQClientError(f"the consumer group[{a.group}] not online")
    for i, c in enumerate(conns.connections, 1):
        try:
            await consumer_running_info(admin, a.group, c.client_id)
            outcome = "answered (use -i to print it)"
        except RocketQError as exc:
            outcome = f"no running info: {exc}"
        out(f"{i:03d}  {c.client_id:<40} {c.version!s:<20} {outcome}")


def _add_options(name: str, p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--consumerGroup", dest="group", required=True, help="consumer group name")
    p.add_argument("-i", "--clientId", dest="client_id", help="The consumer's client id")
    p.add_argument("-s", "--jstack", action="store_true", help="Run jstack command in the consumer progress")


_COMMANDS: dict[str, tuple[Handler, str]] = {
    "consumerStatus": (_consumer_status, "Query consumer's internal data structure"),
}

GROUP = CommandGroup(commands=_COMMANDS, add_options=_add_options)
