"""Start one ``mqcontroller`` from a given ``controller.conf``, as a user starts a shipped file.

:func:`rocketq.client.launcher.spawn_controllers` writes the configuration of a whole controller
group itself; tests of deployment files (``examples/conf/controller/``) need the opposite: start
the controller a file describes, on the ports the file names.  :func:`spawn_controller` runs
``python -m rocketq.controller -c FILE`` (what ``mqcontroller -c FILE`` runs) in its own process
group, its output in a log file of the working directory, and returns the
:class:`~rocketq.client.launcher.ServerProcess` once the controller printed its boot line and
answers a request; a controller that exits or stays silent fails the start with its log tail.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from rocketq.client.errors import RocketQError
from rocketq.client.launcher import (
    CONTROLLER_BOOT_RE,
    DEFAULT_START_TIMEOUT_S,
    ServerProcess,
    ServerStartError,
    wait_until_answers,
)
from rocketq.client.testing.wait import WaitTimeout, wait_value

__all__ = ["spawn_controller"]


def spawn_controller(
    tmp_path: Path | str, conf_path: Path | str, *, timeout_s: float = DEFAULT_START_TIMEOUT_S
) -> ServerProcess:
    """Start ``mqcontroller -c conf_path`` in ``tmp_path`` (log: ``<conf name>.log``); once it
    printed its boot line and answers on the address it printed."""
    work, conf = Path(tmp_path), Path(conf_path)
    work.mkdir(parents=True, exist_ok=True)
    log_path = work / f"{conf.stem}.log"
    log_file = open(log_path, "wb")  # closed by ServerProcess
    popen = subprocess.Popen(
        [sys.executable, "-m", "rocketq.controller", "-c", str(conf)],
        stdin=subprocess.DEVNULL,
        stdout=log_file,
        stderr=subprocess.STDOUT,
        cwd=work,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        start_new_session=True,
    )
    proc = ServerProcess(conf.stem, popen, log_path, log_file)
    try:
        match = wait_value(lambda: _boot_line(proc), f"the boot line of {conf.stem}", timeout_s)
        host, _, port = match.group(1).rpartition(":")
        proc.host, proc.port = host, int(port)
        wait_until_answers(proc.addr, timeout_s)
    except BaseException as exc:
        proc.kill9()
        if isinstance(exc, ServerStartError) or not isinstance(exc, (WaitTimeout, RocketQError)):
            raise
        raise ServerStartError(f"{conf.stem} did not start ({exc}); its log:\n{proc.log_tail()}") from exc
    return proc


def _boot_line(proc: ServerProcess) -> re.Match[str] | None:
    match = CONTROLLER_BOOT_RE.search(proc.log_text())
    if match is None and proc.returncode is not None:
        raise ServerStartError(f"{proc.name} exited with status {proc.returncode}:\n{proc.log_tail()}")
    return match
