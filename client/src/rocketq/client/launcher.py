"""Start a local NameServer and broker as child processes — for development, examples and tests.

The launcher runs ``python -m rocketq.namesrv`` and ``python -m rocketq.broker`` with the current
interpreter, each in its own process group and a working directory of its own, listening on
port 0 unless told otherwise; it never imports the server packages, so it lives in the client.
A server prints its boot line on stdout; stdout and stderr go to a log file in the working
directory, and the launcher polls that file for the boot line to learn the address, then checks
that the server answers a request.  Failures raise :class:`ServerStartError` with the tail of the
log, so a broken server explains itself.  :func:`spawn_namesrv` and :func:`spawn_broker` start one
process each (:class:`ServerProcess`: ``terminate`` for a clean stop, ``kill9`` for a crash);
:func:`spawn_controllers` starts a controller group (``python -m rocketq.controller``, RocketMQ 5
controller mode) on free ports, each peer knowing the others' Raft ports from its controller.conf;
:func:`local_cluster` starts a NameServer and a broker together and stops both on exit.  ``rocketq
dev``, the examples and the integration tests are built on this module.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO

from rocketq.client.errors import RocketQError
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.transport.blocking import BlockingRemotingClient

__all__ = [
    "BROKER_BOOT_RE",
    "CONTROLLER_BOOT_RE",
    "DEFAULT_START_TIMEOUT_S",
    "METRICS_RE",
    "NAMESRV_BOOT_RE",
    "LocalCluster",
    "ServerProcess",
    "ServerStartError",
    "broker_conf_text",
    "broker_store_dir",
    "controller_conf_text",
    "free_port",
    "local_cluster",
    "restart_controller",
    "spawn_broker",
    "spawn_controllers",
    "spawn_namesrv",
    "spawn_proxy",
    "wait_until_answers",
]

#: the NameServer's boot line; group 1 is the address it listens on
NAMESRV_BOOT_RE = re.compile(r"The Name Server boot success\. serializeType=\w+, listening on (\S+:\d+)")
#: the broker's boot line; group 1 is the broker name, group 2 the address it listens on
BROKER_BOOT_RE = re.compile(r"The broker\[([^,\]]+), (\S+:\d+)\] boot success\.")
#: a controller's boot line; group 1 is the remoting address, group 2 its Raft address
CONTROLLER_BOOT_RE = re.compile(r"The Controller boot success\. listening on (\S+:\d+) raft=(\S+:\d+)")
#: the gRPC proxy's boot line (mqproxy); group 1 is the address its gRPC server listens on
PROXY_BOOT_RE = re.compile(r"The proxy boot success\. mode=\w+, grpc listening on (\S+:\d+)")
#: the line a server logs when its Prometheus exporter listens (metricsExporterType=PROM); group 1 is
#: the exporter's host:port
METRICS_RE = re.compile(r"Prometheus metrics exporter listening on http://(\S+:\d+)/metrics")
DEFAULT_START_TIMEOUT_S = 30.0
_LOG_TAIL_LINES = 40
# A request code no server implements: any answer (REQUEST_CODE_NOT_SUPPORTED) proves liveness.
_PROBE_CODE = 32000


class ServerStartError(RocketQError):
    """A server process did not boot (exited, or printed no boot line in time)."""


#: lowest port :func:`free_port` hands out
_FIXED_PORT_LOW = 15000
_handed_out: set[int] = set()


def _ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (outgoing connections' local ports)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago (for configs that cannot say port 0).

    The port lies below the kernel's ephemeral range: a server restarted on it (a broker killed
    and started again on its old address) would otherwise find it taken by the local end of some
    unrelated outgoing connection.  Ports are not handed out twice by one process.
    """
    high = _ephemeral_low() - 1
    rng = random.Random()
    for _ in range(200) if high > _FIXED_PORT_LOW else ():
        port = rng.randint(_FIXED_PORT_LOW, high)
        if port in _handed_out:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _child_env(extra: Mapping[str, str] | None) -> dict[str, str]:
    """The environment for a server child: ours, plus the source folders when run from a checkout."""
    env = dict(os.environ)
    root = Path(__file__).resolve().parents[4]
    src_dirs = [str(root / c / "src") for c in ("client", "namesrv", "broker", "connector")]
    src_dirs = [d for d in src_dirs if Path(d).is_dir()]
    if src_dirs:
        old = env.get("PYTHONPATH")
        env["PYTHONPATH"] = os.pathsep.join([*src_dirs, *([old] if old else [])])
    env.setdefault("PYTHONUNBUFFERED", "1")
    if extra:
        env.update(extra)
    return env


