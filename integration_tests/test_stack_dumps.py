"""``kill -USR1`` makes a running mqnamesrv and mqbroker write every thread's stack into their log
and carry on (rocketq.server.diagnostics; docs/observability.md, "Stack dumps")."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from rocketq.client.admin import Admin
from rocketq.client.testing import ServerProcess, spawn_broker, spawn_namesrv


def _dumped(proc: ServerProcess, timeout_s: float = 20.0) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = proc.log_text()
        if "most recent call first" in text:
            return text
        time.sleep(0.1)
    raise AssertionError(f"no stack dump in {proc.log_path}:\n{proc.log_tail(20)}")


def test_sigusr1_dumps_every_thread_and_the_server_carries_on(tmp_path: Path) -> None:
    ns = spawn_namesrv(tmp_path / "ns")
    broker = spawn_broker(tmp_path, ns.addr)
    try:
        for proc in (ns, broker):
            os.kill(proc.pid, signal.SIGUSR1)
        assert "asyncio" in _dumped(ns)
        text = _dumped(broker)
        assert "ReputMessageService" in text or "dispatch.py" in text, text[-3000:]  # the reput thread too
        assert ns.is_alive() and broker.is_alive()
        with Admin(ns.addr) as admin:  # both still answer
            listed = admin.cluster_list().broker_addr_table.values()
            assert broker.addr in {a for bd in listed for a in bd.broker_addrs.values()}
    finally:
        broker.terminate()
        ns.terminate()
