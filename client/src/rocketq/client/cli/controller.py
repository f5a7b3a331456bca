"""mqadmin's controller subcommands: getControllerMetaData, getControllerConfig,
updateControllerConfig, getSyncStateSet, electMaster, cleanBrokerMetadata, getBrokerEpoch
(RocketMQ 5's option letters and output lines).

:mod:`rocketq.client.cli.mqadmin` assembles :data:`GROUP` with the other command groups and runs
the handlers with an :class:`~rocketq.client.admin.AsyncAdmin`; the controller commands need no
NameServer (``-a`` names a controller, any of the cluster: a follower
redirects to the leader), except ``getBrokerEpoch`` with a broker name or ``-c`` (the replicas are
looked up in the NameServer's cluster table).  The report lines are built by plain functions
(``*_lines``) so that tests check them without a controller.
"""

from __future__ import annotations

import argparse

from rocketq.client.admin import AsyncAdmin
from rocketq.client.admin_controller import AsyncControllerAdmin, ElectMasterResult
from rocketq.client.cli.common import CommandGroup, Handler, out
from rocketq.client.errors import RocketQError
from rocketq.client.remoting.controller import (
    INFINITE_END_OFFSET,
    BrokerReplicasInfo,
    ControllerMetadata,
    EpochEntryCache,
    ReplicaIdentity,
)

__all__ = [
    "GROUP",
    "broker_epoch_lines",
    "controller_metadata_lines",
    "elect_master_lines",
    "needs_namesrv",
    "sync_state_set_lines",
]


def controller_metadata_lines(meta: ControllerMetadata) -> list[str]:
    """Java's GetControllerMetaDataSubCommand lines, plus rocketq's Raft state."""
    lines = [
        f"#ControllerGroup\t{meta.group}",
        f"#ControllerLeaderId\t{meta.controller_leader_id}",
        f"#ControllerLeaderAddress\t{meta.controller_leader_address}",
    ]
    lines += [f"#Peer:\t{peer}" for peer in meta.peers.split(";") if peer.strip()]
    lines.append(f"#IsLeader\t{str(meta.is_leader).lower()}")
    lines.append(f"#RaftState\t{meta.raft_state}\t#HasQuorum\t{str(meta.has_quorum).lower()}")
    return lines


def _replica(r: ReplicaIdentity) -> str:
    return f"#Broker\t{r.broker_id}\t{r.broker_address}\t#Alive\t{str(r.alive).lower()}"


def sync_state_set_lines(info: BrokerReplicasInfo) -> list[str]:
    """Java's GetSyncStateSetSubCommand report, one block per broker group."""
    lines: list[str] = []
    for name, group in sorted(info.replicas_info_table.items()):
        lines += [
            f"#brokerName\t{name}",
            f"#MasterBrokerId\t{group.master_broker_id}",
            f"#MasterAddr\t{group.master_address}",
            f"#MasterEpoch\t{group.master_epoch}",
            f"#SyncStateSetEpoch\t{group.sync_state_set_epoch}",
            f"#SyncStateSetNums\t{len(group.in_sync_replicas)}",
            "#InSyncReplicas:",
            *(_replica(r) for r in group.in_sync_replicas),
            "#NotInSyncReplicas:",
            *(_replica(r) for r in group.not_in_sync_replicas),
            "",
        ]
    return lines


def elect_master_lines(cluster: str, broker_name: str, result: ElectMasterResult) -> list[str]:
    """Java's ReElectMasterSubCommand lines."""
    lines = [
        f"#ClusterName\t{cluster}",
        f"#BrokerName\t{broker_name}",
        f"#BrokerMasterAddr\t{result.master_address}",
        f"#MasterEpoch\t{result.master_epoch}",
        f"#SyncStateSetEpoch\t{result.sync_state_set_epoch}",
    ]
    group = result.broker_member_group
    if group is not None:
        lines += [f"\t#Broker\t{bid}\t{addr}" for bid, addr in sorted(group.broker_addrs.items())]
    return lines


def broker_epoch_lines(addr: str, cache: EpochEntryCache) -> list[str]:
    """Java's GetBrokerEpochSubCommand lines for one replica."""
    lines = [
        f"#clusterName\t{cache.cluster_name}",
        f"#brokerName\t{cache.broker_name}",
        f"#brokerAddr\t{addr}",
        f"#brokerId\t{cache.broker_id}",
        f"#maxOffset\t{cache.max_offset}",
    ]
    for e in cache.epoch_list:
        end = "MAX" if e.end_offset == INFINITE_END_OFFSET else str(e.end_offset)
        lines.append(f"#Epoch: EpochEntry{{epoch={e.epoch}, startOffset={e.start_offset}, endOffset={end}}}")
    return lines