class ServerProcess:
    """A running server subprocess with its address and log file.

    Use as a context manager (``with spawn_namesrv(tmp) as ns: ...``) or call :meth:`terminate`
    / :meth:`kill9` yourself; both are idempotent.
    """

    def __init__(
        self, name: str, popen: subprocess.Popen[bytes], log_path: Path, log_file: IO[bytes]
    ) -> None:
        self.name = name
        self.popen = popen
        self.log_path = log_path
        self._log_file = log_file
        self.host = ""
        self.port = 0
        self.broker_name: str | None = None

    @property
    def addr(self) -> str:
        """``"host:port"`` the server listens on (known once booted)."""
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def returncode(self) -> int | None:
        return self.popen.poll()

    def is_alive(self) -> bool:
        return self.popen.poll() is None

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def log_tail(self, lines: int = _LOG_TAIL_LINES) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    @property
    def metrics_addr(self) -> str | None:
        """``"host:port"`` of the server's Prometheus exporter, None when metrics are off."""
        match = METRICS_RE.search(self.log_text())
        return match.group(1) if match else None

    def _signal_group(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.popen.pid, sig)

    def kill9(self) -> int:
        """SIGKILL the whole process group and reap it; returns the exit status."""
        if self.popen.poll() is None:
            self._signal_group(signal.SIGKILL)
        rc = self.popen.wait()
        self._close_log()
        return rc

    def terminate(self, timeout_s: float = 15.0) -> int:
        """SIGTERM and wait up to ``timeout_s`` for a clean exit (then SIGKILL); returns the status."""
        if self.popen.poll() is None:
            self._signal_group(signal.SIGTERM)
            try:
                self.popen.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self._signal_group(signal.SIGKILL)
        rc = self.popen.wait()
        self._close_log()
        return rc

    def _close_log(self) -> None:
        with contextlib.suppress(OSError):
            self._log_file.close()

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.terminate()

    def __repr__(self) -> str:
        return f"ServerProcess({self.name!r}, pid={self.pid}, addr={self.addr!r}, rc={self.returncode})"


