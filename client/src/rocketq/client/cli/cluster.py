"""mqadmin's cluster commands: clusterList and haStatus.

``clusterList`` lists every broker of each group (``#BID`` 0 the master, >0 slaves) with its role
and, for slaves, the replication lag; ``haStatus -b addr`` (or ``-c cluster``) prints a master's
slaves or a slave's replication state.  The report lines are built by plain functions
(:func:`cluster_rows`, :func:`ha_status_lines`) so that tests check them without a broker.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from rocketq.client.admin import AsyncAdmin, BrokerReplica, HAStatus
from rocketq.client.cli.common import (
    CommandGroup,
    Handler,
    fmt_ms,
    namesrv_usage_error,
    out,
    table,
    table_lines,
)
from rocketq.client.errors import RocketQError

__all__ = ["GROUP", "cluster_rows", "ha_status_lines"]


def cluster_rows(replicas: Sequence[BrokerReplica]) -> list[Sequence[object]]:
    """clusterList's table: RocketMQ's columns (BID 0 is the master) plus the role and, for
    slaves, the replication lag in bytes and seconds ("-" where it does not apply)."""
    rows: list[Sequence[object]] = [
        ("#Cluster Name", "#Broker Name", "#BID", "#Role", "#Addr", "#Version", "#InTPS", "#OutTPS",
         "#Lag(bytes)", "#Lag(s)"),
    ]  # fmt: skip
    for r in replicas:
        if r.error is not None:
            rows.append(
                (r.cluster, r.broker_name, r.broker_id, r.role, r.addr, "unreachable", "-", "-", "-", "-")
            )
            continue
        lag_bytes = "-" if r.lag_bytes is None else r.lag_bytes
        lag_s = "-" if r.lag_ms is None else f"{r.lag_ms / 1000:.1f}"
        if r.slave and r.lag_bytes is None:
            lag_bytes = lag_s = "?"
        rows.append(
            (
                r.cluster,
                r.broker_name,
                r.broker_id,
                r.role,
                r.addr,
                r.version,
                r.in_tps,
                r.out_tps,
                lag_bytes,
                lag_s,
            )
        )
    return rows


async def _cluster_list(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    table(cluster_rows(await admin.cluster_replicas()))


def ha_status_lines(addr: str, st: HAStatus) -> list[str]:
    """haStatus's report (Java 5's ``HAStatusSubCommand``: the master's slaves, or the slave's
    master and offsets)."""
    lines = [f"#Broker: {addr}  #Role: {st.broker_role}  #HA Port: {st.ha_listen_port}"]
    if st.master:
        lines.append(f"#MasterCommitLogMaxOffset: {st.master_commit_log_max_offset}")
        lines.append(f"#SlaveNum: {len(st.connections)}  #InSyncSlaveNum: {st.in_sync_slave_nums}")
        rows: list[Sequence[object]] = [
            ("#SlaveAddr", "#SlaveAckOffset", "#Diff", "#InSync", "#Lag(s)", "#TransferFromWhere")
        ]
        rows += [
            (
                c.addr,
                c.slave_ack_offset,
                c.diff,
                str(c.in_sync).lower(),
                f"{c.lag_ms / 1000:.1f}",
                c.transfer_from_where,
            )
            for c in st.connections
        ]
        lines += table_lines(rows) if st.connections else ["(no slave connected)"]
    elif st.client is not None:
        c = st.client
        lines.append(
            f"#MasterAddr: {c.master_addr or '(unknown)'}  #Status: {c.status or '?'}  "
            f"#Activated: {str(c.activated).lower()}"
        )
        lines.append(f"#MaxOffset: {c.max_offset}  #TransferredByteInSecond: {c.transferred_byte_in_second}")
        last_read = fmt_ms(c.last_read_timestamp_ms) if c.last_read_timestamp_ms else "-"
        lines.append(f"#LastReadTimestamp: {last_read}")
        if c.status_detail:
            lines.append(f"#StatusDetail: {c.status_detail}")
    return lines


async def _ha_status(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    addrs = [a.broker] if a.broker else []
    if a.cluster:
        info = await admin.cluster_list()
        if a.cluster not in info.cluster_addr_table:
            known = sorted(info.cluster_addr_table)
            raise RocketQError(f"the cluster {a.cluster!r} does not exist; known: {known}")
        for name in sorted(info.cluster_addr_table[a.cluster]):
            bd = info.broker_addr_table.get(name)
            addrs += [addr for _, addr in sorted(bd.broker_addrs.items())] if bd is not None else []
    for addr in addrs:
        for line in ha_status_lines(addr, await admin.ha_status(addr)):
            out(line)
        out()


def _usage_error(a: argparse.Namespace) -> str | None:
    problem = namesrv_usage_error(a)
    if problem is None and a.command == "haStatus" and not a.cluster and not a.broker:
        problem = "haStatus: give -b brokerAddr or -c clusterName"
    return problem


def _add_options(name: str, p: argparse.ArgumentParser) -> None:
    if name == "haStatus":
        p.add_argument("-b", "--brokerAddr", dest="broker", help="the broker to ask (master or slave)")
        p.add_argument("-c", "--clusterName", dest="cluster", help="ask every broker of this cluster")


_COMMANDS: dict[str, tuple[Handler, str]] = {
    "clusterList": (_cluster_list, "List cluster infos"),
    "haStatus": (_ha_status, "Fetch ha runtime status data"),
}

GROUP = CommandGroup(commands=_COMMANDS, add_options=_add_options, usage_error=_usage_error)
