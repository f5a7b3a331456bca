"""Run rocketq's command-line tools from tests, bounded in time, output captured.

Tests check ``mqadmin`` as a user runs it: a separate process, its exit status, its stdout and
stderr.  :func:`run_mqadmin` runs it with the current interpreter (``python -m
rocketq.client.cli``, what the ``mqadmin`` script runs), so a test sees the checkout's code.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping

__all__ = ["run_mqadmin"]

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
