"""mqadmin exportMetadata and exportConfigs (RocketMQ's names and options): a cluster's topics and
groups, or its brokers' main settings, to a file.

``exportMetadata (-c cluster | -b brokerAddr) [-f dir] [-t | -g] [-s]`` writes
``<dir>/metadata.json`` (``topicConfigTable``, ``subscriptionGroupTable``, ``exportTime``), or with
``-t`` only the topics to ``<dir>/topic.json``, with ``-g`` only the groups to
``<dir>/subscriptionGroup.json``; ``-s`` keeps the groups' retry and dead-letter topics.  The
directory defaults to Java's ``/tmp/rocketmq/export``.  ``exportConfigs -c cluster [-f dir]``
writes ``<dir>/configs.json``: the masters' main settings (``brokerConfigs``) and the cluster's
size (``clusterScale``).  Both print ``export <path> success``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rocketq.client.admin import AsyncAdmin
from rocketq.client.admin_export import export_configs, export_metadata
from rocketq.client.cli.common import CommandGroup, Handler, out

__all__ = ["DEFAULT_EXPORT_DIR", "GROUP", "write_export"]

DEFAULT_EXPORT_DIR = "/tmp/rocketmq/export"


def write_export(directory: str, name: str, doc: object) -> None:
    """Writes ``doc`` as ``<directory>/<name>`` (indented JSON); prints Java's ``export <path> success``."""
    path = Path(directory) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    out(f"export {path} success")


async def _export_metadata(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    doc = await export_metadata(
        admin, cluster=a.cluster, broker_addr=a.broker_addr, special_topics=a.special_topic
    )
    name = "metadata.json"
    if a.topic_only:
        name = "topic.json"
        doc.pop("subscriptionGroupTable")
    elif a.group_only:
        name = "subscriptionGroup.json"
        doc.pop("topicConfigTable")
    write_export(a.file_path, name, doc)


async def _export_configs(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    write_export(a.file_path, "configs.json", await export_configs(admin, a.cluster))


def _add_options(name: str, p: argparse.ArgumentParser) -> None:
    if name == "exportConfigs":
        p.add_argument(
            "-c", "--clusterName", dest="cluster", required=True, help="choose a cluster to export"
        )
        p.add_argument(
            "-f", "--filePath", dest="file_path", default=DEFAULT_EXPORT_DIR,
            help=f"the directory of configs.json (default {DEFAULT_EXPORT_DIR})",
        )  # fmt: skip
        return
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("-c", "--clusterName", dest="cluster", help="choose a cluster to export")
    target.add_argument("-b", "--brokerAddr", dest="broker_addr", help="choose a broker to export")
    p.add_argument(
        "-f", "--filePath", dest="file_path", default=DEFAULT_EXPORT_DIR,
        help=f"the directory of metadata.json (default {DEFAULT_EXPORT_DIR})",
    )  # fmt: skip
    only = p.add_mutually_exclusive_group()
    only.add_argument(
        "-t", "--topic", dest="topic_only", action="store_true", help="only export topic metadata"
    )
    only.add_argument(
        "-g", "--subscriptionGroup", dest="group_only", action="store_true",
        help="only export subscriptionGroup metadata",
    )  # fmt: skip
    p.add_argument(
        "-s", "--specialTopic", dest="special_topic", action="store_true", help="need retryTopic and dlqTopic"
    )


_COMMANDS: dict[str, tuple[Handler, str]] = {
    "exportMetadata": (_export_metadata, "Export metadata."),
    "exportConfigs": (_export_configs, "Export configs."),
}

GROUP = CommandGroup(commands=_COMMANDS, add_options=_add_options)
