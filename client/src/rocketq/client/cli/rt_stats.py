"""mqadmin's send-time and consumption figures: checkMsgSendRT, clusterRT and brokerConsumeStats
(RocketMQ's names, option letters and column layout).

``checkMsgSendRT -t topic [-a amount] [-s size]`` prints one line per send (broker, queue,
whether it succeeded, milliseconds) and ``Avg RT`` without the first send.  ``clusterRT [-c
cluster] [-a] [-s]`` sends to the topic named after each broker and prints its average time and
success/failure counts; like Java's it repeats every ``-i`` seconds until stopped, and
``--rounds N`` (rocketq's) stops after N rounds; ``-p true`` prints ``time|machineRoom|cluster|
broker|rt`` lines instead (``-m`` the machine room).  ``brokerConsumeStats -b addr [-l level]``
prints every group's queues on that broker whose diff is at least ``-l`` and the total diff.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt

from rocketq.client.admin import AsyncAdmin
from rocketq.client.admin_rt import (
    average_after_first,
    broker_consume_stats,
    broker_send_rt,
    check_msg_send_rt,
)
from rocketq.client.cli.common import CommandGroup, Handler, out

__all__ = ["GROUP"]


async def _check_msg_send_rt(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    probes = await check_msg_send_rt(admin, a.topic, a.amount, a.size)
    out(f"{'#Broker Name':<32}  {'#QID':<4}  {'#Send Result':<20}    #RT")
    for p in probes:
        ok = "true" if p.ok else "false"
        out(f"{p.message_queue.broker_name:<32}  {p.message_queue.queue_id:<4}  {ok:<20}    {p.rt_ms:.0f}")
    out(f"Avg RT: {average_after_first([p.rt_ms for p in probes]):.2f}")


async def _cluster_rt(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    if not a.print_log:
        out(f"{'#Cluster Name':<24}  {'#Broker Name':<24}  {'#RT':<4}  {'#successCount':<8}  #failCount")
    done = 0
    while True:
        for r in await broker_send_rt(admin, a.cluster, a.amount, a.size):
            if a.print_log:
                now = dt.datetime.now().strftime("%Y-%m-%d %H:%M:%S")
                out(f"{now}|{a.machine_room}|{r.cluster}|{r.broker_name}|{round(r.avg_rt_ms)}")
            else:
                rt = f"{r.avg_rt_ms:.2f}"
                out(f"{r.cluster:<24}  {r.broker_name:<24}  {rt:<8}  {r.success:<16}  {r.failed}")
        done += 1
        if a.rounds and done >= a.rounds:
            return
        await asyncio.sleep(a.interval)


async def _broker_consume_stats(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    head = ("#Topic", "#Group", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset", "#Diff")
    out(f"{head[0]:<64}  {head[1]:<64}  {head[2]:<32}  {head[3]:<4}  {head[4]:<20}  {head[5]:<20}  "
        f"{head[6]:<20}  #LastTime")  # fmt: skip
    total = 0
    for row in await broker_consume_stats(admin, a.broker_addr):
        p, mq = row.progress, row.progress.message_queue
        diff = p.lag
        total += diff
        if diff < a.level:
            continue
        last = (dt.datetime.fromtimestamp(p.last_timestamp_ms / 1000).strftime("%Y-%m-%d %H:%M:%S")
                if p.last_timestamp_ms > 0 else "-")  # fmt: skip
        out(f"{mq.topic:<64}  {row.group:<64}  {mq.broker_name:<32}  {mq.queue_id:<4}  "
            f"{p.broker_offset:<20}  {p.consumer_offset:<20}  {diff:<20}  {last}")  # fmt: skip
    out()
    out(f"Diff Total: {total}")


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text}")
    return value


def _add_options(name: str, p: argparse.ArgumentParser) -> None:
    if name == "brokerConsumeStats":
        p.add_argument("-b", "--brokerAddr", dest="broker_addr", required=True, help="Broker address")
        p.add_argument("-l", "--level", type=int, default=0, help="threshold of print diff")
        return
    if name == "checkMsgSendRT":
        p.add_argument("-t", "--topic", required=True, help="topic name")
    p.add_argument("-a", "--amount", type=_positive, default=100, help="message amount | default 100")
    p.add_argument("-s", "--size", type=_positive, default=128, help="message size | default 128 Byte")
    if name == "clusterRT":
        p.add_argument("-c", "--cluster", help="cluster name | default display all cluster")
        p.add_argument("-p", "--printLog", dest="print_log", type=lambda v: v.lower() == "true",
                       default=False, help="print as tlog | default false")  # fmt: skip
        p.add_argument("-m", "--machineRoom", dest="machine_room", default="noname", help="machine room name")
        p.add_argument(
            "-i", "--interval", type=_positive, default=10, help="print interval | default 10 seconds"
        )
        p.add_argument(
            "--rounds", type=int, default=0, help="stop after this many rounds (0: run until stopped)"
        )


_COMMANDS: dict[str, tuple[Handler, str]] = {
    "checkMsgSendRT": (_check_msg_send_rt, "Check message send response time"),
    "clusterRT": (_cluster_rt, "List All clusters Message Send RT"),
    "brokerConsumeStats": (_broker_consume_stats, "Fetch broker consume stats data"),
}

GROUP = CommandGroup(commands=_COMMANDS, add_options=_add_options)
