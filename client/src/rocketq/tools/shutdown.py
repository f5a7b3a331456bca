"""``mqshutdown broker|namesrv|controller|proxy``: ask the local rocketq servers of a kind to stop.

RocketMQ's ``bin/mqshutdown`` finds the Java processes by their main class (``ps ax``) and sends
them SIGTERM; this tool finds rocketq's processes by their command line (the ``mqbroker`` console
script or ``python -m rocketq.broker``, and so on for each kind) and does the same, printing the
script's lines.  SIGTERM is each server's clean shutdown (a broker stops taking sends, finishes
running requests, unregisters from the NameServers, flushes and exits 0); the tool does not wait
for it.  rocketq's addition: an optional ``MATCH`` narrows the signalled processes to those whose
command line contains it (a config file path, say), for hosts that run several brokers.
Exit status 1 when no such process runs, 2 for a bad command line.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
from collections.abc import Sequence

__all__ = ["KINDS", "find_processes", "main"]

#: kind -> (the name the script prints, the command-line pattern of that server)
KINDS: dict[str, tuple[str, re.Pattern[str]]] = {
    kind: (
        f"mq{kind}",
        re.compile(rf"(?:^|[\s/])mq{kind}(?:\s|$)|\s-m\s+rocketq\.{kind}(?:\.__main__)?(?:\s|$)"),
    )
    for kind in ("broker", "namesrv", "controller", "proxy")
}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="mqshutdown",
        description="Send SIGTERM (a clean shutdown) to the local rocketq servers of one kind.",
    )
    p.add_argument("kind", choices=sorted(KINDS), help="which servers to stop")
    p.add_argument(
        "match", nargs="?", default=None, help="only processes whose command line contains this text"
    )
    return p


def _process_table() -> list[tuple[int, str]]:
    """``(pid, command line)`` of every process (``ps ax``, as RocketMQ's script)."""
    out = subprocess.run(
        ["ps", "axww", "-o", "pid=,args="], capture_output=True, text=True, check=True
    ).stdout
    table = []
    for line in out.splitlines():
        pid, _, args = line.strip().partition(" ")
        if pid.isdigit():
            table.append((int(pid), args.strip()))
    return table


def find_processes(
    kind: str, match: str | None = None, table: Sequence[tuple[int, str]] | None = None
) -> list[int]:
    """Pids of the rocketq servers of ``kind`` (in ``table``, default: the running processes)."""
    _, pattern = KINDS[kind]
    me = os.getpid()
    return [
        pid
        for pid, args in (_process_table() if table is None else table)
        if pid != me and pattern.search(args) and (match is None or match in args)
    ]


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # argparse printed the usage
        return 2 if exc.code else 0
    name, _ = KINDS[args.kind]
    pids = find_processes(args.kind, args.match)
    if not pids:
        print(f"No {name} running.")
        return 1
    listed = " ".join(str(pid) for pid in pids)
    print(f"The {name}({listed}) is running...")
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:  # ended meanwhile
            pass
        except PermissionError as exc:
            print(f"mqshutdown: cannot signal {name}({pid}): {exc}", file=sys.stderr)
            return 1
    print(f"Send shutdown request to {name}({listed}) OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
