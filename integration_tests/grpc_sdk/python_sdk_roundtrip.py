# mypy: ignore-errors
"""Runs in the Python SDK's own venv (rocketmq-python-client), never in rocketq's: one round trip
through rocketq's gRPC proxy, printed as one JSON object on the last line of stdout.

Usage: python python_sdk_roundtrip.py PROXY_ADDR TOPIC GROUP CROSS_IN_TOPIC CROSS_OUT_TOPIC N_CROSS_IN
       PUSH_TOPIC DLQ_TOPIC TX_TOPIC NS_TOPIC

1. A SimpleConsumer of GROUP on TOPIC and CROSS_IN_TOPIC starts (one empty receive fixes its
   start offsets), then a Producer sends to TOPIC three normal messages (tag, keys, a user
   property), five FIFO messages of message group "g1" and one delay message due 3 s later,
   then one due 4 s later that it recalls at once (and a recall with a made-up handle).
2. The consumer receives until it has all nine and the N_CROSS_IN messages rocketq's remoting
   producer sent to CROSS_IN_TOPIC, acks them, except one whose invisible duration it changes
   to 2 s: that one comes back (delivery attempt 2) and is acked with its new handle.
3. A last receive checks that nothing acked comes back.
4. The producer sends three messages to CROSS_OUT_TOPIC for rocketq's remoting consumer.
5. A PushConsumer of group "g-push" subscribed to tag TagP of PUSH_TOPIC gets four TagP messages
   and one of another tag; its listener fails "push-0" once (the SDK then changes its invisible
   duration by the server's back-off, 1 s) and takes everything else.
6. A SimpleConsumer of group "g-dlq" never acks the one message of DLQ_TOPIC: it changes its
   invisible duration to 1 s at each delivery; the group has retryMaxTimes 1 (2 deliveries), so the
   message is delivered twice and then goes to %DLQ%g-dlq.
7. Transactions on TX_TOPIC: one committed, one rolled back, one left open (the broker checks
   back, the proxy forwards the check to this producer, whose checker commits it); a
   SimpleConsumer of "g-tx" receives the committed two and never the rolled-back one.
8. Clients configured with namespace "ns1" send "ns-0" to NS_TOPIC and receive it (the brokers
   know the topic as "ns1%NS_TOPIC").
"""

import json
import sys
import threading
import time

from rocketmq import (
    ClientConfiguration,
    ConsumeResult,
    Credentials,
    FilterExpression,
    Message,
    MessageListener,
    Producer,
    PushConsumer,
    SimpleConsumer,
    TransactionChecker,
    TransactionResolution,
)


def msg(topic, body, tag=None, keys=None, group=None, deliver_s=None, props=None):
    m = Message()
    m.topic = topic
    m.body = body.encode()
    if tag:
        m.tag = tag
    if keys:
        m.keys = keys
    if group:
        m.message_group = group
    if deliver_s:
        m.delivery_timestamp = deliver_s
    for k, v in (props or {}).items():
        m.add_property(k, v)
    return m


def view(m):
    return {
        "topic": m.topic,
        "body": m.body.decode(),
        "id": m.message_id,
        "tag": m.tag,
        "keys": sorted(m.keys or []),
        "group": m.message_group,
        "attempt": m.delivery_attempt,
        "props": dict(m.properties or {}),
        "handle": m.receipt_handle,
        "at_ms": int(time.time() * 1000),
    }


class Listener(MessageListener):
    def __init__(self):
        self.seen = []
        self.lock = threading.Lock()

    def consume(self, message):
        with self.lock:
            self.seen.append(view(message))
        if message.body == b"push-0" and message.delivery_attempt == 1:
            return ConsumeResult.FAILURE
        return ConsumeResult.SUCCESS


def push_phase(config, producer, topic, out):
    listener = Listener()
    push = PushConsumer(config, "g-push", listener, {topic: FilterExpression("TagP")})
    push.startup()
    try:
        for i in range(4):
            producer.send(msg(topic, f"push-{i}", tag="TagP"))
        producer.send(msg(topic, "push-other", tag="TagOther"))
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline:
            with listener.lock:
                done = {(v["body"], v["attempt"]) for v in listener.seen}
            if {("push-0", 2), ("push-1", 1), ("push-2", 1), ("push-3", 1)} <= done:
                break
            time.sleep(0.2)
        time.sleep(1)  # anything else (the filtered message) would show up now
    finally:
        push.shutdown()
    out["push"] = listener.seen


class Checker(TransactionChecker):
    def __init__(self):
        self.checked = []

    def check(self, message):
        self.checked.append({"body": message.body.decode(), "id": message.message_id, "topic": message.topic})
        return TransactionResolution.COMMIT


def tx_phase(config, producer, topic, out):
    consumer = SimpleConsumer(config, "g-tx", {topic: FilterExpression()}, await_duration=2)
    consumer.startup()
    try:
        consumer.receive(16, 15)  # fixes the group's start offset
        for body, end in (("tx-commit", "commit"), ("tx-rollback", "rollback"), ("tx-orphan", None)):
            transaction = producer.begin_transaction()
            receipt = producer.send(msg(topic, body), transaction)
            out.setdefault("tx_sent", {})[body] = receipt.message_id
            if end == "commit":
                transaction.commit()
            elif end == "rollback":
                transaction.rollback()
        out["tx_received"] = []
        deadline = time.monotonic() + 30
        while len(out["tx_received"]) < 2 and time.monotonic() < deadline:
            for m in consumer.receive(16, 15):
                out["tx_received"].append(view(m))
                consumer.ack(m)
        for m in consumer.receive(16, 15):  # a rolled-back message would show up by now
            out["tx_received"].append(view(m))
            consumer.ack(m)
    finally:
        consumer.shutdown()


