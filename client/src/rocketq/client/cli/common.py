"""What every mqadmin command group shares: the :class:`CommandGroup` shape, output and parsing helpers.

A command group is a family of subcommands (topics, clusters, ACL, the controller, ...): each
command's handler and help line, how the group adds its options to a command's parser, what a
command line of the group must hold (:attr:`CommandGroup.usage_error`) and which server the
command talks to first (:attr:`CommandGroup.contact`).  :mod:`rocketq.client.cli.mqadmin`
assembles the groups into one parser.  The helpers here print aligned tables and RocketMQ's
timestamps and parse mqadmin's one timestamp syntax (:func:`parse_timestamp`).
"""

from __future__ import annotations

import argparse
import datetime as dt
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rocketq.client.admin import AsyncAdmin

__all__ = [
    "CommandGroup",
    "Handler",
    "fmt_ms",
    "namesrv_contact",
    "namesrv_usage_error",
    "out",
    "parse_timestamp",
    "table",
    "table_lines",
]

#: a subcommand: runs with the admin client and the parsed command line
Handler = Callable[[AsyncAdmin, argparse.Namespace], Coroutine[Any, Any, None]]


def namesrv_usage_error(a: argparse.Namespace) -> str | None:
    """The check of every command that asks the NameServer: ``-n`` (or NAMESRV_ADDR) given."""
    if not a.namesrv:
        return "give the NameServer address with -n host:port (or set NAMESRV_ADDR)"
    return None


def namesrv_contact(a: argparse.Namespace) -> str:
    """The address list the admin client starts from: the NameServer(s) of ``-n``."""
    return str(a.namesrv)


@dataclass(frozen=True, kw_only=True)
class CommandGroup:
    """A family of mqadmin subcommands and what the command line assembles from it."""

    #: subcommand name -> (handler, help line), in the order ``mqadmin --help`` lists them
    commands: Mapping[str, tuple[Handler, str]]
    #: adds the options of subcommand ``name`` (RocketMQ's letters) to its parser
    add_options: Callable[[str, argparse.ArgumentParser], None]
    #: what is missing from a parsed command line of this group, or None
    usage_error: Callable[[argparse.Namespace], str | None] = namesrv_usage_error
    #: the address the admin client is built on for a command of this group
    contact: Callable[[argparse.Namespace], str] = namesrv_contact


def out(line: str = "") -> None:
    print(line, flush=False)


def table_lines(rows: Sequence[Sequence[object]]) -> list[str]:
    """``rows`` as left-aligned columns two spaces apart (trailing blanks stripped)."""
    if not rows:
        return []
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(str(v).ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in rows]


def table(rows: Sequence[Sequence[object]]) -> None:
    for line in table_lines(rows):
        out(line)


def fmt_ms(ms: int) -> str:
    """Epoch milliseconds as RocketMQ prints them, ``yyyy-MM-dd HH:mm:ss,SSS`` (local time)."""
    return dt.datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]


def parse_timestamp(text: str) -> int:
    """Milliseconds, ``now``, or RocketMQ's ``yyyy-MM-dd#HH:mm:ss:SSS`` (also ISO 8601)."""
    if text == "now":
        return int(time.time() * 1000)
    if text.lstrip("-").isdigit():
        return int(text)
    for fmt in ("%Y-%m-%d#%H:%M:%S:%f", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d"):
        try:
            return int(dt.datetime.strptime(text, fmt).timestamp() * 1000)
        except ValueError:
            continue
    raise argparse.ArgumentTypeError(f"bad timestamp {text!r}: use ms, 'now' or yyyy-MM-dd#HH:mm:ss:SSS")
