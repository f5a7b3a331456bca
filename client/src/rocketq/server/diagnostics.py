"""Stack dumps on demand for the server processes (``mqbroker``, ``mqnamesrv``, ``mqcontroller``).

``kill -USR1 <pid>`` writes the Python stack of every thread of the process to its stderr (the
log file when started by ``rocketq.client.launcher`` or ``rocketq dev``) and the process carries
on: the first look at a server that stopped answering, as ``jstack`` is for a Java broker.
"""

from __future__ import annotations

import faulthandler
import signal
import sys

__all__ = ["enable_stack_dumps"]


def enable_stack_dumps() -> None:
    """Dump every thread's stack to stderr on SIGUSR1 (no-op where there is no SIGUSR1)."""
    usr1 = getattr(signal, "SIGUSR1", None)
    if usr1 is None:
        return
    try:
        faulthandler.register(usr1, file=sys.stderr, all_threads=True)
    except (AttributeError, OSError, ValueError):  # stderr without a file descriptor (in-process tests)
        return
