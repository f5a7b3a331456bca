"""Filter pushdown of batch reads: Spark's filters turned into less reading, and re-checked exactly.

Spark (``spark.sql.python.filterPushdown.enabled=true``) hands a batch reader the conjuncts of a
query's ``WHERE`` that it could translate (``pyspark.sql.datasource.Filter``: ``EqualTo``,
``In``, ``GreaterThan`` ... on plain columns; map lookups such as ``properties['k']`` are never
translated).  :func:`translate` keeps the filters that make the read smaller and returns the rest
to Spark:

* ``tags`` ``=`` / ``<=>`` / ``IN`` -> the broker's tag filter (a TAG subscription ``a || b``);
* ``topic``, ``brokerName``, ``queueId`` (any comparison, ``IN``, ``LIKE`` prefixes, ``NOT``)
  -> queues pruned before planning;
* ``queueOffset`` ``=`` / ``IN`` / ``>`` / ``>=`` / ``<`` / ``<=`` -> narrower offset ranges;
* ``storeTimestamp`` ``=`` / ``>`` / ``>=`` / ``<`` / ``<=`` -> offset ranges found by time
  (SEARCH_OFFSET_BY_TIMESTAMP, see :func:`rocketq.connector.positions.narrow_ranges`);
* ``IS NOT NULL`` of those columns;
* the ``propertyColumns`` (message properties as columns) ``=`` / ``<=>`` / ``IN`` /
  ``IS [NOT] NULL`` / ``NOT``, and ``<`` / ``<=`` / ``>`` / ``>=`` on numeric ones -> a SQL92
  expression for the broker (``region = 'eu' AND amount > 100``), when every
  broker accepts SQL92 (``enablePropertyFilter=true``); the pull then uses SQL92, and tag filters
  join it as ``TAGS IN (...)``.

Theory of operation.  Spark does not evaluate an accepted filter again, so every accepted filter
is applied exactly to each decoded record batch on the executor (:func:`filter_batch`, one
pyarrow.compute mask per batch, SQL's three-valued logic: a row is kept only when every filter is
true).  The pushed form is only ever a superset of the matching rows -- tag hash collisions,
millisecond rounding of time bounds, the ``IN`` hull of offsets -- so pushing narrows the read and
the re-check makes it exact.  Queue-level filters are evaluated on the driver with the same
three-valued logic (:func:`holds`); a filter that cannot be evaluated keeps the queue.
"""

from __future__ import annotations

import calendar
import datetime
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringContains,
    StringEndsWith,
    StringStartsWith,
)

from rocketq.client.remoting.vocabulary import MessageQueue

TAGS, OFFSET, STORE_TIME = "tags", "queueOffset", "storeTimestamp"
QUEUE_COLUMNS = ("topic", "brokerName", "queueId")
_COLUMNS = {c.lower(): c for c in (TAGS, OFFSET, STORE_TIME, *QUEUE_COLUMNS)}
_COMPARISONS = (EqualTo, EqualNullSafe, GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual)
_STRING_TESTS = (StringStartsWith, StringEndsWith, StringContains)


