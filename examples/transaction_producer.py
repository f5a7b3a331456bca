"""Transactional messages with rocketq: an order is published only if its database insert commits.

    rocketq dev                                   # terminal 1: prints NAMESRV_ADDR
    export NAMESRV_ADDR=127.0.0.1:9876            # terminal 2: the printed address
    python examples/transaction_producer.py       # or: ... -n host:port [--check-back]

Each order is sent as a half message (invisible to consumers); the local transaction then inserts
the order into a SQLite database in the same thread and commits or rolls back the message with
it.  Order 2 fails its insert, so its message is rolled back and never delivered.  With
``--check-back`` one more order answers UNKNOW (as if the process had died mid-transaction); the
broker asks the producer later (``transactionTimeOut`` 6 s, then every ``transactionCheckInterval``,
60 s by default), and the check listener answers from the database.  A lite-pull consumer then
reads the orders that were committed.  Exit status 0 when exactly those arrived.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rocketq.client.admin import Admin
from rocketq.client.consumer import ConsumeFromWhere, LitePullConsumer
from rocketq.client.model import LocalTransactionState, Message, MessageExt
from rocketq.client.producer import TransactionProducer

TOPIC = "ExampleTxOrders"


class OrderService:
    """The application's side: a local database and the two transaction callbacks."""

    def __init__(self, db_path: Path) -> None:
        self.db_path = db_path
        with sqlite3.connect(db_path) as db:
            db.execute("CREATE TABLE IF NOT EXISTS orders (tx_id TEXT PRIMARY KEY, body TEXT)")

    def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
        """Runs in the thread that called send_message_in_transaction, right after the half send."""
        tx_id = msg.properties["UNIQ_KEY"]  # the transaction id the broker will ask about
        if arg == "crash":
            return LocalTransactionState.UNKNOW  # decided later, by the check-back
        db = sqlite3.connect(self.db_path)
        try:
            with db:  # one SQL transaction: commit on success, rollback on an exception
                db.execute("INSERT INTO orders VALUES (?, ?)", (tx_id, msg.body.decode()))
                if arg == "fail":
                    raise ValueError("payment declined")
            return LocalTransactionState.COMMIT_MESSAGE
        except ValueError as exc:
            print(f"  local transaction failed ({exc}): rolling the message back")
            return LocalTransactionState.ROLLBACK_MESSAGE
        finally:
            db.close()

    def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
        """Runs in the producer's check thread when the broker asks about an undecided message."""
        with sqlite3.connect(self.db_path) as db:
            row = db.execute("SELECT 1 FROM orders WHERE tx_id = ?", (msg.uniq_key,)).fetchone()
        if row is None:  # a crashed transaction: record it now (a real service would look further)
            with sqlite3.connect(self.db_path) as db:
                db.execute("INSERT INTO orders VALUES (?, ?)", (msg.uniq_key, msg.body.decode()))
        print(
            f"  broker checked {msg.uniq_key} "
            f"(check #{msg.properties.get('TRANSACTION_CHECK_TIMES')}): commit"
        )
        return LocalTransactionState.COMMIT_MESSAGE


def consume(namesrv: str, expected: set[bytes], timeout_s: float) -> set[bytes]:
    consumer = LitePullConsumer(
        namesrv,
        consumer_group="example-tx-reader",
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    consumer.subscribe(TOPIC, "*")
    consumer.start()
    got: set[bytes] = set()
    try:
        deadline = time.monotonic() + timeout_s
        while not expected <= got and time.monotonic() < deadline:
            got.update(m.body for m in consumer.poll(1000))
        time.sleep(1)  # anything that should not be there would have arrived with the others
        got.update(m.body for m in consumer.poll(500))
    finally:
        consumer.shutdown()
    return got


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--namesrv", default=os.environ.get("NAMESRV_ADDR", "127.0.0.1:9876"))
    parser.add_argument(
        "--check-back", action="store_true", help="also leave one transaction to the check-back"
    )
    args = parser.parse_args(argv)
    with Admin(args.namesrv) as admin:
        admin.create_topic(TOPIC, cluster="DefaultCluster", read_queue_nums=4, write_queue_nums=4)
    time.sleep(1)  # the broker registers the new topic with the NameServer
    with tempfile.TemporaryDirectory(prefix="rocketq-tx-") as work:  # the example's database
        return run(args.namesrv, OrderService(Path(work) / "orders.db"), args.check_back)


def run(namesrv: str, service: OrderService, check_back: bool) -> int:
    """Place the orders through ``service`` in transactions; 0 if exactly the committed ones arrive."""
    orders = [("order-1", "ok"), ("order-2", "fail"), ("order-3", "ok")]
    if check_back:
        orders.append(("order-4", "crash"))
    expected: set[bytes] = set()
    with TransactionProducer(
        namesrv, producer_group="example-tx-producer", transaction_listener=service
    ) as p:
        for order_id, how in orders:
            body = f"{order_id} placed {time.time():.0f}".encode()
            result = p.send_message_in_transaction(Message(TOPIC, body, keys=order_id), arg=how)
            print(f"{order_id}: {result.local_transaction_state.value} (transaction {result.transaction_id})")
            if result.local_transaction_state is not LocalTransactionState.ROLLBACK_MESSAGE:
                expected.add(body)
        # the producer must stay up until the broker's check-back has its answer
        got = consume(namesrv, expected, 150 if check_back else 30)
    print(
        f"consumed {len(got & expected)} of {len(expected)} committed orders, "
        f"{len(got - expected)} unexpected"
    )
    return 0 if expected <= got and not any(b.startswith(b"order-2 ") for b in got) else 1


if __name__ == "__main__":
    sys.exit(main())
