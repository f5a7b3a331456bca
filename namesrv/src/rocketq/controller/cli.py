"""``mqcontroller``: command line of a standalone controller (one node of a controller group).

Settings come, in increasing priority, from the defaults, a RocketMQ-style ``controller.conf``
(``-c``), and ``-o key=value`` options with the same camelCase keys; ``-p`` prints the effective
configuration and exits.  Once the Raft node runs and the remoting port listens, the process
prints ``The Controller boot success. listening on HOST:PORT raft=HOST:PORT`` on stdout; it logs
on stderr and exits 0 on SIGTERM or SIGINT, 2 on a bad configuration, 1 when it cannot listen.
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
from pathlib import Path

from rocketq.controller.config import ControllerConfig, config_from_properties, config_to_properties
from rocketq.controller.errors import ControllerConfigError
from rocketq.controller.server import ControllerServer
from rocketq.server.diagnostics import enable_stack_dumps
from rocketq.server.properties import PropertiesSyntaxError, parse_properties

log = logging.getLogger("rocketq.controller")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mqcontroller", description="rocketq controller (RocketMQ 5 controller mode)"
    )
    parser.add_argument(
        "-c", "--config-file", metavar="FILE", help="controller.conf with RocketMQ camelCase keys"
    )
    parser.add_argument(
        "-p", "--print-config-item", action="store_true", help="print the effective config and exit"
    )
    parser.add_argument(
        "-o",
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set one config key (camelCase, as in controller.conf); repeatable",
    )
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR (default INFO)")
    return parser


def load_config_file(path: str, base: ControllerConfig) -> tuple[ControllerConfig, list[str]]:
    """Read a controller.conf (Java properties); returns the config and the unknown keys."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ControllerConfigError(f"cannot read config file {path}: {exc}") from exc
    return config_from_properties(parse_properties(text), base)


def resolve_config(args: argparse.Namespace) -> ControllerConfig:
    """The effective config; unknown keys are logged and ignored."""
    config = ControllerConfig()
    unknown: list[str] = []
    if args.config_file:
        config, unknown = load_config_file(args.config_file, config)
        # where UPDATE_CONTROLLER_CONFIG persists changes (Java's configStorePath)
        config = dataclasses.replace(config, config_file=os.path.abspath(args.config_file))
    if args.option:
        config, more = config_from_properties(parse_properties("\n".join(args.option)), config)
        unknown += more
    for key in unknown:
        log.warning("ignoring unknown config key %r", key)
    config.require_peers()
    if config.self_peer_or_none() is None:
        raise ControllerConfigError("controllerDLegerSelfId is not set to one of the peer ids")
    return config


async def serve(config: ControllerConfig) -> int:
    """Run a controller until SIGTERM/SIGINT; returns the exit status."""
    server = ControllerServer(config)
    try:
        await server.start()
    except OSError as exc:
        log.error("cannot listen on %s: %s", config.self_peer.address, exc)
        return 1
    print(server.boot_line(), flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("shutdown requested; stopping the controller")
    await server.stop()
    log.info("the controller stopped")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    enable_stack_dumps()  # kill -USR1 <pid>: every thread's stack into the log
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s - %(message)s",
        stream=sys.stderr,
    )
    logging.getLogger("pysyncobj").setLevel(logging.WARNING)
    try:
        config = resolve_config(args)
    except (ControllerConfigError, PropertiesSyntaxError) as exc:
        print(f"mqcontroller: {exc}", file=sys.stderr)
        return 2
    if args.print_config_item:
        sys.stdout.write(config_to_properties(config))
        return 0
    try:
        return asyncio.run(serve(config))
    except KeyboardInterrupt:
        return 130
