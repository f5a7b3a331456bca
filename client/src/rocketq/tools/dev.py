"""``rocketq dev``: a NameServer and a broker in one command, for development.

Starts ``python -m rocketq.namesrv`` and ``python -m rocketq.broker`` as *processes* with the
supported launcher (:mod:`rocketq.client.launcher`; this tool imports no server code), with a
temporary store unless ``--store-dir`` is given, prints both addresses (for people, then as
``NAMESRV_ADDR=host:port`` and ``BROKER_ADDR=host:port`` lines for scripts) and waits; Ctrl-C (or
SIGTERM) stops the broker cleanly, then the NameServer, and removes the temporary directory.
``--slaves N`` adds N slave brokers to the broker's group (``brokerId`` 1..N, ``brokerRole=SLAVE``,
each with its own store in the same directory; they are stopped first), printed as ``Slave:`` lines
and ``SLAVE_ADDRS=a,b``; ``--broker-role SYNC_MASTER`` makes the master synchronous
(docs/replication.md); ``--enable-property-filter`` turns SQL92 selectors on for every broker. The
web dashboard (docs/observability.md) is started too, on a free port (``--dashboard-port``,
``--dashboard-users``, ``--no-dashboard``), printed as ``Dashboard:`` and ``DASHBOARD_URL=``;
``rocketq dashboard`` runs it alone (:mod:`rocketq.tools.dashboard.cli`). The NameServer and the
brokers serve Prometheus metrics (``metricsExporterType=PROM`` on free ports), printed as
``Metrics:`` and ``NAMESRV_METRICS_URL=`` / ``BROKER_METRICS_URL=``.

``--controller`` starts a controller-mode group instead (RocketMQ 5, docs/failover.md): three
controllers (``mqcontroller`` processes, a Raft group), a NameServer and three brokers of one
group with ``enableControllerMode=true``, short heartbeats (``brokerHeartbeatInterval=1000``,
``controllerHeartBeatTimeoutMills=3000``) so that a killed master is replaced within seconds.
It prints every address and, once the controller elected it and it registered as id 0, the
master (``Master:`` and ``MASTER_ADDR=``; also ``CONTROLLER_ADDR=a;b;c`` and ``BROKER_ADDRS=``).
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rocketq.client.launcher import ServerProcess

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rocketq", description="rocketq developer tools")
    sub = p.add_subparsers(dest="command", required=True)
    dev = sub.add_parser("dev", help="run a NameServer and a broker with a temporary store")
    dev.add_argument("--store-dir", help="keep the store (and logs) in this directory instead of a temp dir")
    dev.add_argument("--broker-name", default="broker-a")
    dev.add_argument("--broker-port", type=int, default=0, help="broker listen port (default: a free port)")
    dev.add_argument("--auto-create-topic", choices=("true", "false"), default="true")
    dev.add_argument(
        "--slaves", type=int, default=0, metavar="N",
        help="also start N slaves of the broker (brokerId 1..N, brokerRole SLAVE, stores of their own)",
    )  # fmt: skip
    dev.add_argument(
        "--broker-role", choices=("ASYNC_MASTER", "SYNC_MASTER"), default="ASYNC_MASTER",
        help="the master's brokerRole (SYNC_MASTER acknowledges a send once a slave has it)",
    )  # fmt: skip
    dev.add_argument(
        "--enable-property-filter", action="store_true", help="enablePropertyFilter=true: SQL92 selectors"
    )
    dev.add_argument(
        "--controller", action="store_true",
        help="controller mode: 3 controllers, a NameServer and a group of 3 brokers with elected masters",
    )  # fmt: skip
    dev.add_argument("--dashboard-port", type=int, default=0, help="web dashboard port (default: free port)")
    dev.add_argument("--dashboard-users", help="users file of the dashboard (rocketq dashboard --users)")
    dev.add_argument("--no-dashboard", action="store_true", help="do not start the web dashboard")
    from rocketq.tools.dashboard.cli import add_arguments as add_dashboard_arguments

    add_dashboard_arguments(sub.add_parser("dashboard", help="the web dashboard (docs/observability.md)"))
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
    broker_conf: dict[str, object] = {
        "brokerName": args.broker_name,
        "listenPort": args.broker_port,
        "autoCreateTopicEnable": args.auto_create_topic,
        "enablePropertyFilter": str(args.enable_property_filter).lower(),
        **DEV_BROKER_METRICS_CONF,
    }
    if args.slaves < 0:
        print("rocketq dev: --slaves must be >= 0", file=sys.stderr, flush=True)
        return 2
    if args.controller:
        try:
            return _run_controller_group(work, broker_conf, stop)
        except ServerStartError as exc:
            print(f"rocketq dev: {exc}", file=sys.stderr, flush=True)
            return 1
        finally:
            if not keep:
                shutil.rmtree(work, ignore_errors=True)
            print("stopped", flush=True)
    try:
        master_conf = {**broker_conf, "brokerRole": args.broker_role}
        with local_cluster(work, broker_conf=master_conf, namesrv_args=DEV_NAMESRV_METRICS_ARGS) as cluster:
            with contextlib.ExitStack() as slaves:  # stopped before the master and the NameServer
                started = [
                    slaves.enter_context(_spawn_slave(work, cluster.namesrv_addr, broker_conf, i))
                    for i in range(1, args.slaves + 1)
                ]
                _print_addresses(cluster.namesrv_addr, cluster.broker_name, cluster.broker_addr, work)
                _print_slaves(cluster.broker_name, args.broker_role, [s.addr for s in started])
                _print_metrics(cluster.namesrv, cluster.broker)
                if not args.no_dashboard:
                    slaves.enter_context(_spawn_dashboard(work, cluster.namesrv_addr, args))
                while not stop.is_set():
                    if not all(p.is_alive() for p in (cluster.broker, cluster.namesrv, *started)):
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


def _spawn_slave(
    work: Path, namesrv_addr: str, broker_conf: Mapping[str, object], broker_id: int
) -> ServerProcess:
    """Slave ``broker_id`` of the dev broker: same brokerName, its own store and a free port; it
    finds the master's HA address through the NameServer, as a RocketMQ slave does."""
    from rocketq.client.launcher import spawn_broker

    conf: dict[str, Any] = {**broker_conf, "listenPort": 0, "brokerId": broker_id, "brokerRole": "SLAVE"}
    return spawn_broker(work, namesrv_addr, **conf)


