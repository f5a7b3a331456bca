"""``rocketq dev --controller`` with real processes: three controllers, a NameServer and a group of
three brokers in controller mode; the printed lines name every address and the elected master, and
a send through the normal client is acknowledged by that master.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

from rocketq.client.errors import RocketQError
from rocketq.client.model import Message, SendStatus
from rocketq.client.producer import Producer
from rocketq.client.testing import start_rocketq_dev

_START_TIMEOUT_S = 120.0


def test_dev_controller_prints_the_group_and_a_send_works(tmp_path: Path) -> None:
    proc, out = start_rocketq_dev("--controller", "--store-dir", str(tmp_path))
    try:
        out.values({"MASTER_ADDR"}, _START_TIMEOUT_S)
        lines = out.lines()
        text = "\n".join(lines)
        controllers = re.findall(r"^Controller: n\d at (\S+)$", text, re.M)
        brokers = re.findall(r"^Broker:\s+broker-a at (\S+)", text, re.M)
        assert len(controllers) == 3 and len(brokers) == 3, text
        values = dict(line.split("=", 1) for line in lines if re.match(r"^[A-Z_]+=", line))
        assert values["CONTROLLER_ADDR"].split(";") == controllers
        assert values["BROKER_ADDRS"].split(",") == brokers
        master = values["MASTER_ADDR"]
        assert master in brokers
        assert re.search(rf"^Master:\s+broker-a at {re.escape(master)}", text, re.M)

        producer = Producer(values["NAMESRV_ADDR"], producer_group="dev-controller-test")
        producer.start()
        try:
            result = None
            for _ in range(40):  # the topic is auto-created on the master's first send
                try:
                    result = producer.send(Message("DevControllerTopic", b"hello"))
                    break
                except RocketQError:  # retried until the route has the topic
                    time.sleep(0.5)
            assert result is not None and result.send_status is SendStatus.SEND_OK
            assert result.message_queue.broker_name == "broker-a"
        finally:
            producer.shutdown()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
