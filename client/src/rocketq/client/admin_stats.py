"""A broker's statistics items for the admin tools: Java's ``statsAll`` and ``exportMetrics``.

* :func:`view_broker_stats_data`: VIEW_BROKER_STATS_DATA of one item at one broker
  (:mod:`rocketq.client.remoting.broker_stats`); an item the broker never counted raises
  :class:`~rocketq.client.errors.MQBrokerError` with Java's ``The stats <name> <key> not exist``.
* :func:`query_topic_consume_by_who`: the groups consuming a topic (QUERY_TOPIC_CONSUME_BY_WHO
  at the topic's masters, merged).
* :func:`stats_all`: per topic (retry and dead-letter topics left out) and consumer group, the
  accumulation (the group's total lag on the topic), the in and out TPS of the last minute and
  the messages in and out over 24 hours, summed over the topic's masters, as Java's
  ``StatsAllSubCommand`` computes them: ``TOPIC_PUT_NUMS`` keyed by the topic for *in*,
  ``GROUP_GET_NUMS`` keyed by ``topic@group`` for *out*, the 24-hour figure being the day sum, else
  the hour's, else the minute's.  A topic nobody consumes gives one row without a group.  Like
  Java, a broker that cannot answer an item counts as zero.
* :func:`export_metrics`: Java's ``metrics.json`` of a cluster: per broker its environment,
  disk ratios, TPS, one-day counts, topic and group numbers and the consumers' client versions,
  plus the cluster totals.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from rocketq.client.admin import AsyncAdmin
from rocketq.client.admin_config import get_broker_config
from rocketq.client.api import MQClientAPI
from rocketq.client.errors import MQClientError, ProtocolError, RocketQError
from rocketq.client.remoting.broker_stats import (
    BrokerStatsData,
    QueryTopicConsumeByWhoRequestHeader,
    StatsName,
    ViewBrokerStatsDataRequestHeader,
    decode_group_list,
    topic_group_key,
)
from rocketq.client.remoting.codes import RequestCode
from rocketq.client.remoting.command import DEFAULT_VERSION, RemotingCommand
from rocketq.client.remoting.mq_version import version_name
from rocketq.client.remoting.vocabulary import (
    SCHEDULE_TOPIC,
    SYSTEM_GROUPS,
    TRANS_HALF_TOPIC,
    is_group_topic,
    is_internal_topic,
)

__all__ = [
    "StatsAllRow",
    "export_metrics",
    "query_topic_consume_by_who",
    "stats_all",
    "topic_stats_rows",
    "view_broker_stats_data",
]


async def view_broker_stats_data(
    api: MQClientAPI, broker_addr: str, stats_name: str, stats_key: str, timeout_ms: int | None = None
) -> BrokerStatsData:
    """One stats item's minute, hour and day windows at ``broker_addr``."""
    header = ViewBrokerStatsDataRequestHeader(stats_name=stats_name, stats_key=stats_key)
    cmd = RemotingCommand.request(RequestCode.VIEW_BROKER_STATS_DATA, header.to_ext_fields())
    response = api.check(await api.invoke(broker_addr, cmd, timeout_ms), broker_addr)
    return BrokerStatsData.decode(response.body)


async def _stats_or_none(api: MQClientAPI, addr: str, name: str, key: str) -> BrokerStatsData | None:
    try:
        return await view_broker_stats_data(api, addr, name, key)
    except RocketQError:  # Java's tools count an item a broker cannot answer as zero
        return None


async def query_topic_consume_by_who(api: MQClientAPI, masters: Iterable[str], topic: str) -> list[str]:
    """The groups consuming ``topic`` (online or with offsets) at the given masters, merged."""
    header = QueryTopicConsumeByWhoRequestHeader(topic=topic).to_ext_fields()
    groups: set[str] = set()
    for addr in masters:
        cmd = RemotingCommand.request(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, header)
        groups.update(decode_group_list(api.check(await api.invoke(addr, cmd), addr).body))
    return sorted(groups)


@dataclass(frozen=True, slots=True)
class StatsAllRow:
    """One line of ``statsAll``; ``group`` None: nobody consumes the topic (``NO_CONSUMER``)."""

    topic: str
    group: str | None
    accumulation: int
    in_tps: float
    out_tps: float
    in_msg_24_hours: int
    out_msg_24_hours: int


