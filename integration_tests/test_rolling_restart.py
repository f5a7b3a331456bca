"""Rolling restart: one broker of a two-group cluster stopped with ``mqshutdown`` and started again
while a producer with retries sends at a steady pace.

The application sees no failed send and every acknowledged message is read back afterwards; the
stopped broker exits 0 and has left the NameServer's route by the time it exited (it unregistered:
the NameServer did not wait for its 120 s broker timeout).  ``mqshutdown namesrv`` stops a
NameServer with exit status 0, and a broker that is stopping answers sends SERVICE_NOT_AVAILABLE.
The figures (sends acknowledged and failed, the slowest send, SIGTERM to exit) are printed for
docs/operations.md.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from rocketq.client.admin import Admin
from rocketq.client.config import ClientConfig, ConsumeFromWhere
from rocketq.client.consumer import LitePullConsumer
from rocketq.client.errors import NoRouteError, RocketQError
from rocketq.client.model import Message, SendStatus
from rocketq.client.producer import Producer
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.vocabulary import Perm
from rocketq.client.testing import (
    create_topic,
    drain,
    free_port,
    run_mqadmin,
    send_header,
    spawn_broker,
    spawn_namesrv,
    wait_for,
)
from rocketq.client.transport.blocking import BlockingRemotingClient
from rocketq.tools.shutdown import find_processes

TOPIC = "RollingRestart"
SMALL: dict[str, Any] = {
    "mappedFileSizeCommitLog": 16 << 20,
    "mappedFileSizeConsumeQueue": 20 * 20_000,
    "maxHashSlotNum": 2000,
    "maxIndexNum": 8000,
}
SEND_INTERVAL_S = 0.01
POLL_NAME_SERVER_INTERVAL_MS = 1000  # RocketMQ's default is 30 s: the drain waits that long


@dataclass
class SendLog:
    acked: dict[str, bytes] = field(default_factory=dict)  # msg id -> body
    acked_at: list[tuple[float, str]] = field(default_factory=list)  # (monotonic time, broker name)
    failed: list[str] = field(default_factory=list)
    slowest_s: float = 0.0
    stop: threading.Event = field(default_factory=threading.Event)


def _send_steadily(producer: Producer, log: SendLog) -> None:
    i = 0
    while not log.stop.is_set() and i < 100_000:
        body = f"m{i}".encode()
        began = time.monotonic()
        try:
            result = producer.send(Message(TOPIC, body))
        except RocketQError as exc:
            log.failed.append(f"{body!r}: {exc}")
        else:
            if result.send_status is SendStatus.SEND_OK:
                log.acked[result.msg_id] = body
                log.acked_at.append((time.monotonic(), result.message_queue.broker_name))
            else:
                log.failed.append(f"{body!r}: {result.send_status}")
        log.slowest_s = max(log.slowest_s, time.monotonic() - began)
        i += 1
        time.sleep(SEND_INTERVAL_S)


def _route_brokers(ns_addr: str, *, writable: bool = False) -> set[str]:
    with Admin(ns_addr) as admin:
        try:
            route = admin.topic_route(TOPIC)
        except NoRouteError:
            return set()
    names = {bd.broker_name for bd in route.broker_datas}
    if writable:
        names &= {qd.broker_name for qd in route.queue_datas if qd.perm & Perm.WRITE}
    return names


def _mqshutdown(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rocketq.tools.shutdown", *args], capture_output=True, text=True, timeout=30
    )


def _mqadmin_ok(*args: str) -> None:
    done = run_mqadmin(*args)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("procedure", ["sigterm", "wipe-drain-sigterm"])
def test_rolling_restart_under_load_loses_and_fails_nothing(tmp_path: Path, procedure: str) -> None:
    """``sigterm``: mqshutdown straight away; ``wipe-drain-sigterm``: docs/operations.md's
    procedure (wipeWritePerm, wait for producers to leave, mqshutdown, restart, addWritePerm)."""
    port_a = free_port()
    with (
        spawn_namesrv(tmp_path / "ns") as ns,
        spawn_broker(tmp_path / "b", ns.addr, brokerName="broker-b", **SMALL),
    ):
        broker_a = spawn_broker(tmp_path / "a", ns.addr, brokerName="broker-a", listenPort=port_a, **SMALL)
        try:
            create_topic(ns.addr, TOPIC, 4)
            wait_for(lambda: _route_brokers(ns.addr) == {"broker-a", "broker-b"}, "both brokers routed")
            log = SendLog()
            with Producer(
                ns.addr,
                producer_group="pg-rolling",
                retry_times_when_send_failed=2,
                client=ClientConfig(poll_name_server_interval_ms=POLL_NAME_SERVER_INTERVAL_MS),
            ) as producer:
                sender = threading.Thread(target=_send_steadily, args=(producer, log), daemon=True)
                sender.start()
                time.sleep(2.0)
                drained_at = None
                if procedure == "wipe-drain-sigterm":
                    _mqadmin_ok("wipeWritePerm", "-n", ns.addr, "-b", "broker-a")
                    assert _route_brokers(ns.addr, writable=True) == {"broker-b"}
                    time.sleep(2 * POLL_NAME_SERVER_INTERVAL_MS / 1000)  # producers refresh their routes
                    drained_at = time.monotonic()
                    time.sleep(1.0)
                conf_a = str(tmp_path / "a" / "broker-broker-a-0.conf")
                assert find_processes("broker", conf_a) == [broker_a.pid]
                began = time.monotonic()
                shut = _mqshutdown("broker", conf_a)
                assert shut.returncode == 0, shut.stdout + shut.stderr
                assert f"Send shutdown request to mqbroker({broker_a.pid}) OK" in shut.stdout
                assert broker_a.popen.wait(timeout=30) == 0, broker_a.log_tail()
                stop_s = time.monotonic() - began
                assert _route_brokers(ns.addr) == {"broker-b"}  # unregistered before it exited
                if drained_at is not None:  # nothing reached broker-a once producers saw the wipe
                    assert [t for t, name in log.acked_at if name == "broker-a" and t > drained_at] == []
                time.sleep(2.0)
                broker_a = spawn_broker(
                    tmp_path / "a", ns.addr, brokerName="broker-a", listenPort=port_a, **SMALL
                )
                if procedure == "wipe-drain-sigterm":
                    _mqadmin_ok("addWritePerm", "-n", ns.addr, "-b", "broker-a")
                wait_for(
                    lambda: "broker-a" in _route_brokers(ns.addr, writable=True), "broker-a writable again"
                )
                back_at = time.monotonic()
                wait_for(
                    lambda: any(name == "broker-a" and t > back_at for t, name in log.acked_at),
                    "sends to the restarted broker-a",
                    timeout_s=30,
                )
                log.stop.set()
                sender.join(timeout=60)
            assert not sender.is_alive()
            assert log.failed == []
            got = _read_all(ns.addr, len(log.acked))
            assert set(log.acked.values()) <= got, f"lost: {len(set(log.acked.values()) - got)}"
            print(
                f"\n{procedure}: {len(log.acked)} sends acknowledged, {len(log.failed)} failed, "
                f"0 lost; slowest send {log.slowest_s * 1000:.0f} ms; SIGTERM to exit {stop_s:.2f} s"
            )
        finally:
            broker_a.terminate()


def _read_all(ns_addr: str, n: int) -> set[bytes]:
    consumer = LitePullConsumer(
        ns_addr,
        consumer_group="cg-rolling",
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    consumer.assign(sorted(consumer.fetch_message_queues(TOPIC)))
    consumer.start()
    try:
        return {m.body for m in drain(consumer, n, timeout_s=60)}
    finally:
        consumer.shutdown()


def test_a_stopping_broker_answers_sends_service_not_available(tmp_path: Path) -> None:
    """While the broker unregisters (here from a NameServer held by SIGSTOP, so that takes its
    5 s bound), a send is answered SERVICE_NOT_AVAILABLE, the code producers retry elsewhere."""
    with spawn_namesrv(tmp_path / "ns") as ns, BlockingRemotingClient() as client:
        broker = spawn_broker(tmp_path / "a", ns.addr, **SMALL)
        try:
            header = send_header("StoppingBroker", default_topic_queue_nums=1)

            def send() -> RemotingCommand:
                cmd = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header.to_ext_fields(), b"x")
                return client.invoke(broker.addr, cmd, 5000)

            assert send().code == ResponseCode.SUCCESS
            os.kill(ns.pid, signal.SIGSTOP)
            try:
                os.kill(broker.pid, signal.SIGTERM)
                refused = send()
                for _ in range(100):  # the signal is handled asynchronously: a few sends may pass
                    if refused.code != ResponseCode.SUCCESS:
                        break
                    time.sleep(0.02)
                    refused = send()
            finally:
                os.kill(ns.pid, signal.SIGCONT)
            assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE
            assert "shutting down" in (refused.remark or "")
            assert broker.popen.wait(timeout=30) == 0, broker.log_tail()
        finally:
            broker.terminate()


def test_mqshutdown_namesrv_is_a_clean_exit(tmp_path: Path) -> None:
    conf = tmp_path / "namesrv.properties"  # names this NameServer on its command line
    conf.write_text("", encoding="utf-8")
    ns = spawn_namesrv(tmp_path / "ns", "-c", str(conf))
    try:
        shut = _mqshutdown("namesrv", str(conf))
        assert shut.returncode == 0, shut.stdout + shut.stderr
        assert shut.stdout.splitlines() == [
            f"The mqnamesrv({ns.pid}) is running...",
            f"Send shutdown request to mqnamesrv({ns.pid}) OK",
        ]
        assert ns.popen.wait(timeout=30) == 0, ns.log_tail()
        none = _mqshutdown("namesrv", str(conf))
        assert (none.returncode, none.stdout.strip()) == (1, "No mqnamesrv running.")
    finally:
        ns.terminate()
