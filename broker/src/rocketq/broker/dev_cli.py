"""``rocketq dev``: a NameServer and a broker in one command, for development.

Starts ``python -m rocketq.namesrv`` and ``python -m rocketq.broker`` as *processes* with the
supported launcher (:mod:`rocketq.client.launcher`; the broker package never imports the
NameServer), with a temporary store unless ``--store-dir`` is given, prints both addresses (for
people, then as ``NAMESRV_ADDR=host:port`` and ``BROKER_ADDR=host:port`` lines for scripts) and
waits; Ctrl-C (or SIGTERM) stops the broker cleanly, then the NameServer, and removes the
temporary directory.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rocketq", description="rocketq developer tools")
    sub = p.add_subparsers(dest="command", required=True)
    dev = sub.add_parser("dev", help="run a NameServer and a broker with a temporary store")
    dev.add_argument("--store-dir", help="keep the store (and logs) in this directory instead of a temp dir")
    dev.add_argument("--broker-name", default="broker-a")
    dev.add_argument("--broker-port", type=int, default=0, help="broker listen port (default: a free port)")
    dev.add_argument("--auto-create-topic", choices=("true", "false"), default="true")
    return p


def _run_dev(args: argparse.Namespace) -> int:
    from rocketq.client.launcher import ServerStartError, local_cluster

    keep = args.store_dir is not None
    work = Path(args.store_dir) if keep else Path(tempfile.mkdtemp(prefix="rocketq-dev-"))
    work.mkdir(parents=True, exist_ok=True)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    broker_conf = {
        "brokerName": args.broker_name,
        "listenPort": args.broker_port,
        "autoCreateTopicEnable": args.auto_create_topic,
    }
    try:
        with local_cluster(work, broker_conf=broker_conf) as cluster:  # stops the broker, then the NameServer
            _print_addresses(cluster.namesrv_addr, cluster.broker_name, cluster.broker_addr, work)
            while not stop.is_set():
                if not cluster.broker.is_alive() or not cluster.namesrv.is_alive():
                    print("a server exited unexpectedly; see the logs", file=sys.stderr, flush=True)
                    return 1
                stop.wait(0.5)
        return 0
    except ServerStartError as exc:
        print(f"rocketq dev: {exc}", file=sys.stderr, flush=True)
        return 1
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
        print("stopped", flush=True)


def _print_addresses(namesrv_addr: str, broker_name: str, broker_addr: str, work: Path) -> None:
    """The human lines, then ``KEY=value`` lines for scripts (``eval "$(rocketq dev | grep =)"``)."""
    print(f"NameServer: {namesrv_addr}", flush=True)
    print(f"Broker:     {broker_name} at {broker_addr}", flush=True)
    print(f"Store:      {work}  (logs: {work}/*.log)", flush=True)
    print(f"Use: export NAMESRV_ADDR={namesrv_addr}   # Ctrl-C stops both", flush=True)
    print(f"NAMESRV_ADDR={namesrv_addr}", flush=True)
    print(f"BROKER_ADDR={broker_addr}", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "dev":
        return _run_dev(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
