"""Tag subscriptions: parsing ``"TagA || TagB"`` into RocketMQ's SubscriptionData.

A subscription expression is ``"*"`` (everything, also for ``None`` or ``""``) or tags separated
by ``||``.  The broker filters by the Java ``String.hashCode`` of each tag (``codeSet``) against
the tag hash stored in the ConsumeQueue; hashes can collide, so the client re-checks the real tag
against ``tags_set`` after decoding (FilterAPI.buildSubscriptionData / PullAPIWrapper).  The JSON
form is the element of ``subscriptionDataSet`` in HeartbeatData (B.8).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from rocketq.client.remoting.javahash import java_string_hash

__all__ = ["SUB_ALL", "SubscriptionData", "build_subscription"]

SUB_ALL = "*"


@dataclass(frozen=True, slots=True)
class SubscriptionData:
    """One topic's subscription of a consumer group."""

    topic: str
    sub_string: str = SUB_ALL
    tags_set: frozenset[str] = frozenset()
    code_set: frozenset[int] = frozenset()
    sub_version: int = field(default_factory=lambda: int(time.time() * 1000))
    expression_type: str = "TAG"

    @property
    def is_all(self) -> bool:
        return self.sub_string == SUB_ALL

    def matches_tag(self, tag: str | None) -> bool:
        """The client-side re-check of a pulled message's tag."""
        return self.is_all or (tag is not None and tag in self.tags_set)

    def tags_filter(self) -> frozenset[str] | None:
        """What PullResult should re-check (None = no filter)."""
        return None if self.is_all else self.tags_set

    def to_json(self) -> dict[str, Any]:
        return {
            "classFilterMode": False,
            "codeSet": sorted(self.code_set),
            "expressionType": self.expression_type,
            "subString": self.sub_string,
            "subVersion": self.sub_version,
            "tagsSet": sorted(self.tags_set),
            "topic": self.topic,
        }


def build_subscription(topic: str, expression: str | None) -> SubscriptionData:
    """Parse a tag expression the way RocketMQ's FilterAPI does."""
    text = (expression or "").strip()
    if not text or text == SUB_ALL:
        return SubscriptionData(topic)
    tags = [t.strip() for t in text.split("||")]
    tags = [t for t in tags if t]
    if not tags:
        return SubscriptionData(topic)
    return SubscriptionData(
        topic,
        sub_string=text,
        tags_set=frozenset(tags),
        code_set=frozenset(java_string_hash(t) for t in tags),
    )
