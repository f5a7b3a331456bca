"""``rocketq dev`` for real: it prints both addresses (also as ``KEY=value`` lines), both servers
answer, and SIGTERM stops them and removes the temporary store."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

import pytest

from rocketq.client.admin import Admin
from rocketq.client.errors import RemotingConnectError
from rocketq.client.launcher import wait_until_answers

START_TIMEOUT_S = 60


def _read_lines(stream: IO[str], out: queue.Queue[str]) -> None:
    for line in stream:
        out.put(line.rstrip("\n"))


def _wait_for_values(lines: queue.Queue[str], keys: set[str], seen: list[str]) -> dict[str, str]:
    values: dict[str, str] = {}
    deadline = time.monotonic() + START_TIMEOUT_S
    while not keys <= values.keys():
        line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
        seen.append(line)
        key, sep, value = line.partition("=")
        if sep and key in keys:
            values[key] = value
    return values


def test_rocketq_dev_prints_addresses_and_stops_on_sigterm(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "rocketq.tools.dev", "dev"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=str(tmp_path),
        env={**os.environ, "PYTHONUNBUFFERED": "1"}, start_new_session=True,
    )  # fmt: skip
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=_read_lines, args=(proc.stdout, lines), daemon=True)
    reader.start()
    seen: list[str] = []
    try:
        values = _wait_for_values(lines, {"NAMESRV_ADDR", "BROKER_ADDR"}, seen)
        namesrv, broker = values["NAMESRV_ADDR"], values["BROKER_ADDR"]
        assert any(line.startswith("NameServer: ") and namesrv in line for line in seen)
        wait_until_answers(namesrv, 10)
        wait_until_answers(broker, 10)
        with Admin(namesrv) as admin:
            deadline = time.monotonic() + 20
            while "broker-a" not in admin.cluster_list().broker_addr_table:
                assert time.monotonic() < deadline, "the broker never registered with the NameServer"
                time.sleep(0.1)
        store = next(line.split()[1] for line in seen if line.startswith("Store: "))
        assert Path(store).is_dir()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
        reader.join(10)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    while not lines.empty():
        seen.append(lines.get())
    assert seen[-1] == "stopped", seen
    assert not Path(store).exists(), "the temporary store was not removed"
    for addr in (namesrv, broker):  # both servers are gone, not orphaned
        with pytest.raises(RemotingConnectError):
            wait_until_answers(addr, 0.2)
