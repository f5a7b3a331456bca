"""mqadmin statsAll and exportMetrics (RocketMQ's names, options and layout), over the brokers'
statistics items (:mod:`rocketq.client.admin_stats`).

``statsAll [-a] [-t topic]`` prints, per topic and consumer group, ``#Accumulation`` (the group's
lag), ``#InTPS`` / ``#OutTPS`` (last minute) and ``#InMsg24Hour`` / ``#OutMsg24Hour``; a topic
nobody consumes shows ``NO_CONSUMER``; ``-a`` keeps only topics with traffic in 24 hours, ``-t``
one topic.  ``exportMetrics -c cluster [-f dir]`` writes ``<dir>/metrics.json`` (default directory
Java's ``/tmp/rocketmq/export``) and prints ``export <path> success``.
"""

from __future__ import annotations

import argparse

from rocketq.client.admin import AsyncAdmin
from rocketq.client.admin_stats import StatsAllRow, export_metrics, stats_all
from rocketq.client.cli.common import CommandGroup, Handler, out
from rocketq.client.cli.export import DEFAULT_EXPORT_DIR, write_export

__all__ = ["GROUP", "stats_all_line"]

STATS_ALL_HEADER = (
    f"{'#Topic':<64}  {'#Consumer Group':<64} {'#Accumulation':>12} {'#InTPS':>11} {'#OutTPS':>11} "
    f"{'#InMsg24Hour':>14} {'#OutMsg24Hour':>14}"
)


def stats_all_line(row: StatsAllRow) -> str:
    """One row as Java prints it (names cut at 64 characters)."""
    topic = row.topic[:64]
    if row.group is None:
        return (
            f"{topic:<64}  {'':<64} {0:>12} {row.in_tps:>11.2f} {'':>11} "
            f"{row.in_msg_24_hours:>14} {'NO_CONSUMER':>14}"
        )
    return (
        f"{topic:<64}  {row.group[:64]:<64} {row.accumulation:>12} {row.in_tps:>11.2f} {row.out_tps:>11.2f} "
        f"{row.in_msg_24_hours:>14} {row.out_msg_24_hours:>14}"
    )


async def _stats_all(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    out(STATS_ALL_HEADER)
    for row in await stats_all(admin, topic=a.topic, active_only=a.active_topic):
        out(stats_all_line(row))


async def _export_metrics(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    write_export(a.file_path.strip(), "metrics.json", await export_metrics(admin, a.cluster.strip()))


def _add_options(name: str, p: argparse.ArgumentParser) -> None:
    if name == "statsAll":
        p.add_argument(
            "-a", "--activeTopic", dest="active_topic", action="store_true", help="print active topic only"
        )
        p.add_argument("-t", "--topic", help="print select topic only")
        return
    p.add_argument("-c", "--clusterName", dest="cluster", required=True, help="choose a cluster to export")
    p.add_argument(
        "-f", "--filePath", dest="file_path", default=DEFAULT_EXPORT_DIR,
        help=f"export metrics.json path | default {DEFAULT_EXPORT_DIR}",
    )  # fmt: skip


_COMMANDS: dict[str, tuple[Handler, str]] = {
    "statsAll": (_stats_all, "Topic and Consumer tps stats."),
    "exportMetrics": (_export_metrics, "Export metrics."),
}

GROUP = CommandGroup(commands=_COMMANDS, add_options=_add_options)
