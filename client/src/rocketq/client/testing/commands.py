"""Run rocketq's command-line tools from tests, bounded in time, output captured.

Tests check ``mqadmin`` and ``rocketq dev`` as a user runs them: a separate process, its exit
status and output.  Both run with the current interpreter (``python -m rocketq.client.cli``,
``python -m rocketq.tools.dev``: what the scripts run), so a test sees the checkout's code.
:func:`run_mqadmin` waits for the command; :func:`start_rocketq_dev` returns the running
process and its :class:`~rocketq.client.testing.output.ProcessOutput`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from rocketq.client.testing.output import ProcessOutput

__all__ = ["run_mqadmin", "start_rocketq_dev"]

#: how long one mqadmin command may take: every command is one or a few requests
MQADMIN_TIMEOUT_S = 60.0


def run_mqadmin(
    *args: str,
    env: Mapping[str, str] | None = None,
    timeout_s: float = MQADMIN_TIMEOUT_S,
) -> subprocess.CompletedProcess[str]:
    """``mqadmin args`` as a finished process (the caller checks ``returncode``); ``env`` adds to
    this process's environment."""
    return subprocess.run(
        [sys.executable, "-m", "rocketq.client.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env={**os.environ, **(env or {})},
    )


def start_rocketq_dev(
    *args: str, cwd: Path | str | None = None
) -> tuple[subprocess.Popen[str], ProcessOutput]:
    """Start ``rocketq dev args`` in a process group of its own (unbuffered output, stdout and
    stderr together, read line by line); the caller stops it with a signal to the group."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "rocketq.tools.dev", "dev", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=cwd,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        start_new_session=True,
    )
    assert proc.stdout is not None  # stdout=PIPE
    return proc, ProcessOutput(proc.stdout)
