"""``mqnamesrv``: command line of the NameServer.

Settings come, in increasing priority, from the defaults, a RocketMQ-style properties file
(``-c namesrv.properties``), ``-o key=value`` options using the same camelCase keys, and the
``--listen-port`` / ``--bind`` flags.  ``-p`` prints the effective configuration and exits.
Once listening, the process prints ``The Name Server boot success. serializeType=JSON, listening
on HOST:PORT`` on stdout; it logs one line per event on stderr and exits 0 on SIGTERM or SIGINT
after a graceful shutdown.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import os
import signal
import sys
from collections.abc import Sequence

from rocketq.controller.errors import ControllerConfigError
from rocketq.namesrv.config import (
    NamesrvConfig,
    config_from_properties,
    config_to_properties,
    load_config_file,
)
from rocketq.namesrv.errors import NamesrvConfigError
from rocketq.namesrv.server import NamesrvServer, boot_line
from rocketq.server.diagnostics import enable_stack_dumps
from rocketq.server.properties import PropertiesSyntaxError, parse_properties

log = logging.getLogger("rocketq.namesrv")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mqnamesrv", description="rocketq NameServer (Apache RocketMQ 4.x compatible route registry)"
    )
    parser.add_argument(
        "-c", "--config-file", metavar="FILE", help="properties file with RocketMQ camelCase keys"
    )
    parser.add_argument(
        "-p", "--print-config-item", action="store_true", help="print the effective config and exit"
    )
    parser.add_argument(
        "-o", "--option", action="append", default=[], metavar="KEY=VALUE",
        help="set one config key (camelCase, as in the properties file); repeatable",
    )  # fmt: skip
    parser.add_argument(
        "--listen-port", type=int, metavar="PORT", help="TCP port (default 9876; 0 = any free port)"
    )
    parser.add_argument("--bind", metavar="ADDR", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR (default INFO)")
    return parser


def resolve_config(args: argparse.Namespace) -> NamesrvConfig:
    """The effective config from the parsed arguments; unknown keys are logged and ignored."""
    config = NamesrvConfig()
    unknown: list[str] = []
    if args.config_file:
        config, unknown = load_config_file(args.config_file, config)
        # where UPDATE_NAMESRV_CONFIG persists changes, as Java's configStorePath
        config = dataclasses.replace(config, config_file=os.path.abspath(args.config_file))
    if args.option:
        config, more = config_from_properties(parse_properties("\n".join(args.option)), config)
        unknown += more
    for key in unknown:
        log.warning("ignoring unknown config key %r", key)
    overrides: dict[str, str] = {}
    if args.listen_port is not None:
        overrides["listenPort"] = str(args.listen_port)
    if args.bind is not None:
        overrides["bindAddress"] = args.bind
    if overrides:
        config, _ = config_from_properties(overrides, config)
    return config


async def serve(config: NamesrvConfig) -> int:
    """Run a NameServer until SIGTERM/SIGINT; returns the exit status."""
    server = NamesrvServer(config)
    try:
        address = await server.start()
    except OSError as exc:
        log.error("cannot listen on %s:%d: %s", config.bind_address, config.listen_port, exc)
        return 1
    print(boot_line(config, address), flush=True)
    if server.controller is not None:
        print(server.controller.boot_line(), flush=True)
    log.info(
        "expiry: brokers silent for %d ms are dropped (scan every %d ms); KV config: %s",
        config.broker_channel_expired_time_ms, config.scan_not_active_broker_interval_ms,
        config.kv_config_path or "in memory",
    )  # fmt: skip
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("shutdown requested; stopping the Name Server")
    await server.stop(grace_s=3.0)
    log.info("the Name Server stopped")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    enable_stack_dumps()  # kill -USR1 <pid>: every thread's stack into the log
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s - %(message)s",
        stream=sys.stderr,
    )
    try:
        config = resolve_config(args)
    except (NamesrvConfigError, PropertiesSyntaxError) as exc:
        print(f"mqnamesrv: {exc}", file=sys.stderr)
        return 2
    if args.print_config_item:
        sys.stdout.write(config_to_properties(config))
        return 0
    try:
        return asyncio.run(serve(config))
    except ControllerConfigError as exc:  # enableControllerInNamesrv with a bad controller config
        print(f"mqnamesrv: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # a second Ctrl-C during shutdown
        return 130
