"""The mqadmin trace subcommand: ``queryMsgTraceById -i msgId [-t traceTopic]`` (RocketMQ's name
and option letters), printing a message's trace records oldest first: producer sends (Pub, with
store host), transaction ends, then each consumer group's SubBefore/SubAfter with cost and status.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from rocketq.client.admin import AsyncAdmin
from rocketq.client.remoting.vocabulary import TRACE_TOPIC
from rocketq.client.trace.lookup import TraceView, query_trace
from rocketq.client.trace.model import TraceType

__all__ = ["COMMANDS", "add_options", "trace_table"]

Handler = Callable[[AsyncAdmin, argparse.Namespace], Coroutine[Any, Any, None]]

_HEADER = ("#Type", "#Group", "#ClientHost", "#StoreHost", "#Time", "#CostTimes", "#Status")


def _fmt_ms(ms: int) -> str:
    if ms <= 0:
        return "-"
    return dt.datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]


def _status(v: TraceView) -> str:
    if v.trace_type is TraceType.EndTransaction:
        state = v.transaction_state.value if v.transaction_state is not None else "UNKNOW"
        return f"{state}{' (check)' if v.from_transaction_check else ''}"
    if v.trace_type is TraceType.SubBefore:
        return f"retry {v.retry_times}" if v.retry_times else "-"
    return v.status


def trace_table(views: Sequence[TraceView]) -> list[str]:
    """The printed lines of ``views``: a header and one aligned row per record."""
    rows: list[Sequence[object]] = [_HEADER]
    for v in views:
        cost = (
            "-" if v.trace_type in (TraceType.SubBefore, TraceType.EndTransaction) else f"{v.cost_time_ms}ms"
        )
        rows.append(
            (
                v.trace_type.value,
                v.group_name or "-",
                v.client_host or "-",
                v.store_host or "-",
                _fmt_ms(v.timestamp_ms),
                cost,
                _status(v),
            )
        )
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(_HEADER))]
    return ["  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


async def _query_msg_trace_by_id(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    views = await query_trace(
        admin, a.msg_id, trace_topic=a.trace_topic, max_num=a.max_num, begin_ms=a.begin, end_ms=a.end
    )
    if not views:
        sys.stdout.write(
            f"no trace of {a.msg_id} in {a.trace_topic}: was the message sent with enable_msg_trace, "
            "and is -t the trace topic its clients used?\n"
        )
        return
    for line in trace_table(views):
        sys.stdout.write(line + "\n")


COMMANDS: dict[str, tuple[Handler, str]] = {
    "queryMsgTraceById": (_query_msg_trace_by_id, "Query a message trace"),
}


def add_options(name: str, p: argparse.ArgumentParser) -> None:
    from rocketq.client.admin_cli import parse_timestamp  # the one timestamp syntax of mqadmin

    p.add_argument("-i", "--msgId", dest="msg_id", required=True, help="the message id (UNIQ_KEY)")
    p.add_argument(
        "-t",
        "--traceTopic",
        dest="trace_topic",
        default=TRACE_TOPIC,
        help=f"trace topic (default {TRACE_TOPIC})",
    )
    p.add_argument("-c", "--maxNum", dest="max_num", type=int, default=64, help="trace messages per broker")
    p.add_argument("-b", "--beginTimestamp", dest="begin", type=parse_timestamp, default=0)
    p.add_argument("-e", "--endTimestamp", dest="end", type=parse_timestamp, default=None)
