"""SlaveSynchronize: a slave copies its master's metadata, so that consumers can fail over to it.

A slave's CommitLog arrives over the HA connection (``ha/``), but the tables that give the log its
meaning do not: topic configs, consumer offsets, delay-level offsets and subscription groups live
in ``config/*.json`` on the master.  As RocketMQ 4.x's ``SlaveSynchronize`` does, the slave asks
its master for them with GET_ALL_TOPIC_CONFIG (21), GET_ALL_CONSUMER_OFFSET (43),
GET_ALL_DELAY_OFFSET (45) and GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201) every ``slaveSyncInterval``
(a rocketq key, default 10 s: RocketMQ hard-codes 10 s) and once as soon as it learns a master.

Theory of operation.  The master's address is the ``masterAddr`` of the NameServer's answer to
REGISTER_BROKER (:class:`~rocketq.broker.namesrv_registration.NamesrvRegistrar`); while it is
unknown (no NameServer, or the master is gone from it) a round does nothing, and the slave's
tables stay as they are.  Each table is fetched, decoded completely, then applied in one step, so
a master that answers garbage or dies mid-round leaves the slave's table untouched:

* topics and subscription groups carry a ``dataVersion``: the slave replaces its whole table and
  takes the master's version only when that version differs from its own (Java's rule);
* consumer offsets are merged as Java's ``putAll``: each ``topic@group`` of the master replaces the
  slave's entry; entries only the slave has (commits received while the master was away) stay
  until the master has them too, then the master's value wins;
* delay offsets are written to the slave's ``delayOffset.json`` (the slave runs no
  ScheduleMessageService; a slave promoted to master by configuration resumes delivery there).

Every table is persisted on the slave as the master persists it (topics and groups at once,
consumer offsets by the next ``flushConsumerOffsetInterval`` flush).  A round's outcome per table is
a :class:`SyncOutcome`, never an exception.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from rocketq.broker.metadata import (
    DELAY_OFFSET_JSON,
    ConsumerOffsetTable,
    DelayOffsetTable,
    SubscriptionGroupConfig,
    persist_json_file,
)
from rocketq.broker.processor.context import BrokerContext
from rocketq.broker.store.errors import MetadataError
from rocketq.client.errors import RocketQError
from rocketq.client.remoting import lenient_json
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.vocabulary import DataVersion, TopicConfig
from rocketq.client.transport.aio import RemotingClient

__all__ = ["SYNC_TIMEOUT_MS", "SlaveSynchronizer", "SyncOutcome", "SyncReport"]

log = logging.getLogger(__name__)

#: timeout of each GET_ALL_* request (RocketMQ's BrokerOuterAPI uses 3 s)
SYNC_TIMEOUT_MS = 3_000


class SyncOutcome(enum.Enum):
    """What one round did to one table."""

    UPDATED = "UPDATED"  # the slave's table now holds the master's
    UNCHANGED = "UNCHANGED"  # the master's table was already the slave's (same dataVersion / same values)
    FAILED = "FAILED"  # the master did not answer, refused, or answered something undecodable
    NO_MASTER = "NO_MASTER"  # no master known (or this broker is the master): nothing was asked


@dataclass(frozen=True, kw_only=True, slots=True)
class SyncReport:
    """One round of :meth:`SlaveSynchronizer.sync_all`."""

    master_addr: str | None
    topics: SyncOutcome
    consumer_offsets: SyncOutcome
    delay_offsets: SyncOutcome
    subscription_groups: SyncOutcome
    errors: tuple[str, ...] = ()

    @property
    def outcomes(self) -> tuple[SyncOutcome, ...]:
        return (self.topics, self.consumer_offsets, self.delay_offsets, self.subscription_groups)


class _SyncFailed(Exception):
    """A fetch or decode failed; the message says which table and why (becomes FAILED)."""


def _outcome(changed: bool) -> SyncOutcome:
    return SyncOutcome.UPDATED if changed else SyncOutcome.UNCHANGED


def _named(table: object, name_key: str) -> dict[str, Mapping[str, Any]]:
    """A ``{name: object}`` table with each object's name filled in (fastjson may omit it)."""
    if not isinstance(table, Mapping):
        raise ValueError(f"expected a JSON object, got {type(table).__name__}")
    out: dict[str, Mapping[str, Any]] = {}
    for name, obj in table.items():
        if not isinstance(obj, Mapping):
            raise ValueError(f"entry {name!r} is {type(obj).__name__}, not a JSON object")
        out[str(name)] = {name_key: str(name), **obj}
    return out


