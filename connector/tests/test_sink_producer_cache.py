"""The sink's process-wide producers never hand back a stale producer.

A Python worker is reused across tasks and micro-batches, so the started producer the sink keeps
per worker (``writer.sink_producer``, at-least-once; ``transactional.executor_producer``,
exactly-once) outlives one write.  It must be the same producer for the same settings and a new
one as soon as anything it was built with changes: the NameServer, the producer group (the sink id
for exactly-once), a :class:`~rocketq.client.config.ClientConfig` field (ACL credentials, TLS), the
trace settings, the check listener's timeout (exactly-once), or the process (after a fork the
parent's producer is not used).  Settings are made by the sink's own option parser, so the tests
follow what users set; the producers are fakes that record how they were built.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from rocketq.connector import transactional, writer
from rocketq.connector.sink_options import SinkOptions, parse_sink_options
from rocketq.connector.transactional import CheckResolver, ExactlyOnceStrategy, WriteIdentity
from rocketq.connector.writer import AtLeastOnceStrategy

BASE = {"nameServer": "127.0.0.1:9876", "topic": "T"}
EOS = {**BASE, "deliveryGuarantee": "exactlyOnce", "transactionalId": "eos-cache"}

#: option changes that must give a new producer, with what the new producer must be built with
CHANGES: list[tuple[str, dict[str, str]]] = [
    ("nameServer", {"nameServer": "127.0.0.2:9876"}),
    ("credentials", {"accessKey": "ak-1", "secretKey": "sk-1"}),
    ("secretKey", {"accessKey": "ak-1", "secretKey": "sk-2"}),
    ("securityToken", {"accessKey": "ak-1", "secretKey": "sk-1", "securityToken": "tok"}),
    ("tls", {"tls": "true"}),
    ("enableMsgTrace", {"enableMsgTrace": "true"}),
    ("traceTopic", {"enableMsgTrace": "true", "traceTopic": "MyTrace"}),
]


class FakeProducer:
    """Records its settings and its starts; shared by both fakes."""

    made: list[FakeProducer] = []

    def __init__(self, name_server: str, **settings: Any) -> None:
        self.name_server = name_server
        self.settings = settings
        self.starts = 0
        FakeProducer.made.append(self)

    def start(self) -> None:
        self.starts += 1

    shutdowns = 0

    def shutdown(self) -> None:
        self.shutdowns += 1


class FakeTransactionProducer(FakeProducer):
    pass


@pytest.fixture(autouse=True)
def fakes(monkeypatch: pytest.MonkeyPatch) -> list[FakeProducer]:
    """Fake producers, and empty process-wide caches that are put back after the test."""
    made: list[FakeProducer] = []
    monkeypatch.setattr(FakeProducer, "made", made)
    monkeypatch.setattr("rocketq.client.producer.Producer", FakeProducer)
    monkeypatch.setattr("rocketq.client.producer.TransactionProducer", FakeTransactionProducer)
    monkeypatch.setattr(writer, "_PRODUCERS", OrderedDict())
    monkeypatch.setattr(transactional, "_PRODUCERS", {})
    return made


def opts(options: Mapping[str, str]) -> SinkOptions:
    return parse_sink_options(dict(options))  # a fresh parse: equal settings, new objects


def plain(options: Mapping[str, str]) -> FakeProducer:
    producer: Any = AtLeastOnceStrategy(opts(options)).producer
    assert isinstance(producer, FakeProducer)
    return producer


def eos(options: Mapping[str, str]) -> FakeTransactionProducer:
    parsed = opts(options)
    assert parsed.sink_id is not None
    ident = WriteIdentity(parsed.sink_id, "batch-0", "w" * 8, 0, 0)
    producer: Any = ExactlyOnceStrategy(parsed, ident).producer
    assert isinstance(producer, FakeTransactionProducer)
    return producer


# -- at-least-once: writer.sink_producer -----------------------------------------------------------


def test_same_settings_reuse_one_started_producer(fakes: list[FakeProducer]) -> None:
    first = plain(BASE)
    # options the producer is not built with (per-send timeout, retries, batching, topic) keep it
    again = plain({**BASE, "topic": "Other", "sendRetries": "5", "sendTimeoutMs": "9000",
                   "batchMaxMessages": "8", "maxInflightQueues": "2"})  # fmt: skip
    assert again is first and plain(BASE) is first
    assert fakes == [first] and first.starts == 1
    assert first.name_server == BASE["nameServer"]
    assert first.settings["producer_group"] == "spark-rocketmq-sink"


@pytest.mark.parametrize(("what", "change"), CHANGES, ids=[what for what, _ in CHANGES])
def test_a_changed_setting_gets_a_new_producer(
    fakes: list[FakeProducer], what: str, change: dict[str, str]
) -> None:
    first = plain(BASE)
    changed = opts({**BASE, **change})
    second = plain({**BASE, **change})
    assert second is not first and second.starts == 1
    assert second.name_server == changed.name_server
    assert second.settings["client"] == changed.client
    assert (second.settings["enable_msg_trace"], second.settings["custom_trace_topic"]) == changed.trace
    # both stay cached: going back gives the first one again, the changed one is kept too
    assert plain(BASE) is first and plain({**BASE, **change}) is second
    assert len(fakes) == 2


def test_a_changed_producer_group_gets_a_new_producer(fakes: list[FakeProducer]) -> None:
    first = plain({**BASE, "producerGroup": "g1"})
    second = plain({**BASE, "producerGroup": "g2"})
    assert second is not first
    assert [p.settings["producer_group"] for p in fakes] == ["g1", "g2"]


@pytest.mark.parametrize(
    ("get", "options"), [(plain, BASE), (eos, EOS)], ids=["at-least-once", "exactly-once"]
)
def test_another_process_gets_its_own_producer(
    fakes: list[FakeProducer],
    monkeypatch: pytest.MonkeyPatch,
    get: Callable[[Mapping[str, str]], FakeProducer],
    options: Mapping[str, str],
) -> None:
    """After a fork the child sees the parent's cache, but not under its own pid."""
    import os

    parent = get(options)
    monkeypatch.setattr(os, "getpid", lambda: 1_000_001)
    child = get(options)
    assert child is not parent and child.starts == 1
    assert get(options) is child
    assert len(fakes) == 2