#: Prometheus metrics on free ports (docs/observability.md "Metrics")
DEV_BROKER_METRICS_CONF: dict[str, object] = {"metricsExporterType": "PROM", "metricsPromExporterPort": 0}
DEV_NAMESRV_METRICS_ARGS = ("-o", "metricsExporterType=PROM", "-o", "metricsPromExporterPort=0")


def _print_metrics(namesrv: ServerProcess, broker: ServerProcess) -> None:
    """``Metrics:`` and the ``*_METRICS_URL=`` lines (the exporters' addresses from their logs)."""
    urls = [f"http://{p.metrics_addr}/metrics" if p.metrics_addr else "" for p in (namesrv, broker)]
    print(f"Metrics:    NameServer {urls[0]}  broker {urls[1]}", flush=True)
    print(f"NAMESRV_METRICS_URL={urls[0]}", flush=True)
    print(f"BROKER_METRICS_URL={urls[1]}", flush=True)


#: controller-mode settings of ``rocketq dev --controller`` (fast failover for trying it out)
DEV_CONTROLLER_BROKER_CONF: dict[str, object] = {
    "enableControllerMode": "true",
    "brokerHeartbeatInterval": 1000,
    "controllerHeartBeatTimeoutMills": 3000,
}
DEV_CONTROLLER_CONF: dict[str, object] = {
    "scanNotActiveBrokerInterval": 1000,
    # as the brokers: a controller elects nobody for this long after it starts (its start-up window)
    "controllerHeartBeatTimeoutMills": 3000,
}
_MASTER_WAIT_S = 60.0


