"""The deployment files of ``examples/conf`` start working clusters on one machine.

The 2m-2s-async and 2m-2s-sync files (two master groups with a slave each), the controller-mode
quick start (a NameServer with an embedded controller, two replicas of one group) and the three
independent controllers (``mqcontroller``, two replicas of one group) are started as real
``mqnamesrv`` / ``mqcontroller`` / ``mqbroker`` processes, in the order docs/cluster-deployment.md
gives.  The files
carry fixed ports and store paths as RocketMQ's do; the test starts copies in which only those are
rewritten (every fixed port to one free port, ``/tmp/rocketq/...`` to the test's temp dir), so it
does not collide with other servers on the machine and checks the shipped files otherwise.  The
cluster is checked as a user would: ``mqadmin clusterList`` shows the expected brokers and roles,
and a message sent is consumed; with three controllers, ``mqadmin getControllerMetaData`` names
the Raft leader, and after the master is killed (SIGKILL) the other replica is elected and takes
messages.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from rocketq.client.admin import Admin
from rocketq.client.launcher import CONTROLLER_BOOT_RE
from rocketq.client.testing import (
    ServerProcess,
    create_topic,
    free_port,
    produce_and_consume,
    run_mqadmin,
    spawn_broker,
    spawn_controller,
    spawn_namesrv,
    wait_for,
    wait_value,
)
from rocketq.server.properties import parse_properties

CONF = Path(__file__).resolve().parents[1] / "examples" / "conf"
#: keys whose values hold the fixed ports of the shipped files
PORT_KEYS = frozenset(
    {"listenPort", "haListenPort", "namesrvAddr", "controllerAddr", "controllerDLegerPeers"}
)
#: keys whose values are paths under STORE_ROOT
PATH_KEYS = frozenset({"storePathRootDir", "controllerStorePath"})
STORE_ROOT = "/tmp/rocketq/"
NAMESRV_PORT = 9876


class Localizer:
    """Rewrites the fixed ports and store paths of example files; one free port per fixed port."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.ports: dict[int, int] = {}

    def port(self, fixed: int) -> int:
        if fixed not in self.ports:
            self.ports[fixed] = free_port()
        return self.ports[fixed]

    def props(self, path: Path) -> dict[str, str]:
        props = parse_properties(path.read_text(encoding="utf-8"))
        for key, value in props.items():
            if key in PORT_KEYS:
                props[key] = re.sub(r"(?<=:)\d+|^\d+$", lambda m: str(self.port(int(m[0]))), value)
            elif key in PATH_KEYS:
                assert value.startswith(STORE_ROOT), f"{path}: {key}={value} is not under {STORE_ROOT}"
                props[key] = str(self.tmp / value.removeprefix(STORE_ROOT))
        return props

    def copy(self, path: Path) -> Path:
        target = self.tmp / "conf" / path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("".join(f"{k}={v}\n" for k, v in self.props(path).items()), encoding="utf-8")
        return target


def start_namesrv(stack: ExitStack, local: Localizer, conf: Path | None = None) -> ServerProcess:
    """``mqnamesrv [-c conf]`` on the free port that stands for 9876."""
    args = ["-c", str(local.copy(conf))] if conf is not None else []
    port = str(local.port(NAMESRV_PORT))
    return stack.enter_context(spawn_namesrv(local.tmp, *args, "--listen-port", port))


def start_broker(stack: ExitStack, local: Localizer, conf: Path, namesrv: ServerProcess) -> ServerProcess:
    """``mqbroker -c`` with the copy's keys (the launcher adds its own only for keys it lacks)."""
    # Any: spawn_broker takes the broker.conf keys as keyword arguments beside its own typed ones
    keys: dict[str, Any] = dict(local.props(conf))
    return stack.enter_context(spawn_broker(local.tmp, namesrv.addr, **keys))


def mqadmin(*args: str) -> str:
    """``mqadmin args``' output (it must succeed)."""
    done = run_mqadmin(*args)
    assert done.returncode == 0, f"mqadmin {' '.join(args)} failed:\n{done.stdout}{done.stderr}"
    return done.stdout


def cluster_list(namesrv_addr: str) -> list[tuple[str, int, str]]:
    """``mqadmin clusterList``'s rows as (broker name, BID, role) of brokers that answered."""
    out = mqadmin("clusterList", "-n", namesrv_addr)
    rows = []
    for line in out.splitlines()[1:]:
        cols = re.split(r"\s{2,}", line.strip())  # columns are aligned with two blanks or more
        if len(cols) == 10 and cols[5] != "unreachable":
            rows.append((cols[1], int(cols[2]), cols[3], cols[8]))
    return [(name, bid, role) for name, bid, role, lag in rows if bid == 0 or lag not in ("?", "-")]


def controller_replicas(namesrv_addr: str) -> list[tuple[str, int, str]]:
    """clusterList's rows with every slave's BID as 1: the controller hands out ids 1, 2...; the
    master registers as BID 0, a slave with its own id."""
    return sorted((name, min(bid, 1), role) for name, bid, role in cluster_list(namesrv_addr))


