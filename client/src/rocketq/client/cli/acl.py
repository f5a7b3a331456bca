"""mqadmin's ACL commands (RocketMQ 4.x names and option letters).

``updateAclConfig`` (UPDATE_AND_CREATE_ACL_CONFIG), ``deleteAclConfig`` (DELETE_ACL_CONFIG),
``updateGlobalWhiteAddr`` (UPDATE_GLOBAL_WHITE_ADDRS_CONFIG) and ``clusterAclConfigVersion``
(GET_BROKER_CLUSTER_ACL_INFO), each sent to one broker (``-b host:port``) or to every master of a
cluster (``-c``).  They are admin requests: run mqadmin with an admin account's
``--access-key``/``--secret-key`` (docs/security.md "ACL").
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
from typing import Any

from rocketq.client.admin import AsyncAdmin
from rocketq.client.cli.common import CommandGroup, Handler, out, table_lines
from rocketq.client.errors import MQBrokerError, MQClientError
from rocketq.client.remoting.acl import DELETE_ACL_ACCESS_KEY, GLOBAL_WHITE_ADDRS, PlainAccessConfig
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand

__all__ = ["GROUP"]


async def _targets(admin: AsyncAdmin, a: argparse.Namespace) -> list[str]:
    if a.broker:
        return [a.broker]
    info = await admin.cluster_list()
    names = info.cluster_addr_table.get(a.cluster)
    if names is None:
        raise MQClientError(
            f"the cluster {a.cluster!r} does not exist; known: {sorted(info.cluster_addr_table)}"
        )
    addrs = [
        bd.master_addr for n in sorted(names) if (bd := info.broker_addr_table.get(n)) and bd.master_addr
    ]
    if not addrs:
        raise MQClientError(f"no master broker found in cluster {a.cluster}")
    return addrs


async def _call(admin: AsyncAdmin, addr: str, code: int, fields: dict[str, str]) -> RemotingCommand:
    response = await admin.api.invoke(addr, RemotingCommand.request(code, fields))
    if response.code != ResponseCode.SUCCESS:
        raise MQBrokerError.for_code(response.code, response.remark, addr)
    return response


def _items(text: str | None) -> tuple[str, ...] | None:
    return None if text is None else tuple(i.strip() for i in text.split(",") if i.strip())


async def _update_acl_config(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    config = PlainAccessConfig(
        access_key=a.access_key_name,
        secret_key=a.secret_key_value,
        white_remote_address=a.white_remote_address,
        admin=None if a.admin is None else a.admin.strip().lower() == "true",
        default_topic_perm=a.default_topic_perm,
        default_group_perm=a.default_group_perm,
        topic_perms=_items(a.topic_perms),
        group_perms=_items(a.group_perms),
    )
    for addr in await _targets(admin, a):
        await _call(admin, addr, RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, config.to_ext_fields())
        out(f"create or update plain access config to {addr} success.")


async def _delete_acl_config(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    for addr in await _targets(admin, a):
        await _call(admin, addr, RequestCode.DELETE_ACL_CONFIG, {DELETE_ACL_ACCESS_KEY: a.access_key_name})
        out(f"delete plain access config account from {addr} success.")


async def _update_global_white_addr(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    for addr in await _targets(admin, a):
        await _call(
            admin, addr, RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, {GLOBAL_WHITE_ADDRS: a.addresses}
        )
        out(f"update global white remote addresses to {addr} success.")


async def _cluster_acl_config_version(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    rows = [("#Cluster Name", "#Broker Name", "#Broker Addr", "#AclFilePath", "#AclConfigVersionNum",
             "#AclLastUpdateTime")]  # fmt: skip
    for addr in await _targets(admin, a):
        fields = (await _call(admin, addr, RequestCode.GET_BROKER_CLUSTER_ACL_INFO, {})).ext_fields
        files: dict[str, Any] = json.loads(fields.get("allAclFileVersion") or "{}")
        for path, version in sorted(files.items()):
            stamp = dt.datetime.fromtimestamp(int(version.get("timestamp", 0)) / 1000)
            where = (
                fields.get("clusterName", ""),
                fields.get("brokerName", ""),
                fields.get("brokerAddr", addr),
            )
            rows.append((*where, path, str(version.get("counter", 0)), stamp.strftime("%Y-%m-%d %H:%M:%S")))
    for line in table_lines(rows):
        out(line)


_COMMANDS: dict[str, tuple[Handler, str]] = {
    "updateAclConfig": (_update_acl_config, "Update acl config yaml file in broker"),
    "deleteAclConfig": (_delete_acl_config, "Delete Acl Config Account in broker"),
    "updateGlobalWhiteAddr": (
        _update_global_white_addr,
        "Update global white address for acl Config File in broker",
    ),
    "clusterAclConfigVersion": (
        _cluster_acl_config_version,
        "List all of acl config version information in cluster",
    ),
}


def _add_options(name: str, p: argparse.ArgumentParser) -> None:
    """The options of ACL subcommand ``name`` (RocketMQ's letters)."""
    p.add_argument("-b", "--brokerAddr", dest="broker", help="update/ask this broker (host:port)")
    p.add_argument("-c", "--clusterName", dest="cluster", help="every master of this cluster")
    if name in ("updateAclConfig", "deleteAclConfig"):
        p.add_argument(
            "-a", "--accessKey", dest="access_key_name", required=True, help="the account's AccessKey"
        )
    if name == "updateAclConfig":
        p.add_argument("-s", "--secretKey", dest="secret_key_value", help="the account's SecretKey")
        p.add_argument("-w", "--whiteRemoteAddress", dest="white_remote_address")
        p.add_argument(
            "-i", "--defaultTopicPerm", dest="default_topic_perm", help="DENY, PUB, SUB or PUB|SUB"
        )
        p.add_argument(
            "-u", "--defaultGroupPerm", dest="default_group_perm", help="DENY, PUB, SUB or PUB|SUB"
        )
        p.add_argument("-t", "--topicPerms", dest="topic_perms", help="e.g. topicA=DENY,topicD=SUB")
        p.add_argument("-g", "--groupPerms", dest="group_perms", help="e.g. groupD=DENY,groupD=SUB")
        p.add_argument("-m", "--admin", dest="admin", help="true or false")
    if name == "updateGlobalWhiteAddr":
        p.add_argument("-g", "--globalWhiteRemoteAddresses", dest="addresses", required=True,
                       help="addresses separated by commas, e.g. 10.10.103.*,192.168.0.*")  # fmt: skip


def _usage_error(a: argparse.Namespace) -> str | None:
    if not a.broker and not a.cluster:
        return f"{a.command}: give -b brokerAddr or -c clusterName"
    if a.cluster and not a.namesrv:
        return f"{a.command}: -c needs the NameServer (-n host:port or NAMESRV_ADDR)"
    return None


def _contact(a: argparse.Namespace) -> str:
    """Without ``-n`` the commands talk to the broker of ``-b`` only."""
    return str(a.namesrv or a.broker)


GROUP = CommandGroup(commands=_COMMANDS, add_options=_add_options, usage_error=_usage_error, contact=_contact)
