"""``mqproxy``: command line of the RocketMQ 5 gRPC proxy (cluster mode).

Options as RocketMQ's ``ProxyStartup``: ``-n`` the NameServer address list (``host:port``, several
separated by ``;``), ``-pc`` an ``rmq-proxy.json`` (``grpcServerPort`` and the other keys of
docs/grpc.md), ``-pm`` the mode (only CLUSTER: the proxy in the broker's process is not built yet).
``-n`` and ``-pm`` win over the file.  Once listening, the process prints ``The proxy boot success.
mode=CLUSTER, grpc listening on HOST:PORT, namesrv=...`` on stdout; it logs on stderr and exits 0 on
SIGTERM or SIGINT after a graceful stop.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from rocketq.proxy.config import ProxyConfig, ProxyConfigError, ProxyMode, load_proxy_config
from rocketq.proxy.server import ProxyServer, boot_line

log = logging.getLogger("rocketq.proxy")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mqproxy", description="rocketq's RocketMQ 5 gRPC proxy (apache.rocketmq.v2.MessagingService)"
    )
    parser.add_argument(
        "-n", "--namesrvAddr", dest="namesrv_addr", metavar="ADDR", help="NameServer address list"
    )
    parser.add_argument(
        "-pc",
        "--proxyConfigPath",
        dest="config_path",
        metavar="FILE",
        help="rmq-proxy.json with RocketMQ's keys",
    )
    parser.add_argument(
        "-pm", "--proxyMode", dest="proxy_mode", metavar="MODE", help="CLUSTER (the only mode yet)"
    )
    parser.add_argument(
        "--grpcServerPort",
        dest="grpc_server_port",
        type=int,
        metavar="PORT",
        help="the gRPC port (wins over the file; mqbroker --enable-proxy passes its grpcServerPort)",
    )
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR (default INFO)")
    return parser


def resolve_config(args: argparse.Namespace) -> ProxyConfig:
    mode = None
    if args.proxy_mode is not None:
        try:
            mode = ProxyMode(args.proxy_mode.upper())
        except ValueError:
            raise ProxyConfigError(f"-pm must be CLUSTER or LOCAL, got {args.proxy_mode!r}") from None
    loaded = load_proxy_config(
        Path(args.config_path) if args.config_path else None,
        namesrv_addr=args.namesrv_addr,
        proxy_mode=mode,
        grpc_server_port=args.grpc_server_port,
    )
    for key in loaded.ignored:
        log.warning("ignoring key %r of %s: rocketq's proxy does not read it", key, args.config_path)
    if loaded.config.proxy_mode is ProxyMode.LOCAL:
        raise ProxyConfigError(
            "proxyMode LOCAL (the proxy with the broker) is started by the broker:"
            " enableProxy=true in broker.conf or mqbroker --enable-proxy; run mqproxy in CLUSTER mode"
        )
    return loaded.config


async def serve(config: ProxyConfig) -> int:
    try:
        server = ProxyServer(config)  # reads the account it signs with (broker_auth)
    except ProxyConfigError as exc:
        log.error("%s", exc)
        return 1
    try:
        await server.start()
    except (OSError, ProxyConfigError) as exc:
        log.error("%s", exc)
        await server.stop(0)
        return 1
    print(boot_line(server.address, config), flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("stopping the proxy")
    await server.stop()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )
    try:
        config = resolve_config(args)
    except ProxyConfigError as exc:
        print(f"mqproxy: {exc}", file=sys.stderr)
        return 2
    return asyncio.run(serve(config))
