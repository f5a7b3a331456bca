"""mqadmin's trace command: ``queryMsgTraceById -i msgId [-t traceTopic]`` (RocketMQ's name
and option letters), printing a message's trace records oldest first: producer sends (Pub, with
store host), transaction ends, then each consumer group's SubBefore/SubAfter with cost and status.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from rocketq.client.admin import AsyncAdmin
from rocketq.client.cli.common import CommandGroup, Handler, fmt_ms, out, parse_timestamp, table_lines
from rocketq.client.remoting.vocabulary import TRACE_TOPIC
from rocketq.client.trace.lookup import TraceView, query_trace
from rocketq.client.trace.model import TraceType

__all__ = ["GROUP", "trace_table"]

_HEADER = ("#Type", "#Group", "#ClientHost", "#StoreHost", "#Time", "#CostTimes", "#Status")


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
                fmt_ms(v.timestamp_ms) if v.timestamp_ms > 0 else "-",
                cost,
                _status(v),
            )
        )
    return table_lines(rows)


async def _query_msg_trace_by_id(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    views = await query_trace(
        admin, a.msg_id, trace_topic=a.trace_topic, max_num=a.max_num, begin_ms=a.begin, end_ms=a.end
    )
    if not views:
        out(
            f"no trace of {a.msg_id} in {a.trace_topic}: was the message sent with enable_msg_trace, "
            "and is -t the trace topic its clients used?"
        )
        return
    for line in trace_table(views):
        out(line)


_COMMANDS: dict[str, tuple[Handler, str]] = {
    "queryMsgTraceById": (_query_msg_trace_by_id, "Query a message trace"),
}


def _add_options(name: str, p: argparse.ArgumentParser) -> None:
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


GROUP = CommandGroup(commands=_COMMANDS, add_options=_add_options)
