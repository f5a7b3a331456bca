"""``mqadmin``: RocketMQ's admin command line, with its subcommand names and option letters.

Usage: ``mqadmin <subcommand> -n <namesrv> [options]`` (``-n`` defaults to ``$NAMESRV_ADDR``,
several addresses separated by ``;``).  Subcommands: updateTopic, deleteTopic, topicList,
topicRoute, topicStatus, clusterList, haStatus, consumerProgress, queryMsgByKey,
queryMsgById, queryMsgTraceById, resetOffsetByTime, sendMessage, consumeMessage.  ``clusterList`` lists every
broker of each group (``#BID`` 0 the master, >0 slaves) with its role and, for slaves, the
replication lag; ``haStatus -b addr`` (or ``-c cluster``) prints a master's slaves or a slave's
replication state.  Output is plain aligned text (JSON for topicRoute); errors go to stderr as
one ``Error: ...`` line that names the response code and remark.  Exit status: 0 success, 1 the
operation failed, 2 bad usage.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime as dt
import json
import os
import sys
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from rocketq.client import admin_acl_cli, admin_controller_cli
from rocketq.client.admin import AsyncAdmin, BrokerReplica, HAStatus
from rocketq.client.config import ClientConfig
from rocketq.client.errors import MQBrokerError, RocketQError
from rocketq.client.instance import pick_replica
from rocketq.client.model import Message, MessageExt, PullStatus
from rocketq.client.remoting.route import MessageQueue
from rocketq.client.remoting.vocabulary import TOOLS_CONSUMER_GROUP
from rocketq.client.trace import cli as trace_cli

__all__ = ["main"]

Handler = Callable[[AsyncAdmin, argparse.Namespace], Coroutine[Any, Any, None]]


def _out(line: str = "") -> None:
    print(line, flush=False)


def _table_lines(rows: list[Sequence[object]]) -> list[str]:
    if not rows:
        return []
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(str(v).ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in rows]


def _table(rows: list[Sequence[object]]) -> None:
    for line in _table_lines(rows):
        _out(line)


def _fmt_ms(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]


def parse_timestamp(text: str) -> int:
    """Milliseconds, ``now``, or RocketMQ's ``yyyy-MM-dd#HH:mm:ss:SSS`` (also ISO 8601)."""
    if text == "now":
        return int(time.time() * 1000)
    if text.lstrip("-").isdigit():
        return int(text)
    for fmt in ("%Y-%m-%d#%H:%M:%S:%f", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d"):
        try:
            return int(dt.datetime.strptime(text, fmt).timestamp() * 1000)
        except ValueError:
            continue
    raise argparse.ArgumentTypeError(f"bad timestamp {text!r}: use ms, 'now' or yyyy-MM-dd#HH:mm:ss:SSS")


def _print_message(msg: MessageExt, *, show_body: bool = True) -> None:
    rows: list[Sequence[object]] = [
        ("OffsetID:", msg.offset_msg_id),
        ("MsgId:", msg.uniq_key or ""),
        ("Topic:", msg.topic),
        ("Tags:", f"[{msg.tags or ''}]"),
        ("Keys:", f"[{' '.join(msg.keys)}]"),
        ("Queue ID:", msg.queue_id),
        ("Queue Offset:", msg.queue_offset),
        ("CommitLog Offset:", msg.physical_offset),
        ("Reconsume Times:", msg.reconsume_times),
        ("Born Timestamp:", _fmt_ms(msg.born_timestamp)),
        ("Store Timestamp:", _fmt_ms(msg.store_timestamp)),
        ("Born Host:", f"{msg.born_host[0]}:{msg.born_host[1]}"),
        ("Store Host:", f"{msg.store_host[0]}:{msg.store_host[1]}"),
        ("System Flag:", msg.sys_flag),
        ("Properties:", json.dumps(msg.properties, sort_keys=True)),
    ]
    _table(rows)
    if show_body:
        _out(f"Message Body: {msg.body.decode('utf-8', 'replace')}")
    _out()


# ---------------------------------------------------------------------------- subcommands


async def _update_topic(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    addrs = await admin.create_topic(
        a.topic,
        cluster=a.cluster,
        broker_addr=a.broker,
        read_queue_nums=a.read_queue_nums,
        write_queue_nums=a.write_queue_nums,
        perm=a.perm,
        order=a.order,
    )
    for addr in addrs:
        _out(f"create topic to {addr} success.")
    _out(
        f"TopicConfig [topicName={a.topic}, readQueueNums={a.read_queue_nums}, "
        f"writeQueueNums={a.write_queue_nums}, perm={a.perm}, order={str(a.order).lower()}]"
    )


async def _delete_topic(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    await admin.delete_topic(a.topic, cluster=a.cluster)
    _out(f"delete topic [{a.topic}] from cluster [{a.cluster or '(all)'}] success.")
    _out(f"delete topic [{a.topic}] from NameServer success.")


async def _topic_list(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    for topic in await admin.topic_list():
        _out(topic)


async def _topic_route(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    route = await admin.topic_route(a.topic)
    _out(json.dumps(route.to_obj(), indent=2, sort_keys=True))


async def _topic_status(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    rows: list[Sequence[object]] = [("#Broker Name", "#QID", "#Min Offset", "#Max Offset")]
    for st in sorted(await admin.topic_status(a.topic), key=lambda s: s.message_queue):
        rows.append((st.message_queue.broker_name, st.message_queue.queue_id, st.min_offset, st.max_offset))
    _table(rows)


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
    _table(cluster_rows(await admin.cluster_replicas()))


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
        lines += _table_lines(rows) if st.connections else ["(no slave connected)"]
    elif st.client is not None:
        c = st.client
        lines.append(
            f"#MasterAddr: {c.master_addr or '(unknown)'}  #Status: {c.status or '?'}  "
            f"#Activated: {str(c.activated).lower()}"
        )
        lines.append(f"#MaxOffset: {c.max_offset}  #TransferredByteInSecond: {c.transferred_byte_in_second}")
        last_read = _fmt_ms(c.last_read_timestamp_ms) if c.last_read_timestamp_ms else "-"
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
            _out(line)
        _out()


async def _consumer_progress(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    progress = await admin.consumer_progress(a.group, a.topic)
    rows: list[Sequence[object]] = [
        ("#Topic", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset", "#Diff")
    ]
    total = 0
    for p in sorted(progress, key=lambda x: x.message_queue):
        mq = p.message_queue
        rows.append((mq.topic, mq.broker_name, mq.queue_id, p.broker_offset, p.consumer_offset, p.lag))
        total += p.lag
    _table(rows)
    _out()
    _out(f"Diff Total: {total}")


async def _query_msg_by_key(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    msgs = await admin.query_msg_by_key(a.topic, a.key, max_num=a.max_num, begin_ms=a.begin, end_ms=a.end)
    rows: list[Sequence[object]] = [("#Message ID", "#QID", "#Offset")]
    rows += [(m.offset_msg_id, m.queue_id, m.queue_offset) for m in msgs]
    _table(rows)
    if not msgs:
        raise _NotFound(f"no message with key {a.key} in topic {a.topic}")


async def _query_msg_by_id(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    for msg_id in a.msg_id.split(","):
        _print_message(await admin.query_msg_by_id(msg_id.strip(), a.topic))


async def _reset_offset_by_time(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    table = await admin.reset_offset_by_time(a.group, a.topic, a.timestamp, force=a.force)
    rows: list[Sequence[object]] = [("#Broker Name", "#QID", "#Offset")]
    rows += [(mq.broker_name, mq.queue_id, off) for mq, off in sorted(table.items())]
    _table(rows)


async def _send_message(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    from rocketq.client.producer.core import AsyncProducer

    group, client = a.producer_group, admin.api.config
    producer = AsyncProducer(admin.api.namesrv_addrs, producer_group=group, client=client)
    await producer.start()
    try:
        msg = Message(a.topic, a.body.encode(), tags=a.tags, keys=a.keys)
        queue = None
        if a.broker is not None and a.queue_id is not None:
            queue = MessageQueue(a.topic, a.broker, a.queue_id)
        result = await producer.send(msg, queue=queue)
    finally:
        await producer.shutdown()
    _table(
        [
            ("#Broker Name", "#QID", "#Send Result", "#MsgId"),
            (
                result.message_queue.broker_name,
                result.message_queue.queue_id,
                result.send_status.value,
                result.msg_id,
            ),
        ]
    )


async def _consume_message(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    from rocketq.client.remoting.headers import PullMessageRequestHeader
    from rocketq.client.remoting.vocabulary import SUB_ALL, ExpressionType, PullSysFlag

    route = await admin.topic_route(a.topic)
    queues = [
        mq
        for mq in route.readable_queues(a.topic)
        if (a.broker is None or mq.broker_name == a.broker)
        and (a.queue_id is None or mq.queue_id == a.queue_id)
    ]
    left = a.count
    replicas = {bd.broker_name: bd.broker_addrs for bd in route.broker_datas}
    for mq in queues:
        found = pick_replica(replicas.get(mq.broker_name, {}))  # the master, else a slave
        if found is None:
            continue
        addr = found.broker_addr
        offset = (
            a.offset if a.offset is not None else await admin.api.get_min_offset(addr, a.topic, mq.queue_id)
        )
        while left > 0:
            header = PullMessageRequestHeader(
                consumer_group=a.group,
                topic=a.topic,
                queue_id=mq.queue_id,
                queue_offset=offset,
                max_msg_nums=min(32, left),
                sys_flag=int(PullSysFlag.SUBSCRIPTION),
                commit_offset=0,
                suspend_timeout_millis=0,
                subscription=SUB_ALL,
                sub_version=0,
                expression_type=ExpressionType.TAG,
            )
            result = await admin.api.pull_message(addr, header, 10_000)
            if result.status is not PullStatus.FOUND:
                break
            for msg in result.messages[:left]:
                _print_message(msg)
                left -= 1
            offset = result.next_begin_offset
        if left <= 0:
            break
    _out(f"Consumed {a.count - left} messages.")


class _NotFound(RocketQError):
    pass


async def _known_clusters(namesrv: str) -> str:
    """What the NameServer knows, for a usage error: ``cluster X (broker-a at addr, ...)``."""
    admin = AsyncAdmin(namesrv)
    try:
        info = await admin.api.get_broker_cluster_info(timeout_ms=3000)
    except RocketQError as exc:
        return f"the NameServer at {namesrv} could not be asked for its clusters: {exc}"
    finally:
        await admin.close()
    clusters = []
    for cluster in sorted(info.cluster_addr_table):
        brokers = []
        for name in sorted(info.cluster_addr_table[cluster]):
            bd = info.broker_addr_table.get(name)
            master = bd.master_addr if bd is not None else None
            brokers.append(f"{name} at {master}" if master else f"{name} (no master)")
        clusters.append(f"cluster {cluster} ({', '.join(brokers)})")
    if not clusters:
        return f"the NameServer at {namesrv} knows no broker yet"
    example = sorted(info.cluster_addr_table)[0]
    return f"the NameServer at {namesrv} knows {'; '.join(clusters)}, e.g. -c {example}"


# ---------------------------------------------------------------------------- parser

_COMMANDS: dict[str, tuple[Handler, str]] = {
    "updateTopic": (_update_topic, "Update or create topic"),
    "deleteTopic": (_delete_topic, "Delete topic from broker and NameServer"),
    "topicList": (_topic_list, "Fetch all topic list from name server"),
    "topicRoute": (_topic_route, "Examine topic route info"),
    "topicStatus": (_topic_status, "Examine topic Status info"),
    "clusterList": (_cluster_list, "List cluster infos"),
    "haStatus": (_ha_status, "Fetch ha runtime status data"),
    "consumerProgress": (_consumer_progress, "Query consumers's progress, speed"),
    "queryMsgByKey": (_query_msg_by_key, "Query Message by Key"),
    "queryMsgById": (_query_msg_by_id, "Query Message by Id"),
    "resetOffsetByTime": (_reset_offset_by_time, "Reset consumer offset by timestamp"),
    "sendMessage": (_send_message, "Send a message"),
    "consumeMessage": (_consume_message, "Consume message"),
    **admin_controller_cli.COMMANDS,
    **admin_acl_cli.COMMANDS,
    **trace_cli.COMMANDS,
}


def _add_options(name: str, p: argparse.ArgumentParser) -> None:
    if name in admin_controller_cli.COMMANDS:
        admin_controller_cli.add_options(name, p)
        return
    if name in admin_acl_cli.COMMANDS:
        admin_acl_cli.add_options(name, p)
        return
    if name in trace_cli.COMMANDS:
        trace_cli.add_options(name, p)
        return
    topic_required = name not in ("topicList", "clusterList", "queryMsgById")
    if name not in ("clusterList", "topicList", "haStatus"):
        p.add_argument("-t", "--topic", required=topic_required, help="topic name")
    if name == "haStatus":
        p.add_argument("-b", "--brokerAddr", dest="broker", help="the broker to ask (master or slave)")
        p.add_argument("-c", "--clusterName", dest="cluster", help="ask every broker of this cluster")
    elif name == "updateTopic":
        p.add_argument("-c", "--cluster", help="create the topic on every master of this cluster")
        p.add_argument("-b", "--broker", help="create the topic on this broker address")
        p.add_argument("-r", "--read-queue-nums", type=int, default=8)
        p.add_argument("-w", "--write-queue-nums", type=int, default=8)
        p.add_argument("-p", "--perm", type=int, default=6, help="2 W, 4 R, 6 RW")
        p.add_argument("-o", "--order", type=lambda s: s.lower() == "true", default=False)
    elif name == "deleteTopic":
        p.add_argument("-c", "--cluster", help="cluster name (default: every broker)")
    elif name in ("consumerProgress", "resetOffsetByTime"):
        p.add_argument("-g", "--group", required=True, help="consumer group")
        if name == "resetOffsetByTime":
            p.add_argument(
                "-s",
                "--timestamp",
                type=parse_timestamp,
                required=True,
                help="ms, 'now' or yyyy-MM-dd#HH:mm:ss:SSS",
            )
            p.add_argument("-f", "--force", type=lambda s: s.lower() == "true", default=True)
    elif name == "queryMsgByKey":
        p.add_argument("-k", "--key", required=True)
        p.add_argument("-m", "--max-num", type=int, default=64)
        p.add_argument("-b", "--begin", type=parse_timestamp, default=0)
        p.add_argument("-e", "--end", type=parse_timestamp, default=None)
    elif name == "queryMsgById":
        p.add_argument(
            "-i", "--msg-id", required=True, help="offset msgId(s) or UNIQ_KEY(s), comma-separated"
        )
    elif name == "sendMessage":
        p.add_argument("-p", "--body", required=True)
        p.add_argument("-k", "--keys")
        p.add_argument("-c", "--tags")
        p.add_argument("-b", "--broker", help="broker name (with -i)")
        p.add_argument("-i", "--queue-id", type=int)
        p.add_argument("-g", "--producer-group", default="TOOLS_PRODUCER")
    elif name == "consumeMessage":
        p.add_argument("-b", "--broker", help="broker name")
        p.add_argument("-i", "--queue-id", type=int)
        p.add_argument("-o", "--offset", type=int)
        p.add_argument("-c", "--count", type=int, default=128)
        p.add_argument("-g", "--group", default=TOOLS_CONSUMER_GROUP)


def _add_tls_options(p: argparse.ArgumentParser) -> None:
    # TLS (docs/security.md "TLS"); the environment works as Java's -Dtls.enable / -Dtls.client.*
    p.add_argument(
        "--tls",
        action="store_true",
        default=os.environ.get("ROCKETQ_TLS_ENABLE", "").lower() == "true",
        help="connect with TLS (env ROCKETQ_TLS_ENABLE=true)",
    )
    p.add_argument(
        "--tls-trust-cert",
        default=os.environ.get("ROCKETQ_TLS_TRUST_CERT"),
        help="PEM file of the CA(s) to verify the servers with (env ROCKETQ_TLS_TRUST_CERT)",
    )


def _tls_config(args: argparse.Namespace) -> ClientConfig:
    return ClientConfig(use_tls=args.tls, tls_trust_cert_path=args.tls_trust_cert)


def _add_acl_options(p: argparse.ArgumentParser) -> None:
    # ACL (docs/security.md "ACL"): requests are signed as RocketMQ's AclClientRPCHook does
    p.add_argument(
        "--access-key",
        default=os.environ.get("ROCKETMQ_ACCESS_KEY"),
        help="ACL AccessKey to sign requests with (env ROCKETMQ_ACCESS_KEY)",
    )
    p.add_argument(
        "--secret-key",
        default=os.environ.get("ROCKETMQ_SECRET_KEY"),
        help="ACL SecretKey of that account (env ROCKETMQ_SECRET_KEY)",
    )


def _client_config(args: argparse.Namespace) -> ClientConfig:
    """TLS settings plus the ACL credentials of the command line / environment."""
    return dataclasses.replace(_tls_config(args), access_key=args.access_key, secret_key=args.secret_key)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mqadmin", description="rocketq admin tool (RocketMQ mqadmin subset)"
    )
    sub = parser.add_subparsers(dest="command", metavar="<subcommand>", required=True)
    for name, (_, help_text) in _COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument(
            "-n",
            "--namesrvAddr",
            dest="namesrv",
            default=os.environ.get("NAMESRV_ADDR"),
            help="NameServer address list, e.g. 192.168.0.1:9876;192.168.0.2:9876",
        )
        _add_tls_options(p)
        _add_acl_options(p)
        _add_options(name, p)
    return parser


async def _run(args: argparse.Namespace) -> None:
    handler, _ = _COMMANDS[args.command]
    # controller subcommands may run without a NameServer: the list is then never asked
    contact = args.namesrv or admin_controller_cli.contact_address(args)
    admin = AsyncAdmin(contact, config=_client_config(args))
    try:
        await handler(admin, args)
    finally:
        await admin.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if (args.access_key is None) != (args.secret_key is None):
        parser.error("give both --access-key and --secret-key (env ROCKETMQ_ACCESS_KEY/ROCKETMQ_SECRET_KEY)")
    if args.command in admin_controller_cli.COMMANDS:
        problem = admin_controller_cli.usage_error(args)
        if problem:
            parser.error(problem)
    elif args.command in admin_acl_cli.COMMANDS:
        problem = admin_acl_cli.usage_error(args)
        if problem:
            parser.error(problem)
    elif not args.namesrv:
        parser.error("give the NameServer address with -n host:port (or set NAMESRV_ADDR)")
    if args.command == "haStatus" and not args.cluster and not args.broker:
        parser.error("haStatus: give -b brokerAddr or -c clusterName")
    if args.command == "updateTopic" and not args.cluster and not args.broker:
        known = asyncio.run(_known_clusters(args.namesrv))
        parser.error(f"updateTopic: give -c clusterName or -b brokerAddr; {known}")
    try:
        asyncio.run(_run(args))
    except MQBrokerError as exc:
        print(
            f"Error: {args.command} failed: CODE: {exc.code} DESC: {exc.remark}"
            f"{' (broker ' + exc.broker_addr + ')' if exc.broker_addr else ''}",
            file=sys.stderr,
        )
        return 1
    except RocketQError as exc:
        print(f"Error: {args.command} failed: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    finally:
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
