"""mqadmin's runtime-configuration commands: getBrokerConfig, updateBrokerConfig, getNamesrvConfig
and updateNamesrvConfig (RocketMQ's names, option letters and output layout).

``getBrokerConfig -b addr`` prints ``============addr============`` and then one
``key<padded to 50>=  value`` line per key; with ``-c cluster`` every master
(``============Master: addr============``) and its slaves
(``============My Master: m=====Slave: s============``).  ``updateBrokerConfig -k key -v value``
(``-b`` one broker, ``-c`` every master of a cluster) prints ``update broker config success,
addr`` per broker; a broker refuses a key it cannot change while running, naming it.
``getNamesrvConfig`` prints ``============addr============`` and the lines per NameServer of
``-n``; ``updateNamesrvConfig -k key -v value`` changes every NameServer of ``-n``.
"""

from __future__ import annotations

import argparse

from rocketq.client.admin import AsyncAdmin
from rocketq.client.admin_config import (
    get_broker_config,
    get_namesrv_config,
    update_broker_config,
    update_namesrv_config,
)
from rocketq.client.cli.common import CommandGroup, Handler, namesrv_usage_error, out
from rocketq.client.errors import MQClientError
from rocketq.client.remoting.vocabulary import MASTER_ID

__all__ = ["GROUP"]


def _print_config(prefix: str, props: dict[str, str]) -> None:
    out(prefix)
    for key, value in sorted(props.items()):
        out(f"{key:<50}=  {value}")
    out()


async def _get_broker_config(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    if a.broker_addr:
        _print_config(
            f"============{a.broker_addr}============", await get_broker_config(admin, a.broker_addr)
        )
        return
    info = await admin.cluster_list()
    names = info.cluster_addr_table.get(a.cluster)
    if names is None:
        raise MQClientError(
            f"the cluster {a.cluster!r} does not exist; known: {sorted(info.cluster_addr_table)}"
        )
    for name in sorted(names):
        bd = info.broker_addr_table.get(name)
        if bd is None or MASTER_ID not in bd.broker_addrs:
            continue
        master = bd.broker_addrs[MASTER_ID]
        _print_config(f"============Master: {master}============", await get_broker_config(admin, master))
        for bid, slave in sorted(bd.broker_addrs.items()):
            if bid != MASTER_ID:
                prefix = f"============My Master: {master}=====Slave: {slave}============"
                _print_config(prefix, await get_broker_config(admin, slave))


async def _update_broker_config(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    props = {a.key.strip(): a.value.strip()}
    for addr in await update_broker_config(admin, props, broker_addr=a.broker_addr, cluster=a.cluster):
        out(f"update broker config success, {addr}")


async def _get_namesrv_config(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    for addr, props in (await get_namesrv_config(admin)).items():
        _print_config(f"============{addr}============", props)


async def _update_namesrv_config(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    addrs = await update_namesrv_config(admin, {a.key.strip(): a.value.strip()})
    out(f"update name server config success!{addrs}")
    out(f"{a.key.strip()} : {a.value.strip()}")


def _usage_error(a: argparse.Namespace) -> str | None:
    problem = namesrv_usage_error(a)
    if problem is None and a.command.endswith("BrokerConfig") and not a.broker_addr and not a.cluster:
        problem = f"{a.command}: give -b brokerAddr (one broker) or -c clusterName (every master)"
    return problem


def _add_options(name: str, p: argparse.ArgumentParser) -> None:
    if name.endswith("BrokerConfig"):
        verb = "get" if name.startswith("get") else "update"
        p.add_argument("-b", "--brokerAddr", dest="broker_addr", help=f"{verb} which broker")
        p.add_argument("-c", "--clusterName", dest="cluster", help=f"{verb} which cluster")
    if name.startswith("update"):
        p.add_argument("-k", "--key", required=True, help="config key")
        p.add_argument("-v", "--value", required=True, help="config value")


_COMMANDS: dict[str, tuple[Handler, str]] = {
    "getBrokerConfig": (_get_broker_config, "Get broker config by cluster or special broker"),
    "updateBrokerConfig": (_update_broker_config, "Update broker's config"),
    "getNamesrvConfig": (_get_namesrv_config, "Get configs of name server."),
    "updateNamesrvConfig": (_update_namesrv_config, "Update configs of name server."),
}

GROUP = CommandGroup(commands=_COMMANDS, add_options=_add_options, usage_error=_usage_error)
