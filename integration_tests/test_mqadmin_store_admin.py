"""mqadmin's store maintenance against a real broker with small CommitLog and consume queue files
and a retention time of a fraction of a second (automatic rounds kept out of the way):
deleteExpiredCommitLog deletes the full CommitLog segments and a queue's minimum offset moves up
after cleanExpiredCQ; cleanUnusedTopic drops the consume queues of a topic that left the topic
table while the broker was down; resetMasterFlushOffset is refused with the broker's reason.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

from rocketq.client.admin import Admin
from rocketq.client.model import Message
from rocketq.client.producer import Producer
from rocketq.client.testing import broker_store_dir, create_topic, run_mqadmin, spawn_broker, spawn_namesrv

TOPIC = "store-admin-t"
GONE = "store-admin-gone"


def broker_conf() -> dict[str, Any]:
    later = (time.localtime().tm_hour + 12) % 24  # no scheduled deletion hour during the test
    return {
        "mappedFileSizeCommitLog": 64 * 1024,
        "maxMessageSize": 16 * 1024,
        "mappedFileSizeConsumeQueue": 10 * 20,  # 10 units per consume queue file
        "fileReservedTime": 0.0001,  # hours: 0.36 s
        "deleteWhen": f"{later:02d}",
        "cleanResourceInterval": 3_600_000,
        "deleteCommitLogFilesInterval": 0,
    }


def ok(*args: str) -> str:
    done = run_mqadmin(*args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def min_offset(ns: str, topic: str) -> int:
    with Admin(ns) as admin:
        (status,) = admin.topic_status(topic)
        return status.min_offset


def test_store_maintenance_commands(tmp_path: Path) -> None:
    with spawn_namesrv(tmp_path / "ns") as ns:
        with spawn_broker(tmp_path, ns.addr, **broker_conf()) as broker:
            create_topic(ns.addr, TOPIC, 1)
            create_topic(ns.addr, GONE, 1)
            with Producer(ns.addr, producer_group="pg-store-admin") as producer:
                for i in range(60):
                    producer.send(Message(TOPIC, bytes([i % 251]) * 4000))
                producer.send(Message(GONE, b"x"))
            assert min_offset(ns.addr, TOPIC) == 0
            time.sleep(1.0)  # every full segment is now older than fileReservedTime

            stdout = ok("deleteExpiredCommitLog", "-n", ns.addr, "-b", broker.addr)
            found = re.fullmatch(
                rf"success\n{re.escape(broker.addr)}: deleted (\d+) expired commit log file\(s\); "
                r"the commit log starts at (\d+)\n",
                stdout,
            )
            assert found and int(found.group(1)) >= 2 and int(found.group(2)) >= 2 * 64 * 1024, stdout
            stdout = ok("cleanExpiredCQ", "-n", ns.addr, "-c", "DefaultCluster")
            line = rf"{re.escape(broker.addr)}: deleted \d+ expired consume queue file\(s\)"
            assert re.fullmatch(rf"success\n{line}\n", stdout), stdout
            assert min_offset(ns.addr, TOPIC) >= 10  # at least one 10-unit file below the CommitLog minimum

            done = run_mqadmin("resetMasterFlushOffset", "-n", ns.addr, "-b", broker.addr, "-o", "0")
            assert done.returncode == 1 and "CODE: 25" not in done.stderr
            assert "resetMasterFlushOffset is not supported" in done.stderr, done.stderr

        topics_json = next(broker_store_dir(tmp_path).rglob("topics.json"))
        doc = json.loads(topics_json.read_text(encoding="utf-8"))
        del doc["topicConfigTable"][GONE]
        topics_json.write_text(json.dumps(doc), encoding="utf-8")
        with spawn_broker(tmp_path, ns.addr, **broker_conf()) as broker:
            cq_dir = next(p for p in broker_store_dir(tmp_path).rglob(GONE) if p.is_dir())
            stdout = ok("cleanUnusedTopic", "-n", ns.addr, "-b", broker.addr)
            assert stdout == f"success\n{broker.addr}: cleaned unused topics ['{GONE}']\n"
            assert not cq_dir.exists()
            assert (
                ok("cleanUnusedTopic", "-n", ns.addr) == f"success\n{broker.addr}: cleaned unused topics []\n"
            )
