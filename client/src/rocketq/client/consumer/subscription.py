"""Subscriptions of a consumer: RocketMQ's ``MessageSelector`` and the check of tag expressions.

A consumer subscribes to a topic with a tag expression (``"*"``, ``"TagA || TagB"``) or with a
:class:`MessageSelector`: ``MessageSelector.by_tag("TagA || TagB")`` or
``MessageSelector.by_sql("a > 5 AND b = 'x'")``.  The broker filters tags by their Java hash codes
in the ConsumeQueue (the client re-checks the real tag, hashes can collide) and SQL92 expressions
by evaluating them on each message's properties, which needs ``enablePropertyFilter=true`` in the
broker's ``broker.conf``.  A plain string is always a tag expression, so text that cannot be one
(spaces inside a tag, quotes, parentheses, comparison operators, a single ``|``) is refused with
an error that points to :meth:`MessageSelector.by_sql` instead of silently matching nothing.
``SubscriptionData`` and ``build_subscription`` are defined once in
:mod:`rocketq.client.remoting.vocabulary` and re-exported here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from rocketq.client.errors import MQBrokerError, MQClientError, SubscriptionError
from rocketq.client.remoting.codes import ResponseCode
from rocketq.client.remoting.vocabulary import (
    SUB_ALL,
    ExpressionType,
    SubscriptionData,
    build_subscription,
)

__all__ = [
    "SUB_ALL",
    "ExpressionType",
    "MessageSelector",
    "Subscribable",
    "SubscriptionData",
    "SubscriptionRefusedError",
    "build_subscription",
    "check_tag_expression",
    "subscription_refused",
]

# What a tag never contains and a SQL92 expression almost always does.
_NOT_IN_A_TAG: Final = re.compile(r"[\s()'\"=<>!|]")
_PROPERTY_FILTER_HINT: Final = "SQL92 filtering needs enablePropertyFilter=true in the broker's broker.conf"


def check_tag_expression(expression: str) -> str:
    """``expression`` stripped, or MQClientError when it cannot be tags joined by ``||``."""
    text = expression.strip()
    for tag in (t.strip() for t in text.split("||")):
        bad = _NOT_IN_A_TAG.search(tag)
        if bad is not None:
            raise MQClientError(
                f"{expression!r} is not a tag expression: the tag {tag!r} contains {bad.group()!r}. "
                "Tags are separated by '||' and contain no spaces, quotes, parentheses or comparison "
                f"operators. To filter by message properties, subscribe with "
                f"MessageSelector.by_sql({text!r}) ({_PROPERTY_FILTER_HINT})."
            )
    return text


@dataclass(frozen=True, slots=True)
class MessageSelector:
    """How a consumer selects the messages of a topic (RocketMQ's ``MessageSelector``)."""

    expression_type: ExpressionType
    expression: str

    @classmethod
    def by_sql(cls, sql: str) -> MessageSelector:
        """Messages whose properties match the SQL92 expression ``sql`` (e.g. ``"a > 5"``)."""
        text = sql.strip()
        if not text:
            raise MQClientError("MessageSelector.by_sql needs an expression, e.g. \"a > 5 AND b = 'x'\"")
        return cls(ExpressionType.SQL92, text)

    @classmethod
    def by_tag(cls, tags: str | None = SUB_ALL) -> MessageSelector:
        """Messages with one of the tags (``"TagA || TagB"``; ``"*"``, ``""`` or None: all)."""
        text = check_tag_expression(tags or "")
        return cls(ExpressionType.TAG, text or SUB_ALL)

    @classmethod
    def of(cls, expression: Subscribable) -> MessageSelector:
        """A selector as given, or a tag selector for a plain string (refusing non-tag text)."""
        return expression if isinstance(expression, MessageSelector) else cls.by_tag(expression)

    def subscription(self, topic: str) -> SubscriptionData:
        return build_subscription(topic, self.expression, self.expression_type)


#: What ``subscribe()`` accepts: a tag expression, a selector, or None for everything.
Subscribable = str | MessageSelector | None


class SubscriptionRefusedError(SubscriptionError):
    """A broker refuses a subscription's expression for good (e.g. SQL92 without
    ``enablePropertyFilter=true``, or SQL92 text that does not parse); retrying does not help."""


def subscription_refused(exc: MQBrokerError, sub: SubscriptionData) -> SubscriptionRefusedError | None:
    """The clear error for a broker refusing a SQL92 subscription, or None for other failures.

    rocketq brokers answer SUBSCRIPTION_PARSE_FAILED; Apache RocketMQ brokers with
    ``enablePropertyFilter=false`` answer SYSTEM_ERROR "The broker does not support consumer to
    filter message by SQL92".
    """
    if sub.expression_type is ExpressionType.TAG:
        return None
    unsupported = "does not support consumer to filter" in exc.remark
    if exc.code != ResponseCode.SUBSCRIPTION_PARSE_FAILED and not unsupported:
        return None
    hint = f" ({_PROPERTY_FILTER_HINT})" if unsupported and "enablePropertyFilter" not in exc.remark else ""
    remark = (
        f"the broker refused the {sub.expression_type} subscription {sub.sub_string!r} of topic "
        f"{sub.topic}: {exc.remark}{hint}"
    )
    return SubscriptionRefusedError(exc.code, remark, exc.broker_addr)