def test_at_most_max_cached_producers_the_least_recently_used_shut_down(
    fakes: list[FakeProducer],
) -> None:
    """A worker that ran many sinks keeps the last MAX_CACHED_PRODUCERS producers; the least
    recently used beyond that is shut down, and asked for again it is built anew."""
    limit = writer.MAX_CACHED_PRODUCERS
    made = [plain({**BASE, "producerGroup": f"g{i}"}) for i in range(limit)]
    assert plain({**BASE, "producerGroup": "g0"}) is made[0]  # used again: now the most recent
    extra = plain({**BASE, "producerGroup": "extra"})
    assert [p.shutdowns for p in made] == [0, 1] + [0] * (limit - 2)  # g1 was the least recent
    assert extra.shutdowns == 0 and len(writer._PRODUCERS) == limit
    again = plain({**BASE, "producerGroup": "g1"})
    assert again is not made[1] and again.starts == 1
    assert made[2].shutdowns == 1  # the next least recent made room for it


@pytest.mark.parametrize(
    ("module", "get", "options"),
    [(writer, plain, BASE), (transactional, eos, EOS)],
    ids=["at-least-once", "exactly-once"],
)
def test_a_forked_child_is_not_blocked_by_a_lock_held_at_the_fork(
    fakes: list[FakeProducer],
    module: Any,
    get: Callable[[Mapping[str, str]], FakeProducer],
    options: Mapping[str, str],
) -> None:
    """A thread of the parent holding the cache's lock at the fork must not leave the child's
    first write waiting for ever: the child gets a fresh lock (and its own producer)."""
    import os
    import time

    parent = get(options)
    with module._PRODUCERS_LOCK:
        pid = os.fork()
        if pid == 0:  # the child: exit 0 if it got its own producer
            try:
                code = 0 if get(options) is not parent else 3
            except BaseException:
                code = 4
            os._exit(code)
    deadline = time.monotonic() + 20
    status = None
    while status is None and time.monotonic() < deadline:
        done, raw = os.waitpid(pid, os.WNOHANG)
        status = raw if done else None
        time.sleep(0.02)
    if status is None:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        pytest.fail("the forked child waited for the cache lock its parent held at the fork")
    assert os.waitstatus_to_exitcode(status) == 0


# -- exactly-once: transactional.executor_producer ---------------------------------------------------


def resolver(producer: FakeProducer) -> CheckResolver:
    listener = producer.settings["check_listener"]
    assert isinstance(listener, CheckResolver)
    return listener


def test_eos_same_settings_reuse_one_started_producer(fakes: list[FakeProducer]) -> None:
    first = eos(EOS)
    again = eos({**EOS, "topic": "Other", "sendRetries": "5", "commitTimeoutMs": "20000"})
    assert again is first and eos(EOS) is first
    assert fakes == [first] and first.starts == 1
    assert first.settings["producer_group"] == "rq-eos-eos-cache"
    assert resolver(first).name_server == EOS["nameServer"]


@pytest.mark.parametrize(("what", "change"), CHANGES, ids=[what for what, _ in CHANGES])
def test_eos_a_changed_setting_gets_a_new_producer(
    fakes: list[FakeProducer], what: str, change: dict[str, str]
) -> None:
    first = eos(EOS)
    changed = opts({**EOS, **change})
    second = eos({**EOS, **change})
    assert second is not first and second.starts == 1
    assert second.name_server == changed.name_server
    assert second.settings["client"] == changed.client
    assert (second.settings["enable_msg_trace"], second.settings["custom_trace_topic"]) == changed.trace
    # the check listener answers check-backs with the new settings too
    assert (resolver(second).name_server, resolver(second).client) == (changed.name_server, changed.client)
    assert eos(EOS) is first and eos({**EOS, **change}) is second
    assert len(fakes) == 2


def test_eos_another_sink_gets_its_own_producer(fakes: list[FakeProducer]) -> None:
    first = eos(EOS)
    second = eos({**EOS, "transactionalId": "eos-cache-2"})
    assert second is not first
    assert [p.settings["producer_group"] for p in fakes] == ["rq-eos-eos-cache", "rq-eos-eos-cache-2"]


def test_eos_a_changed_send_timeout_reaches_the_check_listener(fakes: list[FakeProducer]) -> None:
    """The check listener reads the commit log with ``sendTimeoutMs``: a cached producer built with
    another timeout would answer check-backs with the old one."""
    first = eos({**EOS, "sendTimeoutMs": "3000"})
    second = eos({**EOS, "sendTimeoutMs": "9000"})
    assert second is not first
    assert [resolver(p).timeout_ms for p in fakes] == [3000, 9000]
    assert eos({**EOS, "sendTimeoutMs": "3000"}) is first
