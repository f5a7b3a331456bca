"""Retries of the connector's look-ups and pulls, and max offsets asked once per broker.

The policy and the retry loop are tested alone (no sockets); BrokerAccess and the stream reader
against a real NameServer and broker, SIGKILLed and restarted on their ports.  Requests are
counted on the client side, at MQClientAPI.invoke.
"""

from __future__ import annotations

import pickle
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable

from rocketq.client.errors import RemotingConnectError, SubscriptionError
from rocketq.client.model import PullResult, PullStatus
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.vocabulary import MessageQueue
from rocketq.client.testing import create_topic, free_port, wait_for
from rocketq.client.testing.restartable import RestartableCluster
from rocketq.connector.access import BrokerAccess
from rocketq.connector.errors import (
    BrokerUnavailableError,
    NameServerUnavailableError,
    OptionError,
    RetriesExhaustedError,
)
from rocketq.connector.options import parse_source_options
from rocketq.connector.planning import QueueRange
from rocketq.connector.reader import read_range
from rocketq.connector.retry import (
    DEFAULT_NUM_RETRIES,
    DEFAULT_RETRY_INTERVAL_MS,
    MAX_BACKOFF_MS,
    RetryPolicy,
    call_with_retries,
)
from rocketq.connector.source import RocketMQStreamReader
from rocketq.connector.testing import SPARK_BROKER_CONF

TOPIC = "RetryT"
QUEUES = 8
#: enough for a broker restart and its registration on a loaded 2-core machine
PATIENT = RetryPolicy(num_retries=120, retry_interval_ms=100)


# -- the policy and the loop (no servers) ----------------------------------------------------


def test_backoff_doubles_from_the_interval_up_to_the_cap() -> None:
    policy = RetryPolicy(num_retries=6, retry_interval_ms=500)
    assert [policy.delay_ms(k) for k in range(6)] == [500, 1000, 2000, 4000, MAX_BACKOFF_MS, MAX_BACKOFF_MS]
    assert policy.budget_ms() == 17_500
    assert RetryPolicy(3, 8000).delay_ms(2) == 8000  # an interval above the cap is kept
    defaults = RetryPolicy()
    # the defaults ride through a broker bounce of 10-15 s and a NameServer restart (docs)
    assert 40_000 <= defaults.budget_ms() <= 60_000
    assert defaults == RetryPolicy(DEFAULT_NUM_RETRIES, DEFAULT_RETRY_INTERVAL_MS)


def test_options_set_the_policy_and_bad_values_name_the_option() -> None:
    base = {"nameServer": "127.0.0.1:9876", "topic": TOPIC}
    assert parse_source_options(base).retry == RetryPolicy()
    opts = parse_source_options({**base, "fetchOffset.numRetries": "0", "FETCHOFFSET.RETRYINTERVALMS": "250"})
    assert opts.retry == RetryPolicy(0, 250)
    for key, value in [("fetchOffset.numRetries", "three"), ("fetchOffset.retryIntervalMs", "-5")]:
        with pytest.raises(OptionError) as info:
            parse_source_options({**base, key: value})
        assert info.value.option == key
    with pytest.raises(OptionError) as info:
        parse_source_options({**base, "fetchOffset.retryIntervalMs": str(10**9)})
    assert info.value.option == "fetchOffset.retryIntervalMs"


@dataclass
class Script:
    """An attempt that fails ``failures`` times with ``error`` before answering 42."""

    failures: int
    error: Exception
    calls: int = 0

    def __call__(self) -> int:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return 42


def test_retriable_failures_are_retried_with_backoff_and_a_refresh_between() -> None:
    slept: list[float] = []
    refreshed: list[int] = []
    attempt = Script(3, RemotingConnectError("connect refused"))
    policy = RetryPolicy(5, 100)
    result = call_with_retries(
        policy, "GET_MAX_OFFSET", lambda: "broker-a", attempt, before_retry=lambda: refreshed.append(1),
        sleep=slept.append,
    )  # fmt: skip
    assert result == 42 and attempt.calls == 4
    assert slept == [0.1, 0.2, 0.4] and len(refreshed) == 3


def test_a_failure_no_retry_can_cure_is_raised_at_once() -> None:
    slept: list[float] = []
    refused = BrokerUnavailableError("bad filter", retriable=False)
    refused.__cause__ = SubscriptionError(23, "parse failed")
    attempt = Script(1, refused)
    with pytest.raises(BrokerUnavailableError) as info:
        call_with_retries(RetryPolicy(5, 100), "PULL_MESSAGE", lambda: "b", attempt, sleep=slept.append)
    assert info.value is refused and attempt.calls == 1 and slept == []
    with pytest.raises(OptionError):  # an option error is never retried either
        call_with_retries(RetryPolicy(5, 100), "x", lambda: "b", Script(1, OptionError("topic", "no")))


