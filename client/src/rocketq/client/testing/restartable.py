"""A NameServer and one broker on fixed ports, each of which can be SIGKILLed and restarted in place.

:class:`RestartableCluster` is for tests and benchmarks of clients riding through a broker restart
or a NameServer restart: both processes keep their address (ports chosen once with
:func:`~rocketq.client.launcher.free_port`, outside the ephemeral range, so no outgoing connection
takes one while its server is down) and the broker keeps its store.  The broker registers with the
NameServer every ``registerNameServerPeriod`` (10 s here, RocketMQ's lowest), so a restarted
NameServer knows it again within that time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from pathlib import Path

from rocketq.client.launcher import ServerProcess, free_port, spawn_broker, spawn_namesrv

__all__ = ["RestartableCluster"]

#: the broker registers this often (ms): a restarted NameServer learns of it within that time
REGISTER_PERIOD_MS = 10_000
BOOT_TIMEOUT_S = 120.0  # a restarted broker recovers its store; other tests may share the cores


class RestartableCluster:
    """A NameServer and a broker on fixed ports; :meth:`close` kills both."""

    def __init__(self, tmp: Path, broker_conf: Mapping[str, object] | None = None) -> None:
        self.tmp = tmp
        self.namesrv_port = free_port()
        self.broker_conf: dict[str, object] = {
            "registerNameServerPeriod": REGISTER_PERIOD_MS,
            **(broker_conf or {}),
            "listenPort": free_port(),
        }
        self.namesrv: ServerProcess = self.start_namesrv()
        try:
            self.broker: ServerProcess = self.start_broker()
        except BaseException:
            self.namesrv.kill9()
            raise

    @property
    def namesrv_addr(self) -> str:
        return f"127.0.0.1:{self.namesrv_port}"

    @property
    def broker_addr(self) -> str:
        return f"127.0.0.1:{self.broker_conf['listenPort']}"

    @property
    def broker_name(self) -> str:
        return str(self.broker_conf.get("brokerName", "broker-a"))

    def start_namesrv(self) -> ServerProcess:
        self.namesrv = spawn_namesrv(self.tmp / "namesrv", "--listen-port", str(self.namesrv_port))
        return self.namesrv

    def start_broker(self) -> ServerProcess:
        conf = self.broker_conf
        self.broker = spawn_broker(self.tmp / "broker", self.namesrv_addr, timeout_s=BOOT_TIMEOUT_S, **conf)  # type: ignore[arg-type]
        return self.broker

    def restart_later(self, which: str, delay_s: float) -> threading.Thread:
        """Start ``"broker"`` or ``"namesrv"`` again after ``delay_s`` in a thread (join it)."""
        start = {"broker": self.start_broker, "namesrv": self.start_namesrv}[which]

        def run() -> None:
            time.sleep(delay_s)
            start()

        thread = threading.Thread(target=run, name=f"restart-{which}", daemon=True)
        thread.start()
        return thread

    def close(self) -> str:
        """Kill both processes; returns the tails of their logs for the test output."""
        tails = []
        for proc in (self.broker, self.namesrv):
            proc.kill9()
            tails.append(f"--- {proc.name} ({proc.log_path}) ---\n{proc.log_tail()}")
        return "\n".join(tails)