def decode_topic_table(doc: Mapping[str, Any]) -> tuple[dict[str, TopicConfig], DataVersion]:
    """GET_ALL_TOPIC_CONFIG's TopicConfigSerializeWrapper, typed; ValueError etc. if malformed."""
    named = _named(doc.get("topicConfigTable") or {}, "topicName")
    return (
        {name: TopicConfig.from_obj(obj) for name, obj in named.items()},
        DataVersion.from_obj(doc.get("dataVersion") or {}),
    )


def decode_group_table(doc: Mapping[str, Any]) -> tuple[dict[str, SubscriptionGroupConfig], DataVersion]:
    """GET_ALL_SUBSCRIPTIONGROUP_CONFIG's SubscriptionGroupWrapper, typed."""
    named = _named(doc.get("subscriptionGroupTable") or {}, "groupName")
    return (
        {name: SubscriptionGroupConfig.from_json(obj) for name, obj in named.items()},
        DataVersion.from_obj(doc.get("dataVersion") or {}),
    )


class SlaveSynchronizer:
    """Copies the master's metadata into a slave's managers; :meth:`sync_all` is one round.

    ``master_addr()`` returns the master's remoting address as last learnt (None when unknown);
    ``config_dir`` is where ``delayOffset.json`` is written (None: not written, for tests).
    """

    def __init__(
        self,
        ctx: BrokerContext,
        client: RemotingClient,
        *,
        master_addr: Callable[[], str | None],
        config_dir: str | None,
        timeout_ms: int = SYNC_TIMEOUT_MS,
    ) -> None:
        self.ctx = ctx
        self._client = client
        self._master_addr = master_addr
        self._config_dir = config_dir
        self._timeout_ms = timeout_ms
        self._lock = asyncio.Lock()  # the periodic round and a master-change round never interleave
        self._last_delay: dict[int, int] | None = None
        self._pending: set[asyncio.Task[SyncReport]] = set()
        self.last_report: SyncReport | None = None

    # -- triggers ------------------------------------------------------------------------------
    def master_changed(self, master_addr: str | None, ha_addr: str | None) -> None:
        """A NamesrvRegistrar master listener: sync at once when a (new) master becomes known."""
        if master_addr:
            task = asyncio.get_running_loop().create_task(self.sync_all())
            self._pending.add(task)
            task.add_done_callback(self._pending.discard)

    async def close(self) -> None:
        """Cancel a round started by :meth:`master_changed` (broker shutdown)."""
        for task in list(self._pending):
            task.cancel()
        await asyncio.gather(*self._pending, return_exceptions=True)

    # -- one round -----------------------------------------------------------------------------
    async def sync_all(self) -> SyncReport:
        """Topics, consumer offsets, delay offsets, subscription groups, in RocketMQ's order."""
        async with self._lock:
            master = self._master_addr()
            if not master or master == self.ctx.broker_addr:
                none = SyncOutcome.NO_MASTER
                report = SyncReport(
                    master_addr=None,
                    topics=none,
                    consumer_offsets=none,
                    delay_offsets=none,
                    subscription_groups=none,
                )
            else:
                errors: list[str] = []
                report = SyncReport(
                    master_addr=master,
                    topics=await self._guard(errors, self._sync_topics(master)),
                    consumer_offsets=await self._guard(errors, self._sync_consumer_offsets(master)),
                    delay_offsets=await self._guard(errors, self._sync_delay_offsets(master)),
                    subscription_groups=await self._guard(errors, self._sync_groups(master)),
                    errors=tuple(errors),
                )
                if errors:
                    log.warning("slave sync from master %s: %s", master, "; ".join(errors))
            self.last_report = report
            return report

    @staticmethod
    async def _guard(errors: list[str], step: Awaitable[SyncOutcome]) -> SyncOutcome:
        try:
            outcome = await step
        except _SyncFailed as exc:
            errors.append(str(exc))
            return SyncOutcome.FAILED
        return outcome

    async def _fetch(self, master: str, code: RequestCode) -> Any:
        """The decoded JSON body of the master's answer to a GET_ALL_* request."""
        try:
            response = await self._client.invoke(master, RemotingCommand.request(code), self._timeout_ms)
        except (RocketQError, OSError) as exc:
            raise _SyncFailed(f"{code.name}: {exc}") from exc
        if response.code != ResponseCode.SUCCESS:
            raise _SyncFailed(
                f"{code.name}: the master answered code {response.code} {response.remark or ''}"
            )
        try:
            doc = lenient_json.loads(response.body)
        except ValueError as exc:
            raise _SyncFailed(f"{code.name}: the body does not parse: {exc}") from exc
        if not isinstance(doc, Mapping):
            raise _SyncFailed(f"{code.name}: the body is {type(doc).__name__}, not a JSON object")
        return doc

    async def _sync_topics(self, master: str) -> SyncOutcome:
        doc = await self._fetch(master, RequestCode.GET_ALL_TOPIC_CONFIG)
        try:
            table, version = decode_topic_table(doc)
        except (ValueError, TypeError, KeyError) as exc:
            raise _SyncFailed(f"GET_ALL_TOPIC_CONFIG: bad TopicConfigSerializeWrapper: {exc!r}") from exc
        return _outcome(self.ctx.topics.replace_all(table, version))

    async def _sync_groups(self, master: str) -> SyncOutcome:
        doc = await self._fetch(master, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        try:
            table, version = decode_group_table(doc)
        except (ValueError, TypeError, KeyError) as exc:
            raise _SyncFailed(
                f"GET_ALL_SUBSCRIPTIONGROUP_CONFIG: bad SubscriptionGroupWrapper: {exc!r}"
            ) from exc
        return _outcome(self.ctx.groups.replace_all(table, version))

    async def _sync_consumer_offsets(self, master: str) -> SyncOutcome:
        doc = await self._fetch(master, RequestCode.GET_ALL_CONSUMER_OFFSET)
        try:
            table = ConsumerOffsetTable.from_json(dict(doc))
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise _SyncFailed(
                f"GET_ALL_CONSUMER_OFFSET: bad ConsumerOffsetSerializeWrapper: {exc!r}"
            ) from exc
        return _outcome(self.ctx.offsets.put_all(table.offset_table))

    async def _sync_delay_offsets(self, master: str) -> SyncOutcome:
        doc = await self._fetch(master, RequestCode.GET_ALL_DELAY_OFFSET)
        try:
            table = DelayOffsetTable.from_json(dict(doc))
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise _SyncFailed(f"GET_ALL_DELAY_OFFSET: bad delay offset table: {exc!r}") from exc
        offsets = dict(sorted(table.offset_table.items()))
        if offsets == self._last_delay:
            return SyncOutcome.UNCHANGED
        schedule = self.ctx.schedule
        try:
            if schedule is not None:
                schedule.replace_offsets(offsets)
                await asyncio.to_thread(schedule.persist)
            elif self._config_dir is not None:
                path = os.path.join(self._config_dir, DELAY_OFFSET_JSON)
                await asyncio.to_thread(
                    persist_json_file, path, DelayOffsetTable(offset_table=offsets).to_json()
                )
        except MetadataError as exc:
            raise _SyncFailed(f"GET_ALL_DELAY_OFFSET: {exc}") from exc
        self._last_delay = offsets
        return SyncOutcome.UPDATED