async def topic_stats_rows(admin: AsyncAdmin, topic: str, *, active_only: bool = False) -> list[StatsAllRow]:
    """The ``statsAll`` rows of one topic (``active_only``: only with traffic in 24 hours)."""
    api = admin.api
    route = await admin.topic_route(topic)
    masters = [addr for bd in route.broker_datas if (addr := bd.master_addr) is not None]
    in_tps, in_24h = 0.0, 0
    for addr in masters:
        data = await _stats_or_none(api, addr, StatsName.TOPIC_PUT_NUMS, topic)
        if data is not None:
            in_tps += data.stats_minute.tps
            in_24h += data.sum_24_hours()
    try:
        groups = await query_topic_consume_by_who(api, masters, topic)
    except RocketQError:
        groups = []
    if not groups:
        return [] if active_only and in_24h <= 0 else [StatsAllRow(topic, None, 0, in_tps, 0.0, in_24h, 0)]
    rows = []
    for group in groups:
        out_tps, out_24h = 0.0, 0
        for addr in masters:
            data = await _stats_or_none(api, addr, StatsName.GROUP_GET_NUMS, topic_group_key(topic, group))
            if data is not None:
                out_tps += data.stats_minute.tps
                out_24h += data.sum_24_hours()
        try:
            accumulation = max(sum(p.lag for p in await admin.consume_stats(group, topic)), 0)
        except RocketQError:
            accumulation = 0
        if not active_only or in_24h > 0 or out_24h > 0:
            rows.append(StatsAllRow(topic, group, accumulation, in_tps, out_tps, in_24h, out_24h))
    return rows


async def stats_all(
    admin: AsyncAdmin, *, topic: str | None = None, active_only: bool = False
) -> list[StatsAllRow]:
    """``statsAll``: the rows of every topic the NameServer lists (or of ``topic`` only), retry and
    dead-letter topics left out; a topic whose figures cannot be read is skipped, as in Java."""
    rows: list[StatsAllRow] = []
    for name in await admin.topic_list():
        if is_group_topic(name) or (topic and name != topic):
            continue
        try:
            rows += await topic_stats_rows(admin, name, active_only=active_only)
        except RocketQError:
            continue
    return rows


# ----------------------------------------------------------------------------- exportMetrics


async def _table(api: MQClientAPI, addr: str, code: int, key: str) -> Mapping[str, Any]:
    response = api.check(await api.invoke(addr, RemotingCommand.request(code)), addr)
    try:
        return dict(json.loads(response.body.decode("utf-8")).get(key) or {})
    except (UnicodeDecodeError, ValueError, AttributeError) as exc:
        raise ProtocolError(f"bad {key} from {addr}: {exc}") from exc


def _first_number(text: str | None) -> float:
    """The first figure of a runtime value such as Java's ``putTps`` (``"10s 1m 10m"``)."""
    try:
        return float((text or "").split()[0])
    except (IndexError, ValueError):
        return 0.0


def _morning_diff(runtime: Mapping[str, str], what: str) -> int:
    """Java's one-day count from the runtime info: today's morning total minus yesterday's."""
    try:
        return int(runtime[f"msg{what}TotalTodayMorning"]) - int(runtime[f"msg{what}TotalYesterdayMorning"])
    except (KeyError, ValueError):
        return 0


async def _traffic(
    api: MQClientAPI, addr: str, runtime: Mapping[str, str], cluster: str
) -> tuple[dict[str, float], dict[str, int]]:
    """A broker's minute TPS and one-day counts: normal in/out from ``BROKER_PUT_NUMS`` /
    ``BROKER_GET_NUMS`` (keyed by the cluster), else from the runtime info as Java reads it;
    transactions and schedules from ``TOPIC_PUT_NUMS`` of their system topics."""
    put = await _stats_or_none(api, addr, StatsName.BROKER_PUT_NUMS, cluster)
    get = await _stats_or_none(api, addr, StatsName.BROKER_GET_NUMS, cluster)
    trans = await _stats_or_none(api, addr, StatsName.TOPIC_PUT_NUMS, TRANS_HALF_TOPIC)
    sched = await _stats_or_none(api, addr, StatsName.TOPIC_PUT_NUMS, SCHEDULE_TOPIC)
    out_tps = runtime.get("getTransferredTps", runtime.get("getTransferedTps"))
    tps = {
        "normalInTps": put.stats_minute.tps if put else _first_number(runtime.get("putTps")),
        "normalOutTps": get.stats_minute.tps if get else _first_number(out_tps),
        "transInTps": trans.stats_minute.tps if trans else 0.0,
        "scheduleInTps": sched.stats_minute.tps if sched else 0.0,
    }
    one_day = {
        "normalOneDayInNum": put.sum_24_hours() if put else _morning_diff(runtime, "Put"),
        "normalOneDayOutNum": get.sum_24_hours() if get else _morning_diff(runtime, "Get"),
        "transOneDayInNum": trans.sum_24_hours() if trans else 0,
        "scheduleOneDayInNum": sched.sum_24_hours() if sched else 0,
    }
    return tps, one_day