def _start(name: str, args: list[str], tmp_path: Path, env: Mapping[str, str] | None) -> ServerProcess:
    """Run ``python *args`` in ``tmp_path`` (its own process group), output to ``<name>.log``."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    log_path = tmp_path / f"{name}.log"
    n = 1
    while log_path.exists():
        n += 1
        log_path = tmp_path / f"{name}-{n}.log"
    log_file = open(log_path, "wb")  # closed by ServerProcess
    popen = subprocess.Popen(
        [sys.executable, *args],
        stdin=subprocess.DEVNULL,
        stdout=log_file,
        stderr=subprocess.STDOUT,
        cwd=str(tmp_path),
        env=_child_env(env),
        start_new_session=True,
    )
    return ServerProcess(name, popen, log_path, log_file)


def _fail(proc: ServerProcess, why: str) -> ServerStartError:
    proc.kill9()
    return ServerStartError(f"{proc.name} {why}; last log lines of {proc.log_path}:\n{proc.log_tail()}")


def _wait_boot_line(proc: ServerProcess, pattern: re.Pattern[str], timeout_s: float) -> re.Match[str]:
    deadline = time.monotonic() + timeout_s
    while True:
        match = pattern.search(proc.log_text())
        if match:
            return match
        if proc.returncode is not None:
            raise _fail(proc, f"exited with status {proc.returncode} before booting")
        if time.monotonic() > deadline:
            raise _fail(proc, f"printed no boot line within {timeout_s:.0f} s")
        time.sleep(0.05)


def wait_until_answers(addr: str, timeout_s: float = 10.0) -> None:
    """Block until the remoting server at ``addr`` answers a request (any response code)."""
    deadline = time.monotonic() + timeout_s
    client = BlockingRemotingClient()
    try:
        while True:
            try:
                client.invoke(addr, RemotingCommand.request(_PROBE_CODE), 1000)
                return
            except RocketQError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
    finally:
        client.close()


def _finish_boot(proc: ServerProcess, addr: str, timeout_s: float) -> ServerProcess:
    host, _, port = addr.rpartition(":")
    proc.host, proc.port = host, int(port)
    try:
        wait_until_answers(proc.addr, timeout_s)
    except RocketQError as exc:
        raise _fail(proc, f"printed its boot line but does not answer on {proc.addr} ({exc})") from exc
    return proc


def spawn_namesrv(
    tmp_path: Path | str,
    *extra_args: str,
    env: Mapping[str, str] | None = None,
    timeout_s: float = DEFAULT_START_TIMEOUT_S,
    python_args: Sequence[str] = (),
) -> ServerProcess:
    """Start ``python -m rocketq.namesrv`` on 127.0.0.1 port 0 in ``tmp_path``; wait until it answers.

    ``extra_args`` are appended to the command line (e.g. ``"-c", "namesrv.properties"``), so
    they override the defaults given here; ``python_args`` go to the interpreter before ``-m``
    (e.g. ``"-X", "importtime"``).
    """
    args = [*python_args, "-m", "rocketq.namesrv", "--bind", "127.0.0.1", "--listen-port", "0", *extra_args]
    proc = _start("namesrv", args, Path(tmp_path), env)
    match = _wait_boot_line(proc, NAMESRV_BOOT_RE, timeout_s)
    return _finish_boot(proc, match.group(1), timeout_s)


def _conf_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def broker_conf_text(namesrv_addr: str, store_dir: Path, **broker_conf: object) -> str:
    """A RocketMQ ``broker.conf`` (camelCase keys) for a local broker on port 0; ``broker_conf`` overrides.

    The disk-space thresholds are raised to 95/97/98 % (RocketMQ: 75/85/90 %), because a local
    cluster's disk is shared with the rest of the machine.
    """
    conf: dict[str, object] = {
        "brokerClusterName": "DefaultCluster",
        "brokerName": "broker-a",
        "brokerId": 0,
        "brokerIP1": "127.0.0.1",
        "listenPort": 0,
        "namesrvAddr": namesrv_addr,
        "storePathRootDir": str(store_dir),
        "flushDiskType": "ASYNC_FLUSH",
        "brokerRole": "ASYNC_MASTER",
        # A local cluster shares its disk with everything else on the machine: RocketMQ's 75/85/90 %
        # thresholds would make it delete or refuse data because of other programs' files.
        "diskMaxUsedSpaceRatio": 95,
        "diskSpaceCleanForciblyRatio": 97,
        "diskSpaceWarningLevelRatio": 98,
    }
    conf.update(broker_conf)
    return "".join(f"{key}={_conf_value(value)}\n" for key, value in conf.items())


def spawn_broker(
    tmp_path: Path | str,
    namesrv_addr: str,
    *,
    env: Mapping[str, str] | None = None,
    timeout_s: float = DEFAULT_START_TIMEOUT_S,
    extra_args: tuple[str, ...] = (),
    python_args: Sequence[str] = (),
    **broker_conf: object,
) -> ServerProcess:
    """Write ``broker.conf`` in ``tmp_path`` and start ``python -m rocketq.broker -c broker.conf``.

    ``broker_conf`` keys are RocketMQ camelCase names and override the defaults (cluster
    ``DefaultCluster``, ``broker-a``, id 0, port 0, store under ``tmp_path/store-<name>-<id>``).
    ``extra_args`` are appended to the broker's command line; ``python_args`` go to the
    interpreter before ``-m`` (e.g. ``"-m", "cProfile", "-o", "broker.prof"``).
    """
    return _spawn_broker(tmp_path, namesrv_addr, broker_conf, env, timeout_s, extra_args, python_args)


def spawn_proxy(
    tmp_path: Path | str,
    namesrv_addr: str,
    *,
    env: Mapping[str, str] | None = None,
    timeout_s: float = DEFAULT_START_TIMEOUT_S,
    **proxy_conf: object,
) -> ServerProcess:
    """Write ``rmq-proxy.json`` in ``tmp_path`` and start ``python -m rocketq.proxy -pc rmq-proxy.json``.

    ``proxy_conf`` keys are RocketMQ's camelCase ``rmq-proxy.json`` keys (``grpcServerPort`` is 0, a
    free port, unless given).  The proxy speaks gRPC, not remoting: it counts as up once it printed
    its boot line and accepts a TCP connection on that address.
    """
    tmp = Path(tmp_path)
    tmp.mkdir(parents=True, exist_ok=True)
    conf = {"grpcServerBindAddress": "127.0.0.1", "grpcServerPort": 0, **proxy_conf}
    conf_path = tmp / "rmq-proxy.json"
    conf_path.write_text(json.dumps(conf, indent=2), encoding="utf-8")
    args = ["-m", "rocketq.proxy", "-n", namesrv_addr, "-pc", str(conf_path)]
    proc = _start("proxy", args, tmp, env)
    addr = _wait_boot_line(proc, PROXY_BOOT_RE, timeout_s).group(1)
    host, _, port = addr.rpartition(":")
    proc.host, proc.port = host, int(port)
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise _fail(proc, f"printed its boot line but accepts no connection on {addr} ({exc})") from exc
    return proc


def broker_store_dir(tmp_path: Path | str, broker_name: str = "broker-a", broker_id: int | str = 0) -> Path:
    """The store directory :func:`spawn_broker` gives a broker in ``tmp_path``."""
    return Path(tmp_path) / f"store-{broker_name}-{broker_id}"


def _spawn_broker(
    tmp_path: Path | str,
    namesrv_addr: str,
    broker_conf: Mapping[str, object],
    env: Mapping[str, str] | None,
    timeout_s: float,
    extra_args: Sequence[str] = (),
    python_args: Sequence[str] = (),
) -> ServerProcess:
    tmp = Path(tmp_path)
    tmp.mkdir(parents=True, exist_ok=True)
    name = str(broker_conf.get("brokerName", "broker-a"))
    broker_id = str(broker_conf.get("brokerId", 0))
    store_dir = broker_store_dir(tmp, name, broker_id)
    conf_path = tmp / f"broker-{name}-{broker_id}.conf"
    conf_path.write_text(broker_conf_text(namesrv_addr, store_dir, **broker_conf), encoding="utf-8")
    args = [*python_args, "-m", "rocketq.broker", "-c", str(conf_path), *extra_args]
    proc = _start(f"broker-{name}-{broker_id}", args, tmp, env)
    match = _wait_boot_line(proc, BROKER_BOOT_RE, timeout_s)
    proc.broker_name = match.group(1)
    return _finish_boot(proc, match.group(2), timeout_s)


def controller_conf_text(peers: str, self_id: str, store_dir: Path, **controller_conf: object) -> str:
    """A RocketMQ 5 ``controller.conf`` for peer ``self_id`` of ``peers``
    (``n0-host:port:raftPort;n1-...``); ``controller_conf`` (camelCase keys) overrides."""
    conf: dict[str, object] = {
        "controllerDLegerGroup": "DefaultControllerGroup",
        "controllerDLegerPeers": peers,
        "controllerDLegerSelfId": self_id,
        "controllerStorePath": str(store_dir),
    }
    conf.update(controller_conf)
    return "".join(f"{key}={_conf_value(value)}\n" for key, value in conf.items())


def spawn_controllers(
    tmp_path: Path | str,
    count: int = 3,
    *,
    env: Mapping[str, str] | None = None,
    timeout_s: float = DEFAULT_START_TIMEOUT_S,
    controller_conf: Mapping[str, object] | None = None,
) -> list[ServerProcess]:
    """Start ``count`` controllers (``n0``, ``n1``...) of one group on free 127.0.0.1 ports.

    Each gets ``controller-n<i>.conf`` (``controller_conf``: more camelCase keys) and a store
    under ``tmp_path``; the processes are returned
    once each printed its boot line and answers (the Raft leader may not be elected yet).  On a
    failure the ones already started are killed.
    """
    tmp = Path(tmp_path)
    tmp.mkdir(parents=True, exist_ok=True)
    ids = [f"n{i}" for i in range(count)]
    peers = ";".join(f"{i}-127.0.0.1:{free_port()}:{free_port()}" for i in ids)
    started: list[ServerProcess] = []
    try:
        for node_id in ids:
            conf_path = tmp / f"controller-{node_id}.conf"
            store = tmp / f"controller-store-{node_id}"
            conf_path.write_text(
                controller_conf_text(peers, node_id, store, **(controller_conf or {})), encoding="utf-8"
            )
            args = ["-m", "rocketq.controller", "-c", str(conf_path)]
            started.append(_start(f"controller-{node_id}", args, tmp, env))
        for proc in started:
            match = _wait_boot_line(proc, CONTROLLER_BOOT_RE, timeout_s)
            _finish_boot(proc, match.group(1), timeout_s)
    except BaseException:
        for proc in started:
            proc.kill9()
        raise
    return started


def restart_controller(
    proc: ServerProcess,
    *,
    env: Mapping[str, str] | None = None,
    timeout_s: float = DEFAULT_START_TIMEOUT_S,
) -> ServerProcess:
    """Start a controller of :func:`spawn_controllers` again after it stopped (a new process with
    the same ``controller.conf``: the same ports and Raft store), once it answers."""
    work = proc.log_path.parent
    conf = work / f"{proc.name}.conf"
    new = _start(proc.name, ["-m", "rocketq.controller", "-c", str(conf)], work, env)
    match = _wait_boot_line(new, CONTROLLER_BOOT_RE, timeout_s)
    return _finish_boot(new, match.group(1), timeout_s)


@dataclass(frozen=True)
class LocalCluster:
    """A NameServer and one broker started by :func:`local_cluster`."""

    namesrv: ServerProcess
    broker: ServerProcess
    work_dir: Path

    @property
    def namesrv_addr(self) -> str:
        return self.namesrv.addr

    @property
    def broker_addr(self) -> str:
        return self.broker.addr

    @property
    def broker_name(self) -> str:
        return self.broker.broker_name or "broker-a"


@contextlib.contextmanager
def local_cluster(
    work_dir: Path | str | None = None,
    *,
    broker_conf: Mapping[str, object] | None = None,
    env: Mapping[str, str] | None = None,
    timeout_s: float = DEFAULT_START_TIMEOUT_S,
    namesrv_args: Sequence[str] = (),
) -> Iterator[LocalCluster]:
    """Start a NameServer and a broker registered with it; stop both (broker first) on exit.

    Logs and the store go to ``work_dir``, or to a temporary directory removed on exit when it is
    None.  ``broker_conf`` holds RocketMQ ``broker.conf`` keys, as for :func:`spawn_broker`;
    ``namesrv_args`` are extra ``mqnamesrv`` arguments (e.g. ``"-o", "metricsExporterType=PROM"``).
    """
    with contextlib.ExitStack() as stack:
        if work_dir is None:
            work_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="rocketq-local-"))
        path = Path(work_dir)
        namesrv = stack.enter_context(spawn_namesrv(path, *namesrv_args, env=env, timeout_s=timeout_s))
        broker = stack.enter_context(_spawn_broker(path, namesrv.addr, broker_conf or {}, env, timeout_s))
        yield LocalCluster(namesrv, broker, path)
