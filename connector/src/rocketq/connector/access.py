"""The connector's view of the cluster: queue discovery, offsets and pulls over the client API.

:class:`BrokerAccess` wraps :class:`rocketq.client.api.BlockingMQClientAPI` with the few calls
the source and sink need, in the connector's vocabulary (:class:`MessageQueue`), and turns "cannot
reach the NameServer" and "no such topic" into :class:`OptionError`\\ s naming the option, so a
misconfigured query fails at start with a clear message.

Driver-side readers keep one BrokerAccess for their lifetime (Spark never calls ``stop()``, and
the process is killed on query stop, so nothing needs closing).  Executors get theirs from
:func:`executor_access`, a per-process cache keyed by NameServer address that survives across
tasks and micro-batches (Python workers are reused) and is rebuilt after a fork.

Replicas.  Reads go to a broker group's master, or to a slave while the master is absent from
the route or fails at the transport level (the read is made again on the next replica), and
follow the pull answers' ``suggestWhichBrokerId`` as Java's PullAPIWrapper does: the client's
replica choice and failover (:class:`rocketq.client.replica_reads.BlockingReplicaReads`).
Offsets are the same on every replica of a group, so a range planned on the master reads the
same messages from its slave.

Retries.  Every look-up and pull is made again on a retriable failure as the
:class:`~rocketq.connector.retry.RetryPolicy` says (``fetchOffset.numRetries`` /
``fetchOffset.retryIntervalMs``), the topic's route fetched again before each new attempt, so a
restarted broker, a new master after a failover or a restarted NameServer is picked up; a budget
spent raises :class:`RetriesExhaustedError`.  NameServer trouble is an :class:`OptionError`
(``nameServer``, ``topic``) only until the first route was obtained, when the query starts;
afterwards it is an unavailability.  A broker group that served a topic and is now missing from
its route while the NameServer does not list the group at all (the broker is down, or the
NameServer restarted and has not heard from it yet) is an unavailability too, retried, never a
vanished queue: only a group the NameServer lists without the topic has dropped its queues.

Max offsets are asked per broker (:meth:`BrokerAccess.max_offsets`): one GET_TOPIC_STATS_INFO
per broker group and topic instead of one GET_MAX_OFFSET per queue, falling back to per-queue
requests for a broker that does not answer it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

from rocketq.client.api import BlockingMQClientAPI
from rocketq.client.config import ClientConfig
from rocketq.client.errors import (
    MQBrokerError,
    NameServerUnreachableError,
    NoRouteError,
    RocketQError,
    SubscriptionError,
)
from rocketq.client.instance import FindBrokerResult
from rocketq.client.model import PullResult
from rocketq.client.remoting.codes import ResponseCode
from rocketq.client.remoting.headers import PullMessageRequestHeader
from rocketq.client.remoting.route import TopicRouteData
from rocketq.client.remoting.vocabulary import (
    MASTER_ID,
    ExpressionType,
    MessageQueue,
    PullSysFlag,
    is_internal_topic,
    is_readable,
)
from rocketq.client.replica_reads import DEFAULT_UNREACHABLE_BACKOFF_MS, BlockingReplicaReads
from rocketq.connector.errors import BrokerUnavailableError, NameServerUnavailableError, OptionError
from rocketq.connector.offsets import queue_text
from rocketq.connector.retry import NO_RETRY, RetryPolicy, call_with_retries, is_retriable

log = logging.getLogger("rocketq.connector")
_T = TypeVar("_T")

# a replica that failed at the transport level is passed over for this long (the client's default)
UNREACHABLE_BACKOFF_MS = DEFAULT_UNREACHABLE_BACKOFF_MS


class BrokerAccess:
    """Blocking access to NameServer and brokers for one ``nameServer`` option value."""

    def __init__(
        self,
        name_server: str,
        *,
        timeout_ms: int = 10_000,
        client: ClientConfig | None = None,
        retry: RetryPolicy = NO_RETRY,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.name_server = name_server
        self.timeout_ms = timeout_ms
        self.retry = retry
        self._sleep = sleep
        self.api = BlockingMQClientAPI(name_server, config=client)
        self.replicas = BlockingReplicaReads(
            self.api, timeout_ms=timeout_ms, unreachable_backoff_ms=UNREACHABLE_BACKOFF_MS
        )
        #: a NameServer answered once: from now on its trouble is an outage, not a wrong option
        self.started = False
        self._suggested: dict[MessageQueue, int] = {}  # the last suggestWhichBrokerId per queue
        self._served_by: dict[MessageQueue, int] = {}  # the broker id that answered the last read
        self._groups: dict[str, frozenset[str]] = {}  # the broker groups last seen serving a topic
        self._no_stats: set[str] = set()  # broker groups that do not answer GET_TOPIC_STATS_INFO

    # -- retries ---------------------------------------------------------------------------

    def _retrying(self, what: str, where: Callable[[], str], attempt: Callable[[], _T], topic: str) -> _T:
        """``attempt()`` under the retry policy, the route of ``topic`` fetched before each retry."""

        def refresh() -> None:
            self.refresh_route(topic)

        return call_with_retries(self.retry, what, where, attempt, before_retry=refresh, sleep=self._sleep)

    def refresh_route(self, topic: str) -> None:
        """Fetch the route of ``topic`` again (best effort): the next read goes to the replicas
        it names now (a new master after a failover, a restarted broker)."""
        with contextlib.suppress(RocketQError):
            self.replicas.update_topic_route(topic)

    def _name_server_text(self) -> str:
        return f"NameServer {self.name_server}"

    def _broker_text(self, queue: MessageQueue, addr: str) -> str:
        known = sorted(set(self.replicas.broker_addr_table.get(queue.broker_name, {}).values()) | {addr})
        return f"broker {queue.broker_name} ({', '.join(known)})"

    # -- routes ----------------------------------------------------------------------------

    def _route_once(self, topic: str, *, missing_ok: bool) -> TopicRouteData | None:
        ns = self.name_server
        try:
            route = self.api.get_topic_route(topic, self.timeout_ms)
        except NameServerUnreachableError as exc:
            if not self.started:
                raise OptionError("nameServer", f"no NameServer of {ns!r} answered ({exc})") from exc
            raise NameServerUnavailableError(f"no NameServer of {ns} answered: {exc}") from exc
        except NoRouteError as exc:
            if missing_ok:
                return None
            if not self.started:
                raise OptionError("topic", f"topic {topic!r} does not exist on NameServer {ns}") from exc
            raise NameServerUnavailableError(
                f"NameServer {ns} has no route for topic {topic!r} (deleted, or its brokers are not "
                "registered with the NameServer yet)"
            ) from exc
        except RocketQError as exc:
            raise self._name_server_failure(f"cannot get the route of {topic!r} from {ns}", exc) from exc
        self.started = True
        return route

    def _name_server_failure(self, what: str, exc: RocketQError) -> OptionError | NameServerUnavailableError:
        """A NameServer request that failed: an option error before the query first reached the
        NameServer, a (possibly retriable) unavailability afterwards."""
        if not self.started:
            return OptionError("nameServer", f"{what}: {exc}")
        return NameServerUnavailableError(f"{what}: {exc}", retriable=is_retriable(exc))

    def route(self, topic: str, *, missing_ok: bool = False) -> TopicRouteData | None:
        """The route of ``topic`` (None when it has none and ``missing_ok``)."""
        return self._retrying(
            f"GET_ROUTEINFO_BY_TOPIC of topic {topic!r}",
            self._name_server_text,
            lambda: self._route_once(topic, missing_ok=missing_ok),
            topic,
        )

    def read_queues(self, topic: str, *, missing_ok: bool = False) -> dict[MessageQueue, str]:
        """Readable queues of ``topic`` with the address to read them from: the master, or a
        slave of the group while the master is absent from the route or does not answer."""
        return self._retrying(
            f"the route of topic {topic!r}",
            self._name_server_text,
            lambda: self._read_queues_once(topic, missing_ok=missing_ok),
            topic,
        )

    def _read_queues_once(self, topic: str, *, missing_ok: bool) -> dict[MessageQueue, str]:
        route = self._route_once(topic, missing_ok=missing_ok)
        queues: dict[MessageQueue, str] = {}
        served: set[str] = set()
        if route is not None:
            self.replicas.learn(route)
            for qd in route.queue_datas:
                found = self.replicas.find_broker_in_subscribe(qd.broker_name)
                if found is None:
                    continue
                served.add(qd.broker_name)
                if is_readable(qd.perm):
                    for queue_id in range(qd.read_queue_nums):
                        queues[MessageQueue(topic, qd.broker_name, queue_id)] = found.broker_addr
        self._check_groups_registered(topic, served)
        self._groups[topic] = frozenset(served)
        return queues

    def _check_groups_registered(self, topic: str, served: set[str]) -> None:
        """Raise a retriable BrokerUnavailableError when a broker group that served ``topic`` is
        missing from its route because the NameServer does not list the group at all."""
        lost = self._groups.get(topic, frozenset()) - served
        if not lost:
            return
        try:
            cluster = self.api.get_broker_cluster_info(self.timeout_ms)
        except RocketQError as exc:
            raise NameServerUnavailableError(
                f"cannot get the cluster of {self.name_server}: {exc}", retriable=is_retriable(exc)
            ) from exc
        absent = []
        for group in sorted(lost):
            data = cluster.broker_addr_table.get(group)
            if data is None or not data.broker_addrs:
                absent.append(group)
        if absent:
            raise BrokerUnavailableError(
                f"broker group(s) {', '.join(absent)} of topic {topic!r} are not registered with "
                f"NameServer {self.name_server} (down or restarting, or the NameServer restarted and "
                "has not heard from them yet)"
            )

    # -- replicas --------------------------------------------------------------------------

    def _on_replica(
        self,
        what: str,
        queue: MessageQueue,
        addr: str,
        call: Callable[[str], _T],
        broker_id: int = MASTER_ID,
    ) -> _T:
        """``call(address)`` on the replica of the queue's broker group the client picks (the one
        ``broker_id`` names, else the master, else a slave), and on a transport error on the other
        replicas in turn, so a read keeps working on a slave while the master is down.  ``addr``
        (the planned replica) is tried first unless it is marked unreachable or another broker
        id was suggested, and used as it is when no route names the group.  Broker
        answers are raised as BrokerUnavailableError naming ``what``."""

        def on(found: FindBrokerResult) -> _T:
            result = call(found.broker_addr)
            self._served_by[queue] = found.broker_id
            return result

        try:
            try:
                return self.replicas.invoke_on_replica(
                    queue.broker_name, queue.topic, on, broker_id, planned=addr
                )
            except (NoRouteError, NameServerUnreachableError):
                if self.replicas.knows(queue.broker_name):
                    raise
                return on(FindBrokerResult(addr, MASTER_ID))  # no route to learn from: the planned one
        except RocketQError as exc:
            raise self._wrap(what, exc) from exc

    def _broker_call(
        self,
        what: str,
        queue: MessageQueue,
        addr: str,
        call: Callable[[str], _T],
        broker_id: int = MASTER_ID,
    ) -> _T:
        """:meth:`_on_replica` under the retry policy (``what`` names the request and its queue)."""
        return self._retrying(
            what,
            lambda: self._broker_text(queue, addr),
            lambda: self._on_replica(what, queue, addr, call, broker_id),
            queue.topic,
        )

    def served_by_slave(self, queue: MessageQueue) -> bool:
        """Whether the last read of ``queue`` was answered by a slave (its master is down)."""
        return self._served_by.get(queue, MASTER_ID) != MASTER_ID

    def topics_matching(self, pattern: str) -> list[str]:
        """Topics known to the NameServer that fully match ``pattern`` (system topics excluded)."""

        def once() -> list[str]:
            try:
                listed = self.api.get_all_topic_list(self.timeout_ms)
            except RocketQError as exc:
                raise self._name_server_failure(f"cannot list topics on {self.name_server}", exc) from exc
            self.started = True
            return listed

        what = "GET_ALL_TOPIC_LIST_FROM_NAMESERVER"
        topics = call_with_retries(self.retry, what, self._name_server_text, once, sleep=self._sleep)
        regex = re.compile(pattern)
        return sorted(t for t in topics if regex.fullmatch(t) and not is_internal_topic(t))

    def discover(
        self, topics: Iterable[str], pattern: str | None, *, missing_ok: bool
    ) -> dict[MessageQueue, str]:
        """All readable queues of the subscribed topics (``missing_ok`` tolerates deleted topics)."""
        names = self.topics_matching(pattern) if pattern is not None else list(topics)
        found: dict[MessageQueue, str] = {}
        for topic in names:
            found.update(self.read_queues(topic, missing_ok=missing_ok or pattern is not None))
        return dict(sorted(found.items()))

    # -- offsets ---------------------------------------------------------------------------

    def _wrap(self, what: str, exc: RocketQError) -> BrokerUnavailableError:
        return BrokerUnavailableError(f"{what} failed: {exc}", retriable=is_retriable(exc))

    def min_offset(self, queue: MessageQueue, addr: str) -> int:
        api, t, q, ms = self.api, queue.topic, queue.queue_id, self.timeout_ms
        what = f"GET_MIN_OFFSET of {queue_text(queue)}"
        return self._broker_call(what, queue, addr, lambda a: api.get_min_offset(a, t, q, ms))

    def max_offset(self, queue: MessageQueue, addr: str) -> int:
        api, t, q, ms = self.api, queue.topic, queue.queue_id, self.timeout_ms
        what = f"GET_MAX_OFFSET of {queue_text(queue)}"
        return self._broker_call(what, queue, addr, lambda a: api.get_max_offset(a, t, q, ms))

    def max_offsets(self, queues: Mapping[MessageQueue, str]) -> dict[MessageQueue, int]:
        """The max offset of every queue: one GET_TOPIC_STATS_INFO per broker group and topic,
        GET_MAX_OFFSET per queue for a broker without it (or a queue its answer lacks)."""
        members: dict[tuple[str, str], list[MessageQueue]] = {}
        for queue in queues:
            members.setdefault((queue.topic, queue.broker_name), []).append(queue)
        out: dict[MessageQueue, int] = {}
        for group in members.values():
            table = self._stats_max_offsets(group[0], queues[group[0]])
            for queue in group:
                found = table.get(queue.queue_id) if table is not None else None
                out[queue] = found if found is not None else self.max_offset(queue, queues[queue])
        return out

    def _stats_max_offsets(self, queue: MessageQueue, addr: str) -> dict[int, int] | None:
        """Queue id -> max offset of ``queue``'s topic on its broker group; None when the broker
        does not answer GET_TOPIC_STATS_INFO (remembered: it is not asked again)."""
        if queue.broker_name in self._no_stats:
            return None
        from rocketq.client.admin import topic_stats_info  # the admin package is large: on first use

        api, t, ms = self.api, queue.topic, self.timeout_ms
        what = f"GET_TOPIC_STATS_INFO of topic {t!r}"
        try:
            rows = self._broker_call(
                what, queue, addr, lambda a: api.run(topic_stats_info(api.api, a, t, ms))
            )
        except BrokerUnavailableError as exc:
            cause = exc.__cause__
            if isinstance(cause, MQBrokerError) and cause.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
                log.info("rocketmq: broker %s has no GET_TOPIC_STATS_INFO: max offsets per queue", addr)
                self._no_stats.add(queue.broker_name)
                return None
            raise
        return {st.message_queue.queue_id: st.max_offset for st in rows if st.message_queue.topic == t}

    def search_offset(self, queue: MessageQueue, addr: str, timestamp_ms: int) -> int:
        api, t, q, ms = self.api, queue.topic, queue.queue_id, self.timeout_ms
        what = f"SEARCH_OFFSET_BY_TIMESTAMP of {queue_text(queue)}"
        return self._broker_call(what, queue, addr, lambda a: api.search_offset(a, t, q, timestamp_ms, ms))

    def committed_offset(self, queue: MessageQueue, addr: str, group: str) -> int | None:
        api, t, q, ms = self.api, queue.topic, queue.queue_id, self.timeout_ms
        what = f"QUERY_CONSUMER_OFFSET of {queue_text(queue)}"
        return self._broker_call(what, queue, addr, lambda a: api.query_consumer_offset(a, group, t, q, ms))

    def commit_offset(self, queue: MessageQueue, addr: str, group: str, offset: int) -> None:
        """UPDATE_CONSUMER_OFFSET on the master, on a slave while the master is down (as Java's
        clients do; the master gets the offset again with the next commit once it is back)."""
        api, t, q = self.api, queue.topic, queue.queue_id
        what = f"UPDATE_CONSUMER_OFFSET of {queue_text(queue)}"
        self._broker_call(what, queue, addr, lambda a: api.update_consumer_offset(a, group, t, q, offset))

    # -- pulls -----------------------------------------------------------------------------

    def pull(
        self,
        queue: MessageQueue,
        addr: str,
        offset: int,
        *,
        group: str,
        max_nums: int,
        max_bytes: int,
        sub_expression: str,
        timeout_ms: int,
        expression_type: ExpressionType = ExpressionType.TAG,
    ) -> PullResult:
        """One PULL_MESSAGE without long polling; the broker applies the tag or SQL92 expression.

        Goes to ``addr`` (the planned replica) unless a previous answer for the queue suggested
        another broker id (``suggestWhichBrokerId``), and to another replica of the group when
        that one does not answer.
        """
        header = PullMessageRequestHeader(
            consumer_group=group,
            topic=queue.topic,
            queue_id=queue.queue_id,
            queue_offset=offset,
            max_msg_nums=max_nums,
            sys_flag=int(PullSysFlag.SUBSCRIPTION),
            commit_offset=0,
            suspend_timeout_millis=0,
            subscription=sub_expression,
            sub_version=0,
            expression_type=expression_type,
            max_msg_bytes=max_bytes,
        )
        api = self.api
        suggested = self._suggested.get(queue, MASTER_ID)
        what = f"PULL_MESSAGE of {queue_text(queue)} at offset {offset}"
        result = self._broker_call(
            what, queue, addr, lambda a: api.pull_message(a, header, timeout_ms), suggested
        )
        self._suggested[queue] = result.suggest_which_broker_id
        return result

    def check_sql92(self, queue: MessageQueue, addr: str, expression: str, *, group: str) -> None:
        """Fail with an OptionError naming ``sqlFilter`` when the broker of ``queue`` refuses the
        SQL92 ``expression`` (not compiled, or ``enablePropertyFilter`` is off).

        The probe pulls at the queue's max offset, so it transfers no message: the broker compiles
        the subscription before it looks at the queue.
        """
        offset = self.max_offset(queue, addr)
        try:
            self.pull(
                queue,
                addr,
                offset,
                group=group,
                max_nums=1,
                max_bytes=1024,
                sub_expression=expression,
                timeout_ms=self.timeout_ms,
                expression_type=ExpressionType.SQL92,
            )
        except BrokerUnavailableError as exc:
            if not isinstance(exc.__cause__, SubscriptionError):
                raise
            raise OptionError(
                "sqlFilter",
                f"broker {queue.broker_name} ({addr}) refused the SQL92 filter {expression!r}: "
                f"{exc.__cause__.remark or exc.__cause__}; SQL92 filtering needs enablePropertyFilter=true "
                "in the broker's configuration and an expression in RocketMQ's SQL92 grammar",
            ) from exc.__cause__

    def close(self) -> None:
        try:
            self.api.close()
        except RocketQError:
            pass


_EXECUTOR_CACHE: dict[tuple[int, str, ClientConfig | None, RetryPolicy], BrokerAccess] = {}
_EXECUTOR_LOCK = threading.Lock()


def executor_access(
    name_server: str, timeout_ms: int, client: ClientConfig | None = None, retry: RetryPolicy = NO_RETRY
) -> BrokerAccess:
    """The process-wide BrokerAccess for ``name_server`` (created on first use, per pid); its
    pulls are retried as ``retry`` says, so a broker restarting does not fail the task."""
    key = (os.getpid(), name_server, client, retry)
    with _EXECUTOR_LOCK:
        access = _EXECUTOR_CACHE.get(key)
        if access is None:
            access = BrokerAccess(name_server, timeout_ms=timeout_ms, client=client, retry=retry)
            _EXECUTOR_CACHE[key] = access
        return access