async def _client_versions(admin: AsyncAdmin, groups: Iterable[str]) -> list[str]:
    """``LANGUAGE%Vx_y_z`` of every consumer connected to one of ``groups``."""
    found: set[str] = set()
    for group in groups:
        try:
            conns = await admin.consumer_connections(group)
        except RocketQError:
            continue
        found.update(f"{c.language}%{version_name(c.version)}" for c in conns.connections)
    return sorted(found)


async def _broker_metrics(
    admin: AsyncAdmin, addr: str, cluster: str, system_topics: set[str]
) -> dict[str, dict[str, Any]]:
    api = admin.api
    runtime = await admin.broker_runtime_info(addr)
    config = await get_broker_config(admin, addr)
    topics = await _table(api, addr, RequestCode.GET_ALL_TOPIC_CONFIG, "topicConfigTable")
    groups = await _table(api, addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, "subscriptionGroupTable")
    user_topics = [t for t in topics if not is_internal_topic(t) and t not in system_topics]
    user_groups = [g for g in groups if g not in SYSTEM_GROUPS and not g.startswith("CID_RMQ_SYS_")]
    tps, one_day = await _traffic(api, addr, runtime, cluster)
    return {
        "runtimeEnv": {
            "cpuNum": config.get("clientCallbackExecutorThreads"),
            "totalMemKBytes": runtime.get("totalMemKBytes"),
        },
        "runtimeQuota": {
            "diskRatio": {
                "commitLogDiskRatio": runtime.get("commitLogDiskRatio"),
                "consumeQueueDiskRatio": runtime.get("consumeQueueDiskRatio"),
            },
            "tps": tps,
            "oneDayNum": one_day,
            "messageAverageSize": runtime.get("putMessageAverageSize"),
            "topicSize": len(user_topics),
            "groupSize": len(user_groups),
        },
        "runtimeVersion": {
            "rocketmqVersion": version_name(DEFAULT_VERSION),
            "clientInfo": await _client_versions(admin, sorted(user_groups)),
        },
    }


_TOTAL_TPS = {
    "totalNormalInTps": "normalInTps",
    "totalNormalOutTps": "normalOutTps",
    "totalTransInTps": "transInTps",
    "totalScheduleInTps": "scheduleInTps",
}


async def export_metrics(admin: AsyncAdmin, cluster: str) -> dict[str, Any]:
    """Java's ``metrics.json`` document of ``cluster``: ``evaluateReport`` (per broker name, read
    from its master) and ``totalData`` (the TPS and one-day counts summed over the brokers)."""
    info = await admin.cluster_list()
    if cluster not in info.cluster_addr_table:
        raise MQClientError(f"the cluster {cluster} does not exist; known: {sorted(info.cluster_addr_table)}")
    names = sorted(info.cluster_addr_table[cluster])
    system_topics = {cluster, *names}  # the cluster and broker topics (Java's system topic list)
    report: dict[str, Any] = {}
    total_tps = dict.fromkeys(_TOTAL_TPS, 0.0)
    total_day = dict.fromkeys(
        ("normalOneDayInNum", "normalOneDayOutNum", "transOneDayInNum", "scheduleOneDayInNum"), 0
    )
    for name in names:
        bd = info.broker_addr_table.get(name)
        if bd is None or bd.master_addr is None:
            continue
        broker = report[name] = await _broker_metrics(admin, bd.master_addr, cluster, system_topics)
        quota = broker["runtimeQuota"]
        for total, key in _TOTAL_TPS.items():
            total_tps[total] += quota["tps"][key]
        for key in total_day:
            total_day[key] += quota["oneDayNum"][key]
    return {"evaluateReport": report, "totalData": {"totalTps": total_tps, "totalOneDayNum": total_day}}
