"""``kill -USR1`` makes a running mqnamesrv and mqbroker write every thread's stack into their log
and carry on (rocketq.server.diagnostics; docs/observability.md, "Stack dumps")."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from rocketq.client.admin import Admin
from rocketq.client.testing import ServerProcess, WaitTimeout, spawn_broker, spawn_namesrv, wait_for


def _dumped(proc: ServerProcess, *frames: str, timeout_s: float = 20.0) -> None:
    """Wait until ``proc``'s log holds a stack dump naming each of ``frames`` (it is written while
    we look: wait for all of it)."""

    def dumped() -> bool:
        text = proc.log_text()
        return "most recent call first" in text and all(f in text for f in frames)

    try:
        wait_for(dumped, f"a stack dump naming {frames} in {proc.log_path}", timeout_s)
    except WaitTimeout as exc:
        raise AssertionError(f"{exc}:\n{proc.log_tail(40)}") from None


def test_sigusr1_dumps_every_thread_and_the_server_carries_on(tmp_path: Path) -> None:
    ns = spawn_namesrv(tmp_path / "ns")
    broker = spawn_broker(tmp_path, ns.addr)
    try:
        for proc in (ns, broker):
            os.kill(proc.pid, signal.SIGUSR1)
        _dumped(ns, "asyncio")
        _dumped(broker, "asyncio", "dispatch.py")  # the event loop and the reput thread
        assert ns.is_alive() and broker.is_alive()
        with Admin(ns.addr) as admin:  # both still answer
            listed = admin.cluster_list().broker_addr_table.values()
            assert broker.addr in {a for bd in listed for a in bd.broker_addrs.values()}
    finally:
        broker.terminate()
        ns.terminate()
