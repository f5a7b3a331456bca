"""``mqbroker``: start a broker from a RocketMQ ``broker.conf``.

``mqbroker -c broker.conf [-n "ns1:9876;ns2:9876"] [-p]``.  Once the broker listens it prints,
on stdout and flushed, exactly RocketMQ's boot line::

    The broker[broker-a, 127.0.0.1:10911] boot success. serializeType=JSON and name server is 127.0.0.1:9876 \
brokerRole=ASYNC_MASTER brokerId=0 haListenPort=10912

(one line; with the real ports when ``listenPort=0`` / ``haListenPort=0``), which scripts and the
integration-test helper parse.  RocketMQ's line ends after the NameServer list; the role, id and
HA port are rocketq's addition.
SIGTERM and SIGINT are a clean shutdown: unregister from the NameServers, drain requests, persist
offsets and flush the store.  Exit status: 0 after a clean shutdown, 1 on a configuration or
start-up error (the message names the bad key or the cause).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import gc
import logging
import os
import signal
import sys
from collections.abc import Sequence

from rocketq.broker.config import BrokerConfig
from rocketq.broker.config_keys import broker_properties
from rocketq.broker.config_loader import load_broker_config
from rocketq.broker.local_proxy import LocalProxy
from rocketq.client.errors import RocketQError
from rocketq.client.transport import event_loop
from rocketq.server.diagnostics import enable_stack_dumps
from rocketq.server.memory import keep_freed_memory

__all__ = ["main", "run_broker"]

log = logging.getLogger("rocketq.broker")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mqbroker", description="Start a rocketq broker (RocketMQ compatible).")
    p.add_argument(
        "-c", "--configFile", dest="config_file", help="broker.conf (Java properties, RocketMQ keys)"
    )
    p.add_argument(
        "-n", "--namesrvAddr", dest="namesrv_addr", help='NameServer list, e.g. "127.0.0.1:9876;h2:9876"'
    )
    p.add_argument(
        "-p",
        "--printConfigItem",
        dest="print_config",
        action="store_true",
        help="print the effective configuration and exit",
    )
    p.add_argument(
        "--enable-proxy",
        dest="enable_proxy",
        action="store_true",
        help="also start the gRPC proxy on grpcServerPort (enableProxy=true; docs/grpc.md)",
    )
    p.add_argument(
        "-pc",
        "--proxyConfigPath",
        dest="proxy_config_path",
        help="rmq-proxy.json of the proxy started with enableProxy",
    )
    p.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    return p


async def run_broker(
    config: BrokerConfig, stop: asyncio.Event | None = None, proxy_config_path: str | None = None
) -> int:
    """Run a broker until SIGTERM/SIGINT (or ``stop`` is set); returns the exit status.
    ``proxy_config_path``: the rmq-proxy.json of the proxy started with ``enableProxy``."""
    from rocketq.broker.server import BrokerController

    stop_event = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop_event.set)
        except (NotImplementedError, RuntimeError):  # not the main thread
            pass
    # built first: it refuses a configuration without NameServers before the broker starts
    proxy = LocalProxy(config, proxy_config_path) if config.enable_proxy else None
    controller = BrokerController(config)
    try:
        await controller.start()
    except BaseException:
        await controller.shutdown(grace_s=0)
        raise
    # Everything built at start-up (configs, recovered store state, modules) lives as long as the
    # broker: move it out of the collector's sight so a full collection, which scans every
    # tracked object while holding the GIL, does not stall requests in proportion to it.
    gc.collect()
    gc.freeze()
    names = ";".join(controller.config.namesrv_addr) or "null"
    print(
        f"The broker[{controller.config.broker_name}, {controller.broker_addr}] boot success. "
        f"serializeType=JSON and name server is {names} brokerRole={controller.config.broker_role.value} "
        f"brokerId={controller.config.broker_id} haListenPort={controller.config.ha_listen_port}",
        flush=True,
    )
    if proxy is not None:
        await proxy.start()
    await stop_event.wait()
    log.info("shutdown requested")
    if proxy is not None:
        await proxy.stop()
    await controller.shutdown()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    enable_stack_dumps()  # kill -USR1 <pid>: every thread's stack into the log
    keep_freed_memory()  # the dispatch's per-round arrays reuse heap pages (rocketq.server.memory)
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    overrides = {"namesrvAddr": args.namesrv_addr} if args.namesrv_addr else {}
    if args.enable_proxy:
        overrides["enableProxy"] = "true"
    try:
        config = load_broker_config(args.config_file, overrides=overrides)
        if args.config_file:  # where UPDATE_BROKER_CONFIG persists the configuration, as Java does
            config = dataclasses.replace(config, config_file=os.path.abspath(args.config_file))
    except RocketQError as exc:
        print(f"mqbroker: bad configuration: {exc}", file=sys.stderr, flush=True)
        return 1
    if args.print_config:
        for key, value in broker_properties(config).items():
            print(f"{key}={value}")
        return 0
    try:
        return event_loop.run(run_broker(config, proxy_config_path=args.proxy_config_path))
    except (RocketQError, OSError) as exc:
        print(f"mqbroker: the broker failed to start: {exc}", file=sys.stderr, flush=True)
        return 1
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