def wait_elected(namesrv_addr: str) -> None:
    """Wait until clusterList shows a master of broker-a elected and the other replica following."""
    expected = [("broker-a", 0, "SYNC_MASTER"), ("broker-a", 1, "SLAVE")]
    wait_for(
        lambda: controller_replicas(namesrv_addr) == expected,
        "a controller to elect a master of broker-a and the other replica to follow it",
        timeout_s=90,
        interval_s=0.5,
    )


def controller_leader(controller_addr: str) -> str | None:
    """The Raft leader's address in ``mqadmin getControllerMetaData -a controller_addr``'s report."""
    report = mqadmin("getControllerMetaData", "-a", controller_addr)
    match = re.search(r"^#ControllerLeaderAddress\t(\S+:\d+)$", report, re.M)
    return match[1] if match else None


def master_of(namesrv_addr: str, group: str) -> str | None:
    """The address the NameServer lists as ``group``'s master (BID 0)."""
    with Admin(namesrv_addr) as admin:
        data = admin.cluster_list().broker_addr_table.get(group)
    return data.master_addr if data is not None else None


@pytest.fixture
def stack() -> Iterator[ExitStack]:
    with ExitStack() as s:
        yield s


@pytest.mark.parametrize(
    ("folder", "master_role"), [("2m-2s-async", "ASYNC_MASTER"), ("2m-2s-sync", "SYNC_MASTER")]
)
def test_2m_2s_files_start_a_replicated_cluster(
    tmp_path: Path, stack: ExitStack, folder: str, master_role: str
) -> None:
    local = Localizer(tmp_path)
    namesrv = start_namesrv(stack, local)
    for name in ("broker-a", "broker-a-s", "broker-b", "broker-b-s"):
        start_broker(stack, local, CONF / folder / f"{name}.properties", namesrv)
    expected = [
        ("broker-a", 0, master_role),
        ("broker-a", 1, "SLAVE"),
        ("broker-b", 0, master_role),
        ("broker-b", 1, "SLAVE"),
    ]
    # a slave counts once clusterList shows its replication lag: it is connected to its master
    wait_for(
        lambda: sorted(cluster_list(namesrv.addr)) == expected,
        "clusterList to show both groups with their connected slaves",
        timeout_s=90,
        interval_s=0.5,
    )
    topic = f"ExampleConf{folder.replace('-', '')}"
    create_topic(namesrv.addr, topic, queues=4)
    produce_and_consume(namesrv.addr, topic, group=f"example-conf-{folder}")


def test_controller_quick_start_files_elect_a_master(tmp_path: Path, stack: ExitStack) -> None:
    local = Localizer(tmp_path)
    folder = CONF / "controller" / "quick-start"
    namesrv = start_namesrv(stack, local, folder / "namesrv.conf")
    wait_for(lambda: CONTROLLER_BOOT_RE.search(namesrv.log_text()) is not None, "the embedded controller")
    for name in ("broker-n0", "broker-n1"):
        start_broker(stack, local, folder / f"{name}.conf", namesrv)
    wait_elected(namesrv.addr)
    create_topic(namesrv.addr, "ExampleConfController", queues=4)
    produce_and_consume(namesrv.addr, "ExampleConfController", group="example-conf-controller")


def test_controller_three_independent_files_elect_and_fail_over(tmp_path: Path, stack: ExitStack) -> None:
    local = Localizer(tmp_path)
    folder = CONF / "controller" / "cluster-3n-independent"
    controllers = [
        stack.enter_context(spawn_controller(tmp_path, local.copy(folder / f"controller-n{i}.conf")))
        for i in range(3)
    ]
    # the docs' command: getControllerMetaData on n0 (the controller on 9878) names the Raft leader
    leader = wait_value(
        lambda: controller_leader(controllers[0].addr), "getControllerMetaData to name a Raft leader", 60
    )
    assert leader in {c.addr for c in controllers}, leader
    namesrv = start_namesrv(stack, local)
    replicas = [start_broker(stack, local, folder / f"{n}.conf", namesrv) for n in ("broker-n0", "broker-n1")]
    brokers = {b.addr: b for b in replicas}
    wait_elected(namesrv.addr)
    create_topic(namesrv.addr, "ExampleConf3n", queues=4)
    produce_and_consume(namesrv.addr, "ExampleConf3n", group="example-conf-3n")

    old_master = master_of(namesrv.addr, "broker-a")
    assert old_master in brokers, f"the master {old_master} is none of the started brokers {sorted(brokers)}"
    brokers.pop(old_master).kill9()
    (survivor,) = brokers
    wait_for(
        lambda: (
            master_of(namesrv.addr, "broker-a") == survivor
            and ("broker-a", 0, "SYNC_MASTER") in cluster_list(namesrv.addr)
        ),
        f"the controllers to elect the other replica {survivor} after the master {old_master} died",
        timeout_s=90,
        interval_s=0.5,
    )
    create_topic(namesrv.addr, "ExampleConf3nFailover", queues=4)
    produce_and_consume(namesrv.addr, "ExampleConf3nFailover", group="example-conf-3n-failover")