@dataclass(frozen=True, slots=True)
class PushedScan:
    """What a batch read pushes down; plain data, pickled into the executor's reader."""

    #: filters Spark will not apply again: re-checked by :func:`filter_batch`
    accepted: tuple[Filter, ...] = ()
    #: the tag set of the broker's tag filter (None: no tag filter; empty: nothing matches)
    tags: frozenset[str] | None = None
    #: filters on topic / brokerName / queueId, evaluated per queue on the driver
    queue_filters: tuple[Filter, ...] = ()
    offset_low: int | None = None  # inclusive
    offset_high: int | None = None  # exclusive
    time_low_ms: int | None = None  # inclusive
    time_high_ms: int | None = None  # exclusive
    #: conditions for a SQL92 subscription (property and tag filters), AND-ed; None: no SQL92
    sql: str | None = None

    @property
    def empty(self) -> bool:
        """Whether the filters contradict each other (no row can match)."""
        return (
            (self.tags is not None and not self.tags)
            or _crossed(self.offset_low, self.offset_high)
            or _crossed(self.time_low_ms, self.time_high_ms)
        )

    def keeps_queue(self, queue: MessageQueue) -> bool:
        values = {"topic": queue.topic, "brokerName": queue.broker_name, "queueId": queue.queue_id}
        return all(holds(f, values[_column(f) or ""]) is not False for f in self.queue_filters)

    def describe(self) -> str:
        """One line for the log: what is pushed where."""
        parts = []
        if self.tags is not None:
            parts.append(f"tag filter {' || '.join(sorted(self.tags)) or '(nothing)'}")
        if self.queue_filters:
            parts.append(f"queue pruning {list(map(_show, self.queue_filters))}")
        if self.offset_low is not None or self.offset_high is not None:
            parts.append(f"queueOffset in [{self.offset_low}, {self.offset_high})")
        if self.time_low_ms is not None or self.time_high_ms is not None:
            parts.append(f"storeTimestamp ms in [{self.time_low_ms}, {self.time_high_ms})")
        if self.sql is not None:
            parts.append(f"SQL92 {self.sql}")
        return "; ".join(parts) or "nothing"


def _crossed(low: int | None, high: int | None) -> bool:
    return low is not None and high is not None and low >= high


def _show(f: Filter) -> str:
    if isinstance(f, Not):
        return f"NOT {_show(f.child)}"
    value = getattr(f, "value", None)
    return f"{type(f).__name__}({_attribute(f)}{'' if value is None else f', {value!r}'})"


def _attribute(f: Filter) -> str | None:
    """The top-level column a filter tests, as Spark spells it (None: a nested field)."""
    while isinstance(f, Not):
        f = f.child
    path = getattr(f, "attribute", None)
    if not isinstance(path, tuple) or len(path) != 1:
        return None
    return str(path[0])


def _column(f: Filter) -> str | None:
    """The fixed connector column a filter tests (canonical spelling), or None."""
    name = _attribute(f)
    return None if name is None else _COLUMNS.get(name.lower())


_SQL_KEYWORDS = frozenset(
    "AND OR NOT IN IS NULL TRUE FALSE BETWEEN CONTAINS STARTSWITH ENDSWITH LIKE ESCAPE".split()
)


