"""The connector's view of the cluster: queue discovery, offsets and pulls over the client API.

:class:`BrokerAccess` wraps :class:`rocketq.client.api.BlockingMQClientAPI` with the few calls
the source and sink need, in the connector's vocabulary (:class:`QueueRef`), and turns "cannot
reach the NameServer" and "no such topic" into :class:`OptionError`\\ s naming the option, so a
misconfigured query fails at start with a clear message.

Driver-side readers keep one BrokerAccess for their lifetime (Spark never calls ``stop()``, and
the process is killed on query stop, so nothing needs closing).  Executors get theirs from
:func:`executor_access`, a per-process cache keyed by NameServer address that survives across
tasks and micro-batches (Python workers are reused) and is rebuilt after a fork.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING

from rocketq.client.errors import NameServerUnreachableError, NoRouteError, RocketQError
from rocketq.client.remoting.vocabulary import ExpressionType, PullSysFlag, is_internal_topic, is_readable
from rocketq.connector.errors import BrokerUnavailableError, OptionError
from rocketq.connector.offsets import QueueRef

if TYPE_CHECKING:
    from rocketq.client.api import BlockingMQClientAPI
    from rocketq.client.model import PullResult
    from rocketq.client.remoting.route import TopicRouteData



class BrokerAccess:
    """Blocking access to NameServer and brokers for one ``nameServer`` option value."""

    def __init__(self, name_server: str, *, timeout_ms: int = 10_000) -> None:
        from rocketq.client.api import BlockingMQClientAPI

        self.name_server = name_server
        self.timeout_ms = timeout_ms
        self.api: BlockingMQClientAPI = BlockingMQClientAPI(name_server)
        self._masters: dict[str, str] = {}

    # -- routes ----------------------------------------------------------------------------

    def route(self, topic: str, *, missing_ok: bool = False) -> TopicRouteData | None:
        try:
            return self.api.get_topic_route(topic, self.timeout_ms)
        except NameServerUnreachableError as exc:
            raise OptionError("nameServer", f"no NameServer of {self.name_server!r} answered ({exc})") from exc
        except NoRouteError as exc:
            if missing_ok:
                return None
            raise OptionError("topic", f"topic {topic!r} does not exist on NameServer {self.name_server}") from exc
        except RocketQError as exc:
            raise OptionError("nameServer", f"cannot get the route of {topic!r} from {self.name_server}: {exc}") from exc

    def read_queues(self, topic: str, *, missing_ok: bool = False) -> dict[QueueRef, str]:
        """Readable queues of ``topic`` with their master broker address."""
        route = self.route(topic, missing_ok=missing_ok)
        if route is None:
            return {}
        masters = {bd.broker_name: bd.broker_addrs.get(0) for bd in route.broker_datas}
        queues: dict[QueueRef, str] = {}
        for qd in route.queue_datas:
            addr = masters.get(qd.broker_name)
            if addr and is_readable(qd.perm):
                self._masters[qd.broker_name] = addr
                for queue_id in range(qd.read_queue_nums):
                    queues[QueueRef(topic, qd.broker_name, queue_id)] = addr
        return queues

    def topics_matching(self, pattern: str) -> list[str]:
        """Topics known to the NameServer that fully match ``pattern`` (system topics excluded)."""
        try:
            topics = self.api.get_all_topic_list(self.timeout_ms)
        except RocketQError as exc:
            raise OptionError("nameServer", f"cannot list topics on {self.name_server}: {exc}") from exc
        regex = re.compile(pattern)
        return sorted(t for t in topics if regex.fullmatch(t) and not is_internal_topic(t))

    def discover(self, topics: Iterable[str], pattern: str | None, *, missing_ok: bool) -> dict[QueueRef, str]:
        """All readable queues of the subscribed topics (``missing_ok`` tolerates deleted topics)."""
        names = self.topics_matching(pattern) if pattern is not None else list(topics)
        found: dict[QueueRef, str] = {}
        for topic in names:
            found.update(self.read_queues(topic, missing_ok=missing_ok or pattern is not None))
        return dict(sorted(found.items()))

    # -- offsets ---------------------------------------------------------------------------

    def _wrap(self, what: str, queue: QueueRef, exc: RocketQError) -> BrokerUnavailableError:
        return BrokerUnavailableError(f"{what} of {queue} failed: {exc}")

    def min_offset(self, queue: QueueRef, addr: str) -> int:
        try:
            return self.api.get_min_offset(addr, queue.topic, queue.queue_id, self.timeout_ms)
        except RocketQError as exc:
            raise self._wrap("GET_MIN_OFFSET", queue, exc) from exc

    def max_offset(self, queue: QueueRef, addr: str) -> int:
        try:
            return self.api.get_max_offset(addr, queue.topic, queue.queue_id, self.timeout_ms)
        except RocketQError as exc:
            raise self._wrap("GET_MAX_OFFSET", queue, exc) from exc

    def search_offset(self, queue: QueueRef, addr: str, timestamp_ms: int) -> int:
        try:
            return self.api.search_offset(addr, queue.topic, queue.queue_id, timestamp_ms, self.timeout_ms)
        except RocketQError as exc:
            raise self._wrap("SEARCH_OFFSET_BY_TIMESTAMP", queue, exc) from exc

    def committed_offset(self, queue: QueueRef, addr: str, group: str) -> int | None:
        try:
            return self.api.query_consumer_offset(addr, group, queue.topic, queue.queue_id, self.timeout_ms)
        except RocketQError as exc:
            raise self._wrap("QUERY_CONSUMER_OFFSET", queue, exc) from exc

    def commit_offset(self, queue: QueueRef, addr: str, group: str, offset: int) -> None:
        try:
            self.api.update_consumer_offset(addr, group, queue.topic, queue.queue_id, offset)
        except RocketQError as exc:
            raise self._wrap("UPDATE_CONSUMER_OFFSET", queue, exc) from exc

    # -- pulls -----------------------------------------------------------------------------

    def pull(
        self, queue: QueueRef, addr: str, offset: int, *, group: str, max_nums: int, max_bytes: int,
        sub_expression: str, timeout_ms: int,
    ) -> PullResult:
        """One PULL_MESSAGE without long polling; the broker applies the tag expression."""
        from rocketq.client.remoting.headers import PullMessageRequestHeader

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
            expression_type=ExpressionType.TAG,
            max_msg_bytes=max_bytes,
        )
        try:
            return self.api.pull_message(addr, header, timeout_ms)
        except RocketQError as exc:
            raise self._wrap(f"PULL_MESSAGE at offset {offset}", queue, exc) from exc

    def close(self) -> None:
        try:
            self.api.close()
        except RocketQError:
            pass


_EXECUTOR_CACHE: dict[tuple[int, str], BrokerAccess] = {}
_EXECUTOR_LOCK = threading.Lock()


def executor_access(name_server: str, timeout_ms: int) -> BrokerAccess:
    """The process-wide BrokerAccess for ``name_server`` (created on first use, per pid)."""
    key = (os.getpid(), name_server)
    with _EXECUTOR_LOCK:
        access = _EXECUTOR_CACHE.get(key)
        if access is None:
            access = _EXECUTOR_CACHE[key] = BrokerAccess(name_server, timeout_ms=timeout_ms)
        return access
