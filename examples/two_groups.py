"""Two broker groups behind two NameServers: one topic spread over both, read back whole.

    python examples/two_groups.py                         # starts 2 NameServers + 2 brokers itself
    python examples/two_groups.py -n "host1:9876;host2:9876"   # an existing two-group cluster

Without ``-n`` it starts two ``mqnamesrv`` and two ``mqbroker`` processes (``broker-a`` and
``broker-b``, each registered with *both* NameServers through ``namesrvAddr=ns1;ns2``) in a
temporary directory, and stops them at the end.  Then it:

1. checks that each NameServer, asked on its own, knows both broker groups;
2. creates the topic on every master of the cluster (``mqadmin updateTopic -c DefaultCluster``);
3. sends messages with a producer given both NameServers; the producer spreads them over the
   queues of both broker names;
4. reads every message back with a push consumer (clustering) and prints how many came from
   each broker group.

Exit status 0 when every message came back and both groups stored some.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rocketq.client.admin import Admin
from rocketq.client.consumer import ConsumeConcurrentlyStatus, ConsumeFromWhere, PushConsumer
from rocketq.client.errors import NoRouteError
from rocketq.client.model import Message, MessageExt
from rocketq.client.producer import Producer

TOPIC = "TwoGroupsTopic"
MESSAGES = 200


@contextlib.contextmanager
def two_group_cluster() -> Iterator[str]:
    """Start 2 NameServers and 2 broker groups registered with both; yield ``"ns1;ns2"``."""
    from rocketq.client.launcher import spawn_broker, spawn_namesrv

    with tempfile.TemporaryDirectory(prefix="rocketq-two-groups-") as tmp:
        work = Path(tmp)
        with spawn_namesrv(work / "ns1") as ns1, spawn_namesrv(work / "ns2") as ns2:
            both = f"{ns1.addr};{ns2.addr}"
            small: dict[str, Any] = {
                "mappedFileSizeCommitLog": 64 << 20,
                "mappedFileSizeConsumeQueue": 20 * 100_000,
            }
            with (
                spawn_broker(work / "a", both, brokerName="broker-a", **small),
                spawn_broker(work / "b", both, brokerName="broker-b", **small),
            ):
                print(f"started NameServers {ns1.addr} and {ns2.addr}; brokers broker-a and broker-b")
                yield both


def wait_for(what: str, predicate: Any, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.1)


def check_registration(namesrv: str) -> None:
    """Each NameServer, asked alone, lists both broker groups (brokers register with all)."""
    for addr in namesrv.split(";"):
        with Admin(addr) as admin:

            def both_known(admin: Admin = admin) -> bool:
                return {"broker-a", "broker-b"} <= set(admin.cluster_list().broker_addr_table)

            wait_for(f"both brokers on {addr}", both_known)
            print(f"NameServer {addr} knows {sorted(admin.cluster_list().broker_addr_table)}")


def create_topic(namesrv: str) -> None:
    with Admin(namesrv) as admin:
        masters = admin.create_topic(TOPIC, cluster="DefaultCluster", read_queue_nums=4, write_queue_nums=4)
        print(f"created {TOPIC} on {masters}")

        def spread() -> bool:
            try:
                return len(admin.topic_route(TOPIC).broker_datas) >= 2
            except NoRouteError:
                return False

        wait_for("the topic route on both brokers", spread)


def produce(namesrv: str) -> Counter[str]:
    per_broker: Counter[str] = Counter()
    with Producer(namesrv, producer_group="two-groups-producer") as producer:
        for i in range(MESSAGES):
            result = producer.send(Message(TOPIC, f"message {i}".encode(), keys=f"k{i}"))
            per_broker[result.message_queue.broker_name] += 1
    print(f"sent {MESSAGES} messages: {dict(sorted(per_broker.items()))}")
    return per_broker


def consume(namesrv: str) -> Counter[str]:
    seen: set[bytes] = set()
    per_broker: Counter[str] = Counter()
    lock = threading.Lock()
    done = threading.Event()

    def listener(msgs: list[MessageExt], ctx: Any) -> ConsumeConcurrentlyStatus:
        with lock:
            for m in msgs:
                if m.body not in seen:
                    seen.add(m.body)
                    per_broker[ctx.message_queue.broker_name] += 1
            if len(seen) >= MESSAGES:
                done.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        namesrv,
        consumer_group="two-groups-consumer",
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    consumer.subscribe(TOPIC, "*")
    consumer.register_message_listener(listener)
    consumer.start()
    try:
        done.wait(60)
    finally:
        consumer.shutdown()
    print(f"consumed {len(seen)} distinct messages: {dict(sorted(per_broker.items()))}")
    return per_broker


def run(namesrv: str) -> int:
    check_registration(namesrv)
    create_topic(namesrv)
    sent = produce(namesrv)
    got = consume(namesrv)
    ok = sum(got.values()) == MESSAGES and len(sent) == 2 and got == sent
    print("OK: both broker groups served the topic" if ok else "FAILED")
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "-n",
        "--namesrv",
        default=os.environ.get("NAMESRV_ADDR"),
        help='two NameServers, e.g. "10.0.0.1:9876;10.0.0.2:9876" (default: start them)',
    )
    args = parser.parse_args()
    if args.namesrv:
        return run(args.namesrv)
    with two_group_cluster() as namesrv:
        return run(namesrv)


if __name__ == "__main__":
    sys.exit(main())