def namespace_phase(addr, topic, out):
    config = ClientConfiguration(addr, Credentials(), namespace="ns1", request_timeout=5)
    consumer = SimpleConsumer(config, "g-ns", {topic: FilterExpression()}, await_duration=2)
    consumer.startup()
    producer = Producer(config, (topic,))
    producer.startup()
    try:
        consumer.receive(16, 15)  # fixes the group's start offset
        out["ns_sent"] = producer.send(msg(topic, "ns-0")).message_id
        out["ns_received"] = []
        deadline = time.monotonic() + 15
        while not out["ns_received"] and time.monotonic() < deadline:
            for m in consumer.receive(16, 15):
                out["ns_received"].append(view(m))
                consumer.ack(m)
    finally:
        producer.shutdown()
        consumer.shutdown()


def dlq_phase(config, producer, topic, out):
    consumer = SimpleConsumer(config, "g-dlq", {topic: FilterExpression()}, await_duration=2)
    consumer.startup()
    try:
        consumer.receive(16, 15)  # fixes the group's start offset
        out["dlq_sent"] = producer.send(msg(topic, "dlq-0")).message_id
        out["dlq_deliveries"] = []
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            for m in consumer.receive(16, 15):
                out["dlq_deliveries"].append(view(m))
                consumer.change_invisible_duration(m, 1)
    finally:
        consumer.shutdown()


def main():
    addr, topic, group, cross_in, cross_out, n_cross_in, push_topic, dlq_topic, tx_topic, ns_topic = sys.argv[
        1:11
    ]
    n_cross_in = int(n_cross_in)
    config = ClientConfiguration(addr, Credentials(), request_timeout=5)
    out = {"sent": [], "received": [], "redelivered": [], "late": [], "cross_out": [], "errors": []}
    consumer = SimpleConsumer(
        config, group, {topic: FilterExpression(), cross_in: FilterExpression()}, await_duration=2
    )
    consumer.startup()
    consumer.receive(16, 15)  # fixes the group's start offset before anything is sent
    checker = Checker()
    producer = Producer(config, (topic, cross_out, push_topic, dlq_topic, tx_topic), checker=checker)
    producer.startup()
    try:
        due_s = int(time.time()) + 3
        plan = [msg(topic, f"normal-{i}", tag="TagA", keys=f"k{i}", props={"p": str(i)}) for i in range(3)]
        plan += [msg(topic, f"fifo-{i}", tag="TagF", group="g1") for i in range(5)]
        plan.append(msg(topic, "delay-0", tag="TagD", deliver_s=due_s))
        for m in plan:
            receipt = producer.send(m)
            out["sent"].append({"body": m.body.decode(), "id": receipt.message_id, "offset": receipt.offset})
        out["delay_due_ms"] = due_s * 1000
        receipt = producer.send(msg(topic, "recalled-0", deliver_s=due_s + 1))
        out["recall_sent"] = receipt.message_id
        out["recalled"] = producer.recall_message(topic, receipt.recall_handle)
        try:
            producer.recall_message(topic, "bm90IGEgaGFuZGxl")
            out["bogus_recall"] = "accepted"
        except Exception as exc:
            out["bogus_recall"] = f"{type(exc).__name__}: {exc}"
        want = len(plan) + n_cross_in
        changed = None
        deadline = time.monotonic() + 40
        while len(out["received"]) < want and time.monotonic() < deadline:
            for m in consumer.receive(16, 15):
                out["received"].append(view(m))
                if changed is None and m.body == b"normal-0":
                    consumer.change_invisible_duration(m, 2)
                    changed = m
                    out["changed_handle"] = m.receipt_handle
                else:
                    consumer.ack(m)
        deadline = time.monotonic() + 20
        while not out["redelivered"] and time.monotonic() < deadline:
            for m in consumer.receive(16, 15):
                out["redelivered"].append(view(m))
                consumer.ack(m)
        try:  # the handle the change replaced no longer acks
            if changed is not None:
                consumer.ack(changed)
                out["stale_ack"] = "accepted"
        except Exception as exc:
            out["stale_ack"] = f"{type(exc).__name__}: {exc}"
        for m in consumer.receive(16, 15):  # one more long poll: nothing acked comes back
            out["late"].append(view(m))
            consumer.ack(m)
        for i in range(3):
            m = msg(cross_out, f"to-remoting-{i}", tag="TagX", keys=f"x{i}", props={"origin": "python-sdk"})
            out["cross_out"].append({"body": m.body.decode(), "id": producer.send(m).message_id})
        push_phase(config, producer, push_topic, out)
        dlq_phase(config, producer, dlq_topic, out)
        tx_phase(config, producer, tx_topic, out)
        out["tx_checked"] = checker.checked
        namespace_phase(addr, ns_topic, out)
    finally:
        producer.shutdown()
        consumer.shutdown()
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
