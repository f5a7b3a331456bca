"""``mqadmin``: RocketMQ's admin command line, with its subcommand names and option letters.

Usage: ``mqadmin <subcommand> -n <namesrv> [options]`` (``-n`` defaults to ``$NAMESRV_ADDR``,
several addresses separated by ``;``).  The subcommands come from the command groups of this
package (topics, clusters, consumer groups, messages, the controller, ACL, traces, the
NameServer's KV store), assembled here into one parser in the order :data:`LISTING` gives, as
RocketMQ's ``MQAdminStartup`` registers its commands in one list.  Every subcommand takes ``-n``
and the TLS and ACL options; each group adds its own options, checks what a command line of its
own must hold and names the server the admin client starts from.  Output is plain aligned text
(JSON for topicRoute); errors go to stderr as one ``Error: ...`` line that names the response
code and remark.  Exit status: 0 success, 1 the operation failed, 2 bad usage.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import sys
from collections.abc import Sequence

from rocketq.client.admin import AsyncAdmin
from rocketq.client.cli import (
    acl,
    broker_admin,
    cluster,
    config_lists,
    consumer,
    consumer_status,
    controller,
    cq_producer,
    export,
    group_ops,
    kvconfig,
    message,
    message_read,
    rt_stats,
    runtime_config,
    send_status,
    stats,
    store_admin,
    subgroup,
    tools_conf,
    topic,
    topic_ops,
    trace,
)
from rocketq.client.cli.common import CommandGroup, Handler
from rocketq.client.config import ClientConfig
from rocketq.client.errors import MQBrokerError, RocketQError

__all__ = ["GROUPS", "LISTING", "build_parser", "main"]

GROUPS: tuple[CommandGroup, ...] = (
    topic.GROUP,
    cluster.GROUP,
    consumer.GROUP,
    subgroup.GROUP,
    runtime_config.GROUP,
    broker_admin.GROUP,
    message.GROUP,
    message_read.GROUP,
    topic_ops.GROUP,
    store_admin.GROUP,
    rt_stats.GROUP,
    consumer_status.GROUP,
    controller.GROUP,
    acl.GROUP,
    trace.GROUP,
    kvconfig.GROUP,
    cq_producer.GROUP,
    group_ops.GROUP,
    export.GROUP,
    config_lists.GROUP,
    send_status.GROUP,
    stats.GROUP,
)

#: the subcommands in the order ``mqadmin --help`` lists them
LISTING: tuple[str, ...] = (
    "updateTopic",
    "updateTopicList",
    "deleteTopic",
    "topicList",
    "topicRoute",
    "topicStatus",
    "clusterList",
    "haStatus",
    "consumerProgress",
    "popStatus",
    "skipAccumulatedMessage",
    "setConsumeMode",
    "getConsumerConfig",
    "updateSubGroup",
    "updateSubGroupList",
    "deleteSubGroup",
    "getBrokerConfig",
    "queryCq",
    "updateBrokerConfig",
    "getNamesrvConfig",
    "updateNamesrvConfig",
    "brokerStatus",
    "wipeWritePerm",
    "addWritePerm",
    "topicClusterList",
    "updateTopicPerm",
    "updateOrderConf",
    "allocateMQ",
    "cloneGroupOffset",
    "cleanExpiredCQ",
    "deleteExpiredCommitLog",
    "cleanUnusedTopic",
    "resetMasterFlushOffset",
    "brokerConsumeStats",
    "statsAll",
    "checkMsgSendRT",
    "sendMsgStatus",
    "clusterRT",
    "consumerStatus",
    "consumerConnection",
    "producerConnection",
    "producer",
    "queryMsgByKey",
    "queryMsgById",
    "queryMsgByUniqueKey",
    "queryMsgByOffset",
    "printMsg",
    "printMsgByQueue",
    "resetOffsetByTime",
    "sendMessage",
    "consumeMessage",
    "getControllerMetaData",
    "getControllerConfig",
    "updateControllerConfig",
    "getSyncStateSet",
    "electMaster",
    "cleanBrokerMetadata",
    "getBrokerEpoch",
    "updateAclConfig",
    "deleteAclConfig",
    "updateGlobalWhiteAddr",
    "clusterAclConfigVersion",
    "queryMsgTraceById",
    "updateKvConfig",
    "deleteKvConfig",
    "exportMetadata",
    "exportConfigs",
    "exportMetrics",
)


def _assemble(
    groups: Sequence[CommandGroup], listing: Sequence[str]
) -> dict[str, tuple[CommandGroup, Handler, str]]:
    """Subcommand name -> (its group, handler, help line), in ``listing`` order."""
    found = {
        name: (g, handler, help_text) for g in groups for name, (handler, help_text) in g.commands.items()
    }
    if sorted(found) != sorted(listing):
        raise ValueError(f"the listing {sorted(listing)} differs from the groups' commands {sorted(found)}")
    return {name: found[name] for name in listing}


_COMMANDS = _assemble(GROUPS, LISTING)


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
    p.add_argument(
        "--tools-yml",
        help="YAML file with accessKey/secretKey, used when no key is given "
        "(default $ROCKETMQ_HOME/conf/tools.yml, as Java's mqadmin)",
    )


def _client_config(args: argparse.Namespace) -> ClientConfig:
    """TLS settings plus the ACL credentials of the command line / environment."""
    tls = ClientConfig(use_tls=args.tls, tls_trust_cert_path=args.tls_trust_cert)
    return dataclasses.replace(tls, access_key=args.access_key, secret_key=args.secret_key)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mqadmin", description="rocketq admin tool (RocketMQ mqadmin subset)"
    )
    sub = parser.add_subparsers(dest="command", metavar="<subcommand>", required=True)
    for name, (group, _, help_text) in _COMMANDS.items():
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
        group.add_options(name, p)
    return parser


async def _run(args: argparse.Namespace) -> None:
    group, handler, _ = _COMMANDS[args.command]
    admin = AsyncAdmin(group.contact(args), config=_client_config(args))
    try:
        await handler(admin, args)
    finally:
        await admin.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if (args.access_key is None) != (args.secret_key is None):
        parser.error("give both --access-key and --secret-key (env ROCKETMQ_ACCESS_KEY/ROCKETMQ_SECRET_KEY)")
    if args.access_key is None and args.secret_key is None:
        try:
            found = tools_conf.tools_credentials(args.tools_yml, os.environ)
        except tools_conf.ToolsConfError as exc:
            parser.error(str(exc))
        if found is not None:
            args.access_key, args.secret_key = found
    group, _, _ = _COMMANDS[args.command]
    problem = group.usage_error(args)
    if problem:
        parser.error(problem)
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