async def _get_controller_metadata(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    ctl = AsyncControllerAdmin(admin.api)
    for line in controller_metadata_lines(await ctl.get_controller_metadata(a.controller)):
        out(line)


async def _get_controller_config(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    configs = await AsyncControllerAdmin(admin.api).get_controller_config(a.controller)
    for addr, config in configs.items():
        out(f"============{addr}============")
        for key, value in sorted(config.items()):
            out(f"{key:<50}=  {value}")


async def _update_controller_config(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    addrs = await AsyncControllerAdmin(admin.api).update_controller_config(a.controller, {a.key: a.value})
    out(f"update controller config success![{', '.join(addrs)}]")  # Java prints the List
    out(f"{a.key} : {a.value}")


async def _broker_names(admin: AsyncAdmin, cluster: str) -> list[str]:
    info = await admin.cluster_list()
    if cluster not in info.cluster_addr_table:
        raise RocketQError(
            f"the cluster {cluster!r} does not exist; known: {sorted(info.cluster_addr_table)}"
        )
    return sorted(info.cluster_addr_table[cluster])


async def _get_sync_state_set(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    names = [a.broker_name] if a.broker_name else await _broker_names(admin, a.cluster)
    info = await AsyncControllerAdmin(admin.api).get_sync_state_data(a.controller, names)
    for line in sync_state_set_lines(info):
        out(line)


async def _elect_master(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    ctl = AsyncControllerAdmin(admin.api)
    result = await ctl.elect_master(a.controller, a.cluster, a.broker_name, a.broker_id)
    for line in elect_master_lines(a.cluster, a.broker_name, result):
        out(line)


async def _clean_broker_metadata(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    ids = [int(part) for part in (a.broker_ids or "").split(";") if part.strip()]
    await AsyncControllerAdmin(admin.api).clean_broker_metadata(
        a.controller, a.broker_name, cluster=a.cluster, broker_ids=ids, clean_living_broker=a.clean_living
    )
    what = f"brokers {ids}" if ids else "every broker"
    out(f"clear broker {a.broker_name} metadata from controller success: {what}")


async def _epoch_addrs(admin: AsyncAdmin, a: argparse.Namespace) -> list[str]:
    if a.broker and ":" in a.broker:
        return [a.broker]
    info = await admin.cluster_list()
    names = [a.broker] if a.broker else await _broker_names(admin, a.cluster)
    addrs: list[str] = []
    for name in names:
        bd = info.broker_addr_table.get(name)
        if bd is None:
            raise RocketQError(f"the NameServer knows no broker named {name!r}")
        addrs += [addr for _, addr in sorted(bd.broker_addrs.items())]
    return addrs


async def _get_broker_epoch(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    ctl = AsyncControllerAdmin(admin.api)
    for addr in await _epoch_addrs(admin, a):
        for line in broker_epoch_lines(addr, await ctl.get_broker_epoch(addr)):
            out(line)
        out()


_COMMANDS: dict[str, tuple[Handler, str]] = {
    "getControllerMetaData": (_get_controller_metadata, "Get controller cluster's metadata"),
    "getControllerConfig": (_get_controller_config, "Get controller config."),
    "updateControllerConfig": (_update_controller_config, "Update controller config."),
    "getSyncStateSet": (_get_sync_state_set, "Fetch syncStateSet for target brokers"),
    "electMaster": (_elect_master, "Re-elect the specified broker as master"),
    "cleanBrokerMetadata": (_clean_broker_metadata, "Clean metadata of broker on controller"),
    "getBrokerEpoch": (_get_broker_epoch, "Fetch broker epoch entries"),
}


def _add_options(name: str, p: argparse.ArgumentParser) -> None:
    """The options of controller subcommand ``name`` (RocketMQ 5.1's letters)."""
    if name != "getBrokerEpoch":
        p.add_argument(
            "-a", "--controllerAddress", dest="controller", required=True, help="controller address(es), ';'"
        )
    if name == "updateControllerConfig":
        p.add_argument("-k", "--key", dest="key", required=True, help="config key (camelCase)")
        p.add_argument("-v", "--value", dest="value", required=True, help="config value")
    elif name == "getSyncStateSet":
        p.add_argument("-b", "--brokerName", dest="broker_name", help="which broker group")
        p.add_argument("-c", "--clusterName", dest="cluster", help="every group of this cluster (needs -n)")
    elif name == "electMaster":
        p.add_argument("-b", "--brokerId", dest="broker_id", type=int, required=True, help="the new master")
        p.add_argument("-bn", "--brokerName", dest="broker_name", required=True)
        p.add_argument("-c", "--clusterName", dest="cluster", required=True)
    elif name == "cleanBrokerMetadata":
        p.add_argument("-b", "--brokerControllerIdsToClean", dest="broker_ids", help="ids, e.g. 1;2;3")
        p.add_argument("-bn", "--brokerName", dest="broker_name", required=True)
        p.add_argument("-c", "--clusterName", dest="cluster")
        p.add_argument("-l", "--cleanLivingBroker", dest="clean_living", action="store_true")
    elif name == "getBrokerEpoch":
        p.add_argument(
            "-b", "--brokerName", dest="broker", help="a broker name (needs -n) or a broker address"
        )
        p.add_argument("-c", "--clusterName", dest="cluster", help="every broker of this cluster (needs -n)")


def _usage_error(a: argparse.Namespace) -> str | None:
    """What is missing from controller subcommand ``a.command``'s options, or None."""
    if a.command == "getSyncStateSet" and not a.broker_name and not a.cluster:
        return "getSyncStateSet: give -b brokerName or -c clusterName"
    if a.command == "getBrokerEpoch" and not a.broker and not a.cluster:
        return "getBrokerEpoch: give -b brokerName (or a broker address) or -c clusterName"
    if needs_namesrv(a) and not a.namesrv:
        return f"{a.command}: give the NameServer with -n host:port (or set NAMESRV_ADDR)"
    return None


def needs_namesrv(a: argparse.Namespace) -> bool:
    """Whether controller subcommand ``a.command`` looks brokers up in the NameServer."""
    if a.command == "getSyncStateSet":
        return not a.broker_name
    if a.command == "getBrokerEpoch":
        return not (a.broker and ":" in a.broker)
    return False


def _contact(a: argparse.Namespace) -> str:
    """The NameServer list when ``-n`` is given; otherwise the controller a command talks to, or
    the broker of ``getBrokerEpoch -b host:port``."""
    return str(a.namesrv or getattr(a, "controller", None) or a.broker)


GROUP = CommandGroup(commands=_COMMANDS, add_options=_add_options, usage_error=_usage_error, contact=_contact)