def test_a_spent_budget_names_what_where_how_long_and_the_options() -> None:
    clock = iter(range(0, 100, 3))
    attempt = Script(99, RemotingConnectError("connect refused"))
    with pytest.raises(RetriesExhaustedError) as info:
        call_with_retries(
            RetryPolicy(2, 10), "GET_MAX_OFFSET of RetryT/broker-a:3",
            lambda: "broker broker-a (127.0.0.1:1)", attempt, sleep=lambda s: None,
            clock=lambda: float(next(clock)),
        )  # fmt: skip
    err = info.value
    assert attempt.calls == 3 and err.attempts == 3 and err.elapsed_s == 3.0
    text = str(err)
    for part in ("GET_MAX_OFFSET of RetryT/broker-a:3", "broker broker-a (127.0.0.1:1)", "3 times", "3.0 s",
                 "fetchOffset.numRetries=2", "fetchOffset.retryIntervalMs=10"):  # fmt: skip
        assert part in text, text
    assert isinstance(err.__cause__, RemotingConnectError)
    assert isinstance(err, BrokerUnavailableError) and not err.retriable
    copy = pickle.loads(pickle.dumps(err))
    assert str(copy) == text and copy.attempts == 3 and not copy.retriable


# -- against real processes ------------------------------------------------------------------


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[RestartableCluster]:
    s = RestartableCluster(tmp_path, SPARK_BROKER_CONF)
    try:
        create_topic(s.namesrv_addr, TOPIC, QUEUES, broker_addr=s.broker_addr)
        yield s
    finally:
        print(s.close())  # shown when the test failed


def counted(
    access: BrokerAccess, answer: Callable[[RemotingCommand], RemotingCommand | None] | None = None
) -> Counter[int]:
    """Count the requests ``access`` sends, by request code (``answer`` may answer one itself)."""
    counts: Counter[int] = Counter()
    api = access.api.api
    real = api.invoke

    async def invoke(addr: str, cmd: RemotingCommand, timeout_ms: int | None = None) -> RemotingCommand:
        counts[cmd.code] += 1
        canned = answer(cmd) if answer is not None else None
        return canned if canned is not None else await real(addr, cmd, timeout_ms)

    api.invoke = invoke  # type: ignore[method-assign]
    return counts


def send(ns_addr: str, n: int) -> None:
    from rocketq.client.model import Message
    from rocketq.client.producer import Producer

    with Producer(ns_addr, producer_group="retry-test") as producer:
        for i in range(n):
            producer.send(Message(TOPIC, f"m{i}".encode()))


def stream_reader(ns_addr: str) -> RocketMQStreamReader:
    opts = parse_source_options(
        {"nameServer": ns_addr, "topic": TOPIC, "startingOffsets": "earliest", "commitOffsets": "false"}
    )
    return RocketMQStreamReader(opts)


def test_a_trigger_asks_max_offsets_once_per_broker(servers: RestartableCluster) -> None:
    send(servers.namesrv_addr, 40)
    reader = stream_reader(servers.namesrv_addr)
    start = reader.initialOffset()
    all_in = reader.access.read_queues(TOPIC)
    wait_for(lambda: sum(reader.access.max_offsets(all_in).values()) == 40, "40 messages dispatched", 30)
    counts = counted(reader.access)
    for _ in range(2):  # two triggers
        end = reader.latestOffset(start, ReadAllAvailable())
    assert counts[RequestCode.GET_TOPIC_STATS_INFO] == 2  # one broker: one request per trigger
    assert counts[RequestCode.GET_MAX_OFFSET] == 0
    queues = reader.access.read_queues(TOPIC)
    assert len(queues) == QUEUES
    per_queue = {q.key: reader.access.max_offset(q, a) for q, a in queues.items()}
    assert end[TOPIC] == per_queue and sum(per_queue.values()) == 40


def test_a_broker_without_topic_stats_is_asked_per_queue(servers: RestartableCluster) -> None:
    send(servers.namesrv_addr, 10)
    reader = stream_reader(servers.namesrv_addr)
    start = reader.initialOffset()
    all_in = reader.access.read_queues(TOPIC)
    wait_for(lambda: sum(reader.access.max_offsets(all_in).values()) == 10, "10 messages dispatched", 30)

    def unsupported(cmd: RemotingCommand) -> RemotingCommand | None:
        if cmd.code != RequestCode.GET_TOPIC_STATS_INFO:
            return None
        return cmd.make_response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, "request type 202 not supported")

    counts = counted(reader.access, unsupported)
    first = reader.latestOffset(start, ReadAllAvailable())
    assert counts[RequestCode.GET_TOPIC_STATS_INFO] == 1 and counts[RequestCode.GET_MAX_OFFSET] == QUEUES
    second = reader.latestOffset(start, ReadAllAvailable())
    assert counts[RequestCode.GET_TOPIC_STATS_INFO] == 1  # not asked again
    assert counts[RequestCode.GET_MAX_OFFSET] == 2 * QUEUES
    assert first == second and sum(first[TOPIC].values()) == 10