def _sql_string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _sql_number(value: Any, kind: str) -> str | None:
    """A SQL92 literal of a number for a ``kind`` property column (None: not one)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if kind == "double":
        return repr(float(value)) if math.isfinite(value) else None
    return str(value) if isinstance(value, int) else None


def property_sql(f: Filter, name: str, kind: str = "string") -> str | None:
    """The SQL92 condition (RocketMQ's grammar, as 4.x brokers know it) of a filter on the
    property column ``name`` of type ``kind`` (string, int, bigint, double), or None.

    A broker compares a property with a number after Java's ``Long.valueOf``/``Double.valueOf``
    of its text; the column holds a number only where the text is one by the same rules (a
    subset for doubles), so the broker keeps every row the column's filter keeps.
    """
    if name.upper() in _SQL_KEYWORDS:
        return None
    if isinstance(f, Not):
        inner = property_sql(f.child, name, kind)
        return None if inner is None else f"(NOT {inner})"
    if isinstance(f, IsNull):
        return f"({name} IS NULL)"
    if isinstance(f, IsNotNull):
        return f"({name} IS NOT NULL)"
    literal: Callable[[Any], str | None]
    if kind == "string":
        literal = lambda v: _sql_string(v) if isinstance(v, str) else None  # noqa: E731
    else:
        literal = lambda v: _sql_number(v, kind)  # noqa: E731
    if isinstance(f, In):
        items = [literal(v) for v in f.value]
        if not items or any(i is None for i in items):
            return None
        if kind == "string":
            return f"({name} IN ({', '.join(i for i in items if i)}))"
        return "(" + " OR ".join(f"{name} = {i}" for i in items) + ")"  # IN takes strings only
    value = getattr(f, "value", None)
    if isinstance(f, EqualNullSafe) and value is None:
        return f"({name} IS NULL)"
    text = literal(value)
    if text is None:
        return None
    if isinstance(f, (EqualTo, EqualNullSafe)):
        return f"({name} = {text})"
    op = {GreaterThan: ">", GreaterThanOrEqual: ">=", LessThan: "<", LessThanOrEqual: "<="}.get(type(f))
    if op is None or kind == "string":  # SQL92 orders numbers only
        return None
    return f"({name} {op} {text})"


def _tags_sql(tags: frozenset[str]) -> str:
    return f"(TAGS IN ({', '.join(map(_sql_string, sorted(tags)))}))"


# -- translation (driver) -----------------------------------------------------------------------


def translate(
    filters: Sequence[Filter],
    *,
    option_tags: frozenset[str] | None,
    sql_filter: bool,
    property_columns: Mapping[str, str] | None = None,
) -> tuple[PushedScan, list[Filter]]:
    """Split ``filters`` into what is pushed (a :class:`PushedScan`) and what Spark must apply.

    ``option_tags`` is the tag set of the ``subExpression`` option (intersected with pushed tag
    filters).  Filters on ``property_columns`` (name -> type) become SQL92 conditions
    (:attr:`PushedScan.sql`);
    when there are any, or with ``sql_filter`` (the user's SQL92 expression), the pull is a
    SQL92 subscription, which takes no tag filter: tags join the SQL92 conditions instead.
    """
    accepted: list[Filter] = []
    rest: list[Filter] = []
    sql: list[str] = []
    properties = {p.lower(): (p, t) for p, t in (property_columns or {}).items()}
    others: list[Filter] = []
    for f in filters:
        name = _attribute(f)
        prop = properties.get(name.lower()) if name is not None else None
        if prop is None:
            others.append(f)
            continue
        condition = property_sql(f, *prop)
        if condition is None:
            rest.append(f)
        else:
            sql.append(condition)
            accepted.append(f)
    sql_mode = sql_filter or bool(sql)
    tags = option_tags
    pushed_tags = False
    queue_filters: list[Filter] = []
    lows: dict[str, list[int]] = {OFFSET: [], STORE_TIME: []}
    highs: dict[str, list[int]] = {OFFSET: [], STORE_TIME: []}
    for f in others:
        column = _column(f)
        if column is None or not _literals_fit(f, column):
            rest.append(f)
        elif isinstance(f, IsNotNull):
            accepted.append(f)
        elif column in QUEUE_COLUMNS:
            queue_filters.append(f)
            accepted.append(f)
        elif column == TAGS:
            found = tag_set(f)
            if found is None:
                rest.append(f)
                continue
            tags = found if tags is None else tags & found
            pushed_tags = True
            accepted.append(f)
        else:
            bounds = offset_bounds(f) if column == OFFSET else time_bounds_ms(f)
            if bounds is None:
                rest.append(f)
                continue
            low, high = bounds
            if low is not None:
                lows[column].append(low)
            if high is not None:
                highs[column].append(high)
            accepted.append(f)
    if sql_mode and tags is not None:  # a SQL92 subscription has no tag filter: tags join the SQL
        if tags:
            sql.append(_tags_sql(tags))
            pushed_tags = False
        else:
            pushed_tags = True  # no tag can match: the scan is empty
    scan = PushedScan(
        accepted=tuple(accepted),
        sql=" AND ".join(sql) if sql else None,
        tags=tags if pushed_tags else None,
        queue_filters=tuple(queue_filters),
        offset_low=max(lows[OFFSET], default=None),
        offset_high=min(highs[OFFSET], default=None),
        time_low_ms=max(lows[STORE_TIME], default=None),
        time_high_ms=min(highs[STORE_TIME], default=None),
    )
    return scan, rest


_LITERAL_TYPES: dict[str, tuple[type, ...]] = {
    "topic": (str,),
    "brokerName": (str,),
    TAGS: (str,),
    "queueId": (int,),
    OFFSET: (int,),
    STORE_TIME: (datetime.datetime,),
}


def _literals_fit(f: Filter, column: str) -> bool:
    """Whether the filter's literals have the column's Python type (so Arrow compares them as is)."""
    while isinstance(f, Not):
        f = f.child
    if isinstance(f, (IsNull, IsNotNull)):
        return True
    values = f.value if isinstance(f, In) else (getattr(f, "value", None),)
    kinds = _LITERAL_TYPES[column]
    return all(v is None or (isinstance(v, kinds) and not isinstance(v, bool)) for v in values)


def tag_set(f: Filter) -> frozenset[str] | None:
    """The tags a ``tags`` filter admits, when a TAG subscription can say it (else None)."""
    if isinstance(f, (EqualTo, EqualNullSafe)):
        values: tuple[Any, ...] = (f.value,)
    elif isinstance(f, In):
        values = tuple(v for v in f.value if v is not None)
    else:
        return None
    if not all(isinstance(v, str) and _expressible_tag(v) for v in values):
        return None
    return frozenset(values)


def _expressible_tag(tag: str) -> bool:
    # RocketMQ's TAG expression splits on "||" and trims; "*" means every message
    return bool(tag) and tag == tag.strip() and "||" not in tag and tag != "*"


def _number(value: Any) -> float | int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        return None
    return value


def offset_bounds(f: Filter) -> tuple[int | None, int | None] | None:
    """``[low, high)`` of queue offsets a ``queueOffset`` filter admits (None: not pushable)."""
    if isinstance(f, In):
        numbers = [_number(v) for v in f.value if v is not None]
        if not numbers or any(n is None for n in numbers):
            return None
        valid = [n for n in numbers if n is not None]
        return math.ceil(min(valid)), math.floor(max(valid)) + 1
    v = _number(getattr(f, "value", None))
    if v is None or not isinstance(f, _COMPARISONS):
        return None
    if isinstance(f, (EqualTo, EqualNullSafe)):
        return math.ceil(v), math.floor(v) + 1
    if isinstance(f, GreaterThan):
        return math.floor(v) + 1, None
    if isinstance(f, GreaterThanOrEqual):
        return math.ceil(v), None
    if isinstance(f, LessThan):
        return None, math.ceil(v)
    return None, math.floor(v) + 1  # LessThanOrEqual


def epoch_us(value: datetime.datetime) -> int:
    """Microseconds since the epoch (a naive datetime is taken as UTC, as Arrow does)."""
    if value.tzinfo is not None:
        value = value.astimezone(datetime.UTC)
    return calendar.timegm(value.timetuple()) * 1_000_000 + value.microsecond


def time_bounds_ms(f: Filter) -> tuple[int | None, int | None] | None:
    """``[low, high)`` in store-time milliseconds a ``storeTimestamp`` filter admits.

    Store times are whole milliseconds; a bound in microseconds is rounded outwards to them.
    """
    value = getattr(f, "value", None)
    if not isinstance(f, _COMPARISONS) or not isinstance(value, datetime.datetime):
        return None
    us = epoch_us(value)
    ceil_ms, floor_ms = -(-us // 1000), us // 1000
    if isinstance(f, (EqualTo, EqualNullSafe)):
        return ceil_ms, floor_ms + 1
    if isinstance(f, GreaterThan):
        return floor_ms + 1, None
    if isinstance(f, GreaterThanOrEqual):
        return ceil_ms, None
    if isinstance(f, LessThan):
        return None, ceil_ms
    return None, floor_ms + 1  # LessThanOrEqual


def holds(f: Filter, value: Any) -> bool | None:
    """Three-valued truth of ``f`` for one non-null column value (None = SQL NULL or unknown)."""
    try:
        return _holds(f, value)
    except TypeError:  # a literal of another type: cannot say, keep the queue
        return None


def _holds(f: Filter, value: Any) -> bool | None:
    if isinstance(f, Not):
        inner = _holds(f.child, value)
        return None if inner is None else not inner
    if isinstance(f, IsNull):
        return value is None
    if isinstance(f, IsNotNull):
        return value is not None
    if isinstance(f, In):
        if value in [v for v in f.value if v is not None]:
            return True
        return None if any(v is None for v in f.value) else False
    other = getattr(f, "value", None)
    if isinstance(f, EqualNullSafe):
        return other is not None and value == other
    if other is None:
        return None
    if isinstance(f, EqualTo):
        return bool(value == other)
    if isinstance(f, GreaterThan):
        return bool(value > other)
    if isinstance(f, GreaterThanOrEqual):
        return bool(value >= other)
    if isinstance(f, LessThan):
        return bool(value < other)
    if isinstance(f, LessThanOrEqual):
        return bool(value <= other)
    if isinstance(f, StringStartsWith):
        return str(value).startswith(other)
    if isinstance(f, StringEndsWith):
        return str(value).endswith(other)
    if isinstance(f, StringContains):
        return other in str(value)
    return None


# -- the exact re-check (executor) ---------------------------------------------------------------


def filter_batches(batches: Iterable[pa.RecordBatch], accepted: Sequence[Filter]) -> Iterator[pa.RecordBatch]:
    """Apply the accepted filters to every batch; batches left empty are dropped."""
    for batch in batches:
        out = filter_batch(batch, accepted)
        if out.num_rows:
            yield out


def filter_batch(batch: pa.RecordBatch, accepted: Sequence[Filter]) -> pa.RecordBatch:
    """The rows of ``batch`` for which every filter is true (one compute mask per filter)."""
    if not accepted or not batch.num_rows:
        return batch
    mask: pa.Array | None = None
    names = {n.lower(): n for n in batch.schema.names}
    for f in accepted:
        column = _attribute(f)
        assert column is not None, f"filter {f} was not accepted by translate()"
        m = _mask(f, batch.column(names[column.lower()]))
        mask = m if mask is None else pc.and_kleene(mask, m)
    assert mask is not None
    return batch.filter(pc.fill_null(mask, False))


def _literal(value: Any, column: pa.Array) -> pa.Scalar:
    if pa.types.is_timestamp(column.type):
        return pa.scalar(value, type=column.type)
    return pa.scalar(value)


def _mask(f: Filter, column: pa.Array) -> pa.Array:
    """The Kleene truth of ``f`` per row (null where SQL says NULL)."""
    if isinstance(f, Not):
        return pc.invert(_mask(f.child, column))
    if isinstance(f, IsNull):
        return pc.is_null(column)
    if isinstance(f, IsNotNull):
        return pc.is_valid(column)
    if isinstance(f, In):
        values = [v for v in f.value if v is not None]
        found = pc.is_in(column, value_set=pa.array(values, type=column.type))
        # NULL IN (...) is NULL, and x IN (..., NULL) is NULL when x is not found
        unknown = pc.or_(pc.is_null(column), pa.scalar(len(values) < len(f.value)))
        return pc.if_else(pc.and_(unknown, pc.invert(found)), pa.scalar(None, pa.bool_()), found)
    value = getattr(f, "value", None)
    if isinstance(f, EqualNullSafe):
        if value is None:
            return pc.is_null(column)
        return pc.fill_null(pc.equal(column, _literal(value, column)), False)
    if value is None:
        return pa.nulls(len(column), pa.bool_())
    lit = _literal(value, column)
    if isinstance(f, EqualTo):
        return pc.equal(column, lit)
    if isinstance(f, GreaterThan):
        return pc.greater(column, lit)
    if isinstance(f, GreaterThanOrEqual):
        return pc.greater_equal(column, lit)
    if isinstance(f, LessThan):
        return pc.less(column, lit)
    if isinstance(f, LessThanOrEqual):
        return pc.less_equal(column, lit)
    if isinstance(f, StringStartsWith):
        return pc.starts_with(column, pattern=value)
    if isinstance(f, StringEndsWith):
        return pc.ends_with(column, pattern=value)
    if isinstance(f, StringContains):
        return pc.match_substring(column, pattern=value)
    raise AssertionError(f"filter {f} was not accepted by translate()")
