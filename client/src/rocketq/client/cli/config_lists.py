"""mqadmin updateTopicList and updateSubGroupList (RocketMQ's names and options): topics or
subscription groups created or updated from a JSON list file.

``updateTopicList (-b brokerAddr | -c clusterName) -f file`` takes a list of Java's TopicConfig
JSON, ``updateSubGroupList`` a list of SubscriptionGroupConfig JSON; each prints Java's line per
broker written, ``submit batch of topic config to <addr> success, please check the result later.``
"""

from __future__ import annotations

import argparse

from rocketq.client.admin import AsyncAdmin
from rocketq.client.admin_config_lists import read_config_list, update_sub_group_list, update_topic_list
from rocketq.client.cli.common import CommandGroup, Handler, out

__all__ = ["GROUP"]


async def _update_topic_list(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    configs = read_config_list(a.filename, "topicName")
    for addr in await update_topic_list(admin, configs, broker_addr=a.broker_addr, cluster=a.cluster):
        out(f"submit batch of topic config to {addr} success, please check the result later.")


async def _update_sub_group_list(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    configs = read_config_list(a.filename, "groupName")
    for addr in await update_sub_group_list(admin, configs, broker_addr=a.broker_addr, cluster=a.cluster):
        out(f"submit batch of group config to {addr} success, please check the result later.")


def _add_options(name: str, p: argparse.ArgumentParser) -> None:
    what = "topic" if name == "updateTopicList" else "groups"
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("-b", "--brokerAddr", dest="broker_addr", help=f"create {what} to which broker")
    target.add_argument("-c", "--clusterName", dest="cluster", help=f"create {what} to which cluster")
    kind = "TopicConfig" if name == "updateTopicList" else "SubscriptionGroupConfig"
    p.add_argument(
        "-f", "--filename", required=True, help=f"Path to a file with a list of {kind} in json format"
    )


_COMMANDS: dict[str, tuple[Handler, str]] = {
    "updateTopicList": (_update_topic_list, "create or update topic in batch"),
    "updateSubGroupList": (_update_sub_group_list, "Update or create subscription group in batch"),
}

GROUP = CommandGroup(commands=_COMMANDS, add_options=_add_options)
