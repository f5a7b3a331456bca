"""What the proxy knows of a consumer group: FIFO or not, and how many deliveries a message gets.

RocketMQ's proxy reads a group's ``SubscriptionGroupConfig`` from a broker (GET_SUBSCRIPTIONGROUP_CONFIG)
and keeps it in a cache refreshed every ``subscriptionGroupConfigCacheRefreshSeconds``
(``ClusterMetadataService``).  Two of its fields matter to 5.x consumers: ``consumeMessageOrderly``
(the proxy pops orderly and tells the SDK ``fifo=true``) and ``retryMaxTimes`` (a message gets
``retryMaxTimes + 1`` deliveries, the SDK's ``backoff_policy.max_attempts``).

rocketq keeps subscription groups per broker (``mqadmin updateSubGroup -c`` writes every master),
so the proxy asks a master of the broker a receive names, or of the first broker of a subscribed
topic.  When no broker answers, a group that was read before keeps its last settings; one never
read is treated as non-FIFO with ``consumerMaxAttempts`` deliveries, and asked again next time.
"""

from __future__ import annotations

import dataclasses
import logging
import time

from rocketq.client.admin_subgroup import query_sub_group
from rocketq.client.errors import RocketQError
from rocketq.client.instance import ClientInstance
from rocketq.proxy.config import ProxyConfig

__all__ = ["GroupPolicy", "SubscriptionGroups"]

log = logging.getLogger("rocketq.proxy")


@dataclasses.dataclass(frozen=True, slots=True)
class GroupPolicy:
    """How the proxy serves one consumer group."""

    fifo: bool
    #: deliveries a message gets (the group's retryMaxTimes + 1)
    max_attempts: int


class SubscriptionGroups:
    """``await policy(group, topic)``: the group's settings, read from a broker and cached."""

    def __init__(self, instance: ClientInstance, config: ProxyConfig) -> None:
        self.instance = instance
        self.config = config
        self._cache: dict[str, tuple[float, GroupPolicy]] = {}

    def fallback(self) -> GroupPolicy:
        return GroupPolicy(fifo=False, max_attempts=self.config.consumer_max_attempts)

    async def policy(self, group: str, topic: str, broker_name: str = "") -> GroupPolicy:
        cached = self._cache.get(group)
        refresh_s = self.config.subscription_group_config_cache_refresh_seconds
        if cached is not None and time.monotonic() - cached[0] < refresh_s:
            return cached[1]
        try:
            route = await self.instance.get_route(topic)
            names = sorted({q.broker_name for q in route.readable_queues(topic)})
            if not names:
                raise LookupError(f"topic {topic} has no readable queue")
            name = broker_name if broker_name in names else names[0]
            addr = await self.instance.find_master_addr_or_refresh(name, topic)
            settings = await query_sub_group(self.instance.api, addr, group)
        except (RocketQError, LookupError) as exc:
            log.warning("cannot read subscription group %s from a broker of %s: %s", group, topic, exc)
            return cached[1] if cached is not None else self.fallback()
        if settings is None:  # the broker does not auto-create groups and has no such group
            policy = self.fallback()
        else:
            policy = GroupPolicy(
                fifo=settings.consume_message_orderly, max_attempts=settings.retry_max_times + 1
            )
        self._cache[group] = (time.monotonic(), policy)
        return policy