def test_look_ups_and_pulls_ride_through_a_broker_restart(servers: RestartableCluster) -> None:
    send(servers.namesrv_addr, 16)
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        time.sleep(s)

    access = BrokerAccess(servers.namesrv_addr, timeout_ms=3000, retry=PATIENT, sleep=sleep)
    try:
        queues = access.read_queues(TOPIC)
        # the ConsumeQueues are written behind the CommitLog: wait until every message is in one
        wait_for(lambda: sum(access.max_offsets(queues).values()) == 16, "16 messages dispatched", 30)
        before = access.max_offsets(queues)
        servers.broker.kill9()
        restart = servers.restart_later("broker", 1.5)
        # the NameServer dropped the broker: the route lacks it until it registers again
        assert access.read_queues(TOPIC, missing_ok=True) == queues
        assert access.max_offsets(queues) == before
        restart.join(150)
        queue = next(q for q in sorted(queues) if before[q] > 0)
        servers.broker.kill9()  # again, now under a pull
        restart = servers.restart_later("broker", 1.0)
        res = access.pull(
            queue, queues[queue], 0, group="retry-test", max_nums=32, max_bytes=1 << 20, sub_expression="*",
            timeout_ms=3000,
        )  # fmt: skip
        restart.join(150)
        assert res.status is PullStatus.FOUND and len(list(res.messages)) == before[queue]
        assert slept, "the broker was down: something had to be retried"
    finally:
        access.close()


def test_a_name_server_gone_mid_stream_is_an_outage_not_an_option_error(servers: RestartableCluster) -> None:
    access = BrokerAccess(servers.namesrv_addr, timeout_ms=2000, retry=RetryPolicy(2, 50))
    try:
        queues = access.read_queues(TOPIC)
        servers.namesrv.kill9()
        with pytest.raises(RetriesExhaustedError) as info:
            access.read_queues(TOPIC, missing_ok=True)
        assert not isinstance(info.value, OptionError)
        assert isinstance(info.value.__cause__, NameServerUnavailableError)
        text = str(info.value)
        assert f"NameServer {servers.namesrv_addr}" in text and "fetchOffset.numRetries" in text
        # restarted: empty until the broker registers again (registerNameServerPeriod), then back
        servers.start_namesrv()
        access.retry = PATIENT
        assert access.read_queues(TOPIC, missing_ok=True) == queues
    finally:
        access.close()


def test_before_the_first_route_name_server_trouble_is_an_option_error() -> None:
    access = BrokerAccess(f"127.0.0.1:{free_port()}", timeout_ms=1000, retry=RetryPolicy(3, 10))
    try:
        with pytest.raises(OptionError) as info:
            access.read_queues(TOPIC, missing_ok=True)
        assert info.value.option == "nameServer"
    finally:
        access.close()


def test_the_topic_missing_at_start_names_the_topic_option(servers: RestartableCluster) -> None:
    access = BrokerAccess(servers.namesrv_addr, timeout_ms=2000, retry=RetryPolicy(3, 10))
    try:
        with pytest.raises(OptionError) as info:
            access.read_queues("NoSuchTopicHere")
        assert info.value.option == "topic"
        assert MessageQueue(TOPIC, servers.broker_name, 0) in access.read_queues(TOPIC)
    finally:
        access.close()


# -- an executor reading a slave that lags its (down) master -------------------------------------


class SlaveAccess:
    """What read_range asks of BrokerAccess while a slave serves the queue."""

    def __init__(self) -> None:
        self.refreshed = 0

    def served_by_slave(self, queue: MessageQueue) -> bool:
        return True

    def refresh_route(self, topic: str) -> None:
        self.refreshed += 1


class LaggingSlave:
    """Pull answers of a slave that has nothing at the offset ``lagging`` times, then the rest."""

    def __init__(self, lagging: int, end: int) -> None:
        self.access = SlaveAccess()
        self.lagging, self.end = lagging, end
        self.asked: list[int] = []

    def pull(self, r: QueueRange, offset: int) -> PullResult:
        self.asked.append(offset)
        behind = len(self.asked) <= self.lagging
        return PullResult(PullStatus.NO_MATCHED_MSG, offset if behind else self.end, 0, offset)

    def prefetch(self, r: QueueRange, offset: int) -> None:
        pass


def test_a_task_waits_for_a_lagging_slave_within_the_budget_then_fails() -> None:
    r = QueueRange(TOPIC, "b", 0, "127.0.0.1:1", 2, 9)
    opts = parse_source_options(
        {
            "nameServer": "127.0.0.1:9876",
            "topic": TOPIC,
            "fetchOffset.numRetries": "3",
            "fetchOffset.retryIntervalMs": "0",
        }
    )
    slave = LaggingSlave(lagging=3, end=9)
    assert list(read_range(slave, opts, r)) == []  # type: ignore[arg-type]
    assert slave.asked == [2, 2, 2, 2] and slave.access.refreshed == 3  # the route fetched again each time
    slave = LaggingSlave(lagging=4, end=9)
    with pytest.raises(BrokerUnavailableError, match="the rest is on the master"):
        list(read_range(slave, opts, r))  # type: ignore[arg-type]
    assert slave.asked == [2, 2, 2, 2]
