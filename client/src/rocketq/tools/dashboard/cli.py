"""``rocketq dashboard``: serve the web console, or ``rocketq dashboard hash-password``.

``rocketq dashboard -n NAMESRV [--host 127.0.0.1] [--port 8080] [--read-only] [--users users.yml]``
runs the aiohttp application of :mod:`rocketq.tools.dashboard.app` until SIGINT/SIGTERM and prints
``rocketq dashboard listening on http://host:port/`` once it accepts connections (port 0 picks a
free port; the printed line has the real one, which is what ``rocketq dev`` and the tests read).
``rocketq dashboard hash-password`` asks for a password (or reads one line of stdin with
``--password-stdin``) and prints its salted scrypt hash for the users file.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import getpass
import signal
import sys
from collections.abc import Sequence

__all__ = ["BOOT_LINE", "add_arguments", "main", "run"]

BOOT_LINE = "rocketq dashboard listening on http://{host}:{port}/"
DEFAULT_PORT = 8080


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "action", nargs="?", default="serve", choices=("serve", "hash-password"),
        help="serve the dashboard (default) or print the hash of a password for the users file",
    )  # fmt: skip
    p.add_argument("-n", "--namesrv", help="NameServer address(es), host:port[;host:port]")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help="port (default 8080; 0 = a free port)")
    p.add_argument("--read-only", action="store_true", help="refuse every state change (HTTP 403)")
    p.add_argument("--users", help="YAML users file; its users may change state (HTTP basic auth)")
    p.add_argument(
        "--sample-interval", type=float, default=5.0, metavar="SECONDS",
        help="how often TPS and lag are sampled for the charts (default 5)",
    )  # fmt: skip
    p.add_argument(
        "--password-stdin", action="store_true", help="hash-password: read the password from stdin"
    )


def _hash_password(args: argparse.Namespace) -> int:
    from rocketq.tools.dashboard.auth import hash_password

    if args.password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        password = getpass.getpass("password: ")
        if getpass.getpass("again: ") != password:
            print("rocketq dashboard: the passwords differ", file=sys.stderr)
            return 2
    if not password:
        print("rocketq dashboard: an empty password is not allowed", file=sys.stderr)
        return 2
    print(hash_password(password), flush=True)
    return 0


async def _serve(args: argparse.Namespace) -> int:
    from aiohttp import web

    from rocketq.tools.dashboard.app import DashboardSettings, make_app
    from rocketq.tools.dashboard.auth import UserStore

    users = UserStore.load(args.users) if args.users else None
    settings = DashboardSettings(
        namesrv_addr=args.namesrv,
        read_only=args.read_only,
        users=users,
        sample_interval_s=args.sample_interval,
    )
    runner = web.AppRunner(make_app(settings), access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, args.host, args.port)
        await site.start()
        host, port = runner.addresses[0][:2]
        mode = "read-only" if args.read_only else (f"{len(users.users)} user(s)" if users else "no users")
        print(BOOT_LINE.format(host=host, port=port) + f" (namesrv {args.namesrv}, {mode})", flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
    finally:
        await runner.cleanup()
    return 0


def run(args: argparse.Namespace) -> int:
    """Run the parsed ``rocketq dashboard`` command line."""
    if args.action == "hash-password":
        return _hash_password(args)
    if not args.namesrv:
        print("rocketq dashboard: give the NameServer address with -n host:port", file=sys.stderr)
        return 2
    from rocketq.tools.dashboard.auth import UsersFileError

    try:
        return asyncio.run(_serve(args))
    except UsersFileError as exc:
        print(f"rocketq dashboard: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"rocketq dashboard: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="rocketq dashboard", description="the rocketq web console")
    add_arguments(p)
    with contextlib.suppress(KeyboardInterrupt):
        return run(p.parse_args(argv))
    return 0