def _run_controller_group(work: Path, broker_conf: Mapping[str, object], stop: threading.Event) -> int:
    """3 controllers, a NameServer, 3 brokers in controller mode; prints them and the master."""
    from rocketq.client.launcher import spawn_broker, spawn_controllers, spawn_namesrv

    with contextlib.ExitStack() as stack:
        controllers = spawn_controllers(work, 3, controller_conf=DEV_CONTROLLER_CONF)
        for proc in controllers:
            stack.enter_context(proc)
        controller_addr = ";".join(p.addr for p in controllers)
        namesrv = stack.enter_context(spawn_namesrv(work))
        conf: dict[str, Any] = {
            **broker_conf,
            **DEV_CONTROLLER_BROKER_CONF,
            "controllerAddr": controller_addr,
        }
        brokers = [
            stack.enter_context(spawn_broker(work, namesrv.addr, **{**conf, "listenPort": 0, "brokerId": i}))
            for i in (1, 2, 3)
        ]  # stopped first (ExitStack order), then the NameServer, then the controllers
        name = str(broker_conf.get("brokerName", "broker-a"))
        for i, proc in enumerate(controllers):
            print(f"Controller: n{i} at {proc.addr}", flush=True)
        print(f"NameServer: {namesrv.addr}", flush=True)
        for proc in brokers:
            print(f"Broker:     {name} at {proc.addr}  (controller mode)", flush=True)
        print(f"Store:      {work}  (logs: {work}/*.log)", flush=True)
        master = _wait_for_master(namesrv.addr, name, stop)
        if master is None:
            print(f"no master was elected for {name} within {_MASTER_WAIT_S:.0f} s; see the logs", flush=True)
            return 1
        print(f"Master:     {name} at {master}  (elected by the controller)", flush=True)
        print(f"Use: export NAMESRV_ADDR={namesrv.addr}   # Ctrl-C stops everything", flush=True)
        print(f"CONTROLLER_ADDR={controller_addr}", flush=True)
        print(f"NAMESRV_ADDR={namesrv.addr}", flush=True)
        print(f"BROKER_ADDRS={','.join(p.addr for p in brokers)}", flush=True)
        print(f"MASTER_ADDR={master}", flush=True)
        while not stop.is_set():
            if not namesrv.is_alive():
                print("the NameServer exited unexpectedly; see the logs", file=sys.stderr, flush=True)
                return 1
            stop.wait(0.5)
    return 0


def _wait_for_master(namesrv_addr: str, broker_name: str, stop: threading.Event) -> str | None:
    """The address the NameServer lists as ``broker_name``'s id 0, polled until it appears."""
    from rocketq.client.admin import Admin
    from rocketq.client.errors import RocketQError

    with Admin(namesrv_addr) as admin:
        deadline = time.monotonic() + _MASTER_WAIT_S
        while time.monotonic() < deadline and not stop.is_set():
            with contextlib.suppress(RocketQError):
                bd = admin.cluster_list().broker_addr_table.get(broker_name)
                if bd is not None and bd.master_addr:
                    return bd.master_addr
            stop.wait(0.2)
    return None


def _spawn_dashboard(work: Path, namesrv_addr: str, args: argparse.Namespace) -> ServerProcess:
    """``rocketq dashboard`` as a child process; prints ``Dashboard:`` and ``DASHBOARD_URL=``."""
    from rocketq.tools.dashboard.launch import dashboard_url, spawn_dashboard

    users = ("--users", str(Path(args.dashboard_users).resolve())) if args.dashboard_users else ()
    proc = spawn_dashboard(work, namesrv_addr, *users, port=args.dashboard_port)
    print(f"Dashboard:  {dashboard_url(proc)}", flush=True)
    print(f"DASHBOARD_URL={dashboard_url(proc)}", flush=True)
    return proc


def _print_slaves(broker_name: str, role: str, slave_addrs: Sequence[str]) -> None:
    """One line per slave, then ``SLAVE_ADDRS=a,b`` (only with ``--slaves``)."""
    if not slave_addrs:
        return
    print(f"Role:       master {role}, {len(slave_addrs)} slave(s)", flush=True)
    for broker_id, addr in enumerate(slave_addrs, start=1):
        print(f"Slave:      {broker_name} #{broker_id} at {addr}", flush=True)
    print(f"SLAVE_ADDRS={','.join(slave_addrs)}", flush=True)


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
    if args.command == "dashboard":
        from rocketq.tools.dashboard.cli import run as run_dashboard

        return run_dashboard(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
