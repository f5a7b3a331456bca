"""Start ``python -m rocketq.tools.dashboard`` as a child process (``rocketq dev``, tests, examples).

Like the launcher's servers (:mod:`rocketq.client.launcher`), the dashboard runs in its own
process group with its output in a log file of its working directory; :func:`spawn_dashboard`
waits for its boot line (``rocketq dashboard listening on http://host:port/``) and returns a
:class:`~rocketq.client.launcher.ServerProcess` whose ``addr`` is the HTTP address, or raises
:class:`~rocketq.client.launcher.ServerStartError` with the log's tail.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from rocketq.client.launcher import DEFAULT_START_TIMEOUT_S, ServerProcess, ServerStartError

__all__ = ["DASHBOARD_BOOT_RE", "dashboard_url", "spawn_dashboard"]

#: the boot line; group 1 is host:port
DASHBOARD_BOOT_RE = re.compile(r"rocketq dashboard listening on http://(\S+:\d+)/")


def dashboard_url(proc: ServerProcess) -> str:
    return f"http://{proc.addr}/"


def spawn_dashboard(
    work_dir: Path | str,
    namesrv_addr: str,
    *extra_args: str,
    port: int = 0,
    env: Mapping[str, str] | None = None,
    timeout_s: float = DEFAULT_START_TIMEOUT_S,
) -> ServerProcess:
    """``python -m rocketq.tools.dashboard -n namesrv_addr --port port *extra_args`` on 127.0.0.1."""
    work = Path(work_dir)
    work.mkdir(parents=True, exist_ok=True)
    log_path = work / "dashboard.log"
    n = 1
    while log_path.exists():
        n += 1
        log_path = work / f"dashboard-{n}.log"
    args = ["-m", "rocketq.tools.dashboard", "-n", namesrv_addr, "--host", "127.0.0.1", "--port", str(port)]
    log_file = open(log_path, "wb")  # closed by ServerProcess
    popen = subprocess.Popen(
        [sys.executable, *args, *extra_args],
        stdin=subprocess.DEVNULL,
        stdout=log_file,
        stderr=subprocess.STDOUT,
        cwd=str(work),
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        start_new_session=True,
    )
    proc = ServerProcess("dashboard", popen, log_path, log_file)
    deadline = time.monotonic() + timeout_s
    while (match := DASHBOARD_BOOT_RE.search(proc.log_text())) is None:
        if proc.returncode is not None or time.monotonic() > deadline:
            why = f"exited with status {proc.returncode}" if proc.returncode is not None else "did not boot"
            proc.kill9()
            raise ServerStartError(f"the dashboard {why}; last log lines of {log_path}:\n{proc.log_tail()}")
        time.sleep(0.05)
    host, _, port_text = match.group(1).rpartition(":")
    proc.host, proc.port = host, int(port_text)
    return proc
