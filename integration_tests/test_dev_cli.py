"""``rocketq dev`` for real: it prints both addresses (also as ``KEY=value`` lines), both servers
answer, and SIGTERM stops them and removes the temporary store."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from rocketq.client.admin import Admin
from rocketq.client.errors import RemotingConnectError
from rocketq.client.launcher import wait_until_answers
from rocketq.client.testing import start_rocketq_dev, wait_for

START_TIMEOUT_S = 60


def test_rocketq_dev_prints_addresses_and_stops_on_sigterm(tmp_path: Path) -> None:
    proc, out = start_rocketq_dev(cwd=tmp_path)
    try:
        values = out.values({"NAMESRV_ADDR", "BROKER_ADDR"}, START_TIMEOUT_S)
        seen = out.lines()
        namesrv, broker = values["NAMESRV_ADDR"], values["BROKER_ADDR"]
        assert any(line.startswith("NameServer: ") and namesrv in line for line in seen)
        wait_until_answers(namesrv, 10)
        wait_until_answers(broker, 10)
        with Admin(namesrv) as admin:
            wait_for(
                lambda: "broker-a" in admin.cluster_list().broker_addr_table,
                "the broker to register with the NameServer",
                20,
            )
        store = next(line.split()[1] for line in seen if line.startswith("Store: "))
        assert Path(store).is_dir()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
        out.wait_ended(10)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    seen = out.lines()
    assert seen[-1] == "stopped", seen
    assert not Path(store).exists(), "the temporary store was not removed"
    for addr in (namesrv, broker):  # both servers are gone, not orphaned
        with pytest.raises(RemotingConnectError):
            wait_until_answers(addr, 0.2)
