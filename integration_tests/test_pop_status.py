"""``mqadmin popStatus`` against real processes: in-flight POP messages, then the retry backlog.

A SimpleConsumer pops 5 messages and acks 2: popStatus shows 3 in flight.  After their invisible
time the revive service puts the 3 into the POP retry topic: popStatus shows them as the retry
topic's backlog and nothing in flight; popping them again moves them to the retry topic's in-flight.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketq.client.admin import Admin
from rocketq.client.consumer import SimpleConsumer
from rocketq.client.model import Message, MessageExt
from rocketq.client.producer import Producer
from rocketq.client.remoting.pop import ConsumeInitMode
from rocketq.client.testing import ServerProcess, create_topic, run_mqadmin, spawn_broker, spawn_namesrv
from rocketq.client.testing.wait import wait_value

TOPIC, GROUP = "pop-status", "pop-status-g"
RETRY = f"%RETRY%{GROUP}_{TOPIC}"


@pytest.fixture
def namesrv_proc(tmp_path: Path) -> Iterator[ServerProcess]:
    with spawn_namesrv(tmp_path / "ns") as ns:
        yield ns


def receive(
    consumer: SimpleConsumer, want: int, invisible_s: float, timeout_s: float = 30
) -> list[MessageExt]:
    got: list[MessageExt] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < want and time.monotonic() < deadline:
        got.extend(consumer.receive(want - len(got), invisible_s))
    return got


def totals(ns: str) -> tuple[int, int, str]:
    done = run_mqadmin("popStatus", "-n", ns, "-g", GROUP, "-t", TOPIC)
    assert done.returncode == 0, done.stderr
    in_flight = re.search(r"InFlight Total: (\d+)", done.stdout)
    backlog = re.search(r"Retry Backlog Total: (\d+)", done.stdout)
    assert in_flight and backlog, done.stdout
    return int(in_flight.group(1)), int(backlog.group(1)), done.stdout


def test_pop_status_shows_in_flight_then_retry_backlog(tmp_path: Path, namesrv_proc: ServerProcess) -> None:
    ns = namesrv_proc.addr
    with spawn_broker(tmp_path, ns, brokerName="broker-a", reviveInterval=200):
        create_topic(ns, TOPIC, 2)
        with Producer(ns, producer_group="pg-status") as producer:
            for i in range(5):
                producer.send(Message(TOPIC, f"m{i}".encode()))
        settings = {"await_duration_s": 1.0, "init_mode": ConsumeInitMode.MIN}
        with SimpleConsumer(ns, GROUP, {TOPIC: "*"}, **settings) as consumer:
            first = receive(consumer, 5, invisible_s=4)
            assert len(first) == 5
            for m in first[:2]:
                consumer.ack(m)
            in_flight, backlog, text = totals(ns)
            assert (in_flight, backlog) == (3, 0), text
            assert re.search(rf"^{TOPIC}\s+broker-a\s+3\s", text, re.M), text

            # after 4 s the 3 un-acked ones are revived into the POP retry topic
            def revived() -> tuple[int, int, str] | None:
                figures = totals(ns)
                return figures if figures[:2] == (0, 3) else None

            _, _, text = wait_value(revived, "3 messages revived into the retry topic", 30)
            assert RETRY in text, text
            with Admin(ns) as admin:
                (answer,) = admin.pop_status(GROUP, TOPIC)
            assert answer.status is not None
            (row,) = answer.status.topics
            assert [(r.topic, r.backlog, r.in_flight) for r in row.retry_topics] == [(RETRY, 3, 0)]

            again = receive(consumer, 3, invisible_s=60)
            assert sorted(m.body for m in again) == sorted(m.body for m in first[2:])
            in_flight, backlog, text = totals(ns)
            assert (in_flight, backlog) == (3, 0), text  # now in flight from the retry topic
            for m in again:
                consumer.ack(m)
            assert totals(ns)[:2] == (0, 0)
