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
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Callable, Iterable
from typing import TypeVar

from rocketq.client.api import BlockingMQClientAPI
from rocketq.client.config import ClientConfig
from rocketq.client.errors import (
    NameServerUnreachableError,
    NoRouteError,
    RocketQError,
    SubscriptionError,
)
from rocketq.client.instance import FindBrokerResult
from rocketq.client.model import PullResult
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
from rocketq.connector.errors import BrokerUnavailableError, OptionError
from rocketq.connector.offsets import queue_text

log = logging.getLogger("rocketq.connector")
_T = TypeVar("_T")

# a replica that failed at the transport level is passed over for this long (the client's default)
UNREACHABLE_BACKOFF_MS = DEFAULT_UNREACHABLE_BACKOFF_MS


class BrokerAccess:
    """Blocking access to NameServer and brokers for one ``nameServer`` option value."""

    def __init__(
        self, name_server: str, *, timeout_ms: int = 10_000, client: ClientConfig | None = None
    ) -> None:
        self.name_server = name_server
        self.timeout_ms = timeout_ms
        self.api = BlockingMQClientAPI(name_server, config=client)
        self.replicas = BlockingReplicaReads(
            self.api, timeout_ms=timeout_ms, unreachable_backoff_ms=UNREACHABLE_BACKOFF_MS
        )
        self._suggested: dict[MessageQueue, int] = {}  # the last suggestWhichBrokerId per queue
        self._served_by: dict[MessageQueue, int] = {}  # the broker id that answered the last read

    # -- routes ----------------------------------------------------------------------------

    def route(self, topic: str, *, missing_ok: bool = False) -> TopicRouteData | None:
        try:
            return self.api.get_topic_route(topic, self.timeout_ms)
        except NameServerUnreachableError as exc:
            raise OptionError(
                "nameServer", f"no NameServer of {self.name_server!r} answered ({exc})"
            ) from exc
        except NoRouteError as exc:
            if missing_ok:
                return None
            raise OptionError(
                "topic", f"topic {topic!r} does not exist on NameServer {self.name_server}"
            ) from exc
        except RocketQError as exc:
            raise OptionError(
                "nameServer", f"cannot get the route of {topic!r} from {self.name_server}: {exc}"
            ) from exc

    def read_queues(self, topic: str, *, missing_ok: bool = False) -> dict[MessageQueue, str]:
        """Readable queues of ``topic`` with the address to read them from: the master, or a
        slave of the group while the master is absent from the route or does not answer."""
        route = self.route(topic, missing_ok=missing_ok)
        if route is None:
            return {}
        self.replicas.learn(route)
        queues: dict[MessageQueue, str] = {}
        for qd in route.queue_datas:
            found = self.replicas.find_broker_in_subscribe(qd.broker_name)
            if found is not None and is_readable(qd.perm):
                for queue_id in range(qd.read_queue_nums):
                    queues[MessageQueue(topic, qd.broker_name, queue_id)] = found.broker_addr
        return queues

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
            raise self._wrap(what, queue, exc) from exc

    def served_by_slave(self, queue: MessageQueue) -> bool:
        """Whether the last read of ``queue`` was answered by a slave (its master is down)."""
        return self._served_by.get(queue, MASTER_ID) != MASTER_ID

    def topics_matching(self, pattern: str) -> list[str]:
        """Topics known to the NameServer that fully match ``pattern`` (system topics excluded)."""
        try:
            topics = self.api.get_all_topic_list(self.timeout_ms)
        except RocketQError as exc:
            raise OptionError("nameServer", f"cannot list topics on {self.name_server}: {exc}") from exc
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

    def _wrap(self, what: str, queue: MessageQueue, exc: RocketQError) -> BrokerUnavailableError:
        return BrokerUnavailableError(f"{what} of {queue_text(queue)} failed: {exc}")

    def min_offset(self, queue: MessageQueue, addr: str) -> int:
        api, t, q, ms = self.api, queue.topic, queue.queue_id, self.timeout_ms
        return self._on_replica("GET_MIN_OFFSET", queue, addr, lambda a: api.get_min_offset(a, t, q, ms))

    def max_offset(self, queue: MessageQueue, addr: str) -> int:
        api, t, q, ms = self.api, queue.topic, queue.queue_id, self.timeout_ms
        return self._on_replica("GET_MAX_OFFSET", queue, addr, lambda a: api.get_max_offset(a, t, q, ms))

    def search_offset(self, queue: MessageQueue, addr: str, timestamp_ms: int) -> int:
        api, t, q, ms = self.api, queue.topic, queue.queue_id, self.timeout_ms
        return self._on_replica(
            "SEARCH_OFFSET_BY_TIMESTAMP", queue, addr, lambda a: api.search_offset(a, t, q, timestamp_ms, ms)
        )

    def committed_offset(self, queue: MessageQueue, addr: str, group: str) -> int | None:
        api, t, q, ms = self.api, queue.topic, queue.queue_id, self.timeout_ms
        return self._on_replica(
            "QUERY_CONSUMER_OFFSET", queue, addr, lambda a: api.query_consumer_offset(a, group, t, q, ms)
        )

    def commit_offset(self, queue: MessageQueue, addr: str, group: str, offset: int) -> None:
        """UPDATE_CONSUMER_OFFSET on the master, on a slave while the master is down (as Java's
        clients do; the master gets the offset again with the next commit once it is back)."""
        api, t, q = self.api, queue.topic, queue.queue_id
        what = "UPDATE_CONSUMER_OFFSET"
        self._on_replica(what, queue, addr, lambda a: api.update_consumer_offset(a, group, t, q, offset))

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
        what = f"PULL_MESSAGE at offset {offset}"
        result = self._on_replica(
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


_EXECUTOR_CACHE: dict[tuple[int, str, ClientConfig | None], BrokerAccess] = {}
_EXECUTOR_LOCK = threading.Lock()


def executor_access(name_server: str, timeout_ms: int, client: ClientConfig | None = None) -> BrokerAccess:
    """The process-wide BrokerAccess for ``name_server`` (created on first use, per pid)."""
    key = (os.getpid(), name_server, client)
    with _EXECUTOR_LOCK:
        access = _EXECUTOR_CACHE.get(key)
        if access is None:
            access = _EXECUTOR_CACHE[key] = BrokerAccess(name_server, timeout_ms=timeout_ms, client=client)
        return access
