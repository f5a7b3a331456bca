"""``mqadmin getBrokerConfig`` / ``updateBrokerConfig`` against real processes: a runtime key
changes what consumers get without a restart, is written to the broker's ``-c`` file and still
holds after the broker restarts from that file; a key that cannot change at runtime and a bad
value are refused with the key named.  ``getNamesrvConfig`` prints each NameServer's config.
"""

from __future__ import annotations

import re
from pathlib import Path

from rocketq.client.api import BlockingMQClientAPI
from rocketq.client.model import Message
from rocketq.client.producer import Producer
from rocketq.client.testing import (
    ServerProcess,
    create_topic,
    pull_header,
    run_mqadmin,
    spawn_broker,
    spawn_namesrv,
)

TOPIC = "broker-config-t"
KEY = "maxTransferCountOnMessageInMemory"


def shown_config(ns: str, addr: str) -> dict[str, str]:
    done = run_mqadmin("getBrokerConfig", "-n", ns, "-b", addr)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"============{addr}============"
    rows = [re.fullmatch(r"(\S+) +=  (.*)", line) for line in lines[1:] if line]
    assert all(rows), done.stdout
    return {m.group(1): m.group(2) for m in rows if m}


def pulled(ns: str, addr: str) -> int:
    with BlockingMQClientAPI(ns) as api:
        header = pull_header(TOPIC, 0, 0, group="broker-config-g", max_msg_nums=32)
        return len(api.pull_message(addr, header, timeout_ms=5000).messages)


def test_update_broker_config_applies_now_and_survives_a_restart(tmp_path: Path) -> None:
    with spawn_namesrv(tmp_path / "ns") as namesrv:
        ns = namesrv.addr
        broker: ServerProcess = spawn_broker(tmp_path / "b", ns)
        conf_file = tmp_path / "b" / "broker-broker-a-0.conf"
        try:
            create_topic(ns, TOPIC, 1)
            with Producer(ns, producer_group="pg-broker-config") as producer:
                for i in range(5):
                    producer.send(Message(TOPIC, f"m{i}".encode()))
            assert shown_config(ns, broker.addr)[KEY] == "32"
            assert pulled(ns, broker.addr) == 5

            done = run_mqadmin("updateBrokerConfig", "-n", ns, "-c", "DefaultCluster", "-k", KEY, "-v", "2")
            assert done.returncode == 0, done.stderr
            assert done.stdout == f"update broker config success, {broker.addr}\n"
            assert pulled(ns, broker.addr) == 2  # no restart
            assert shown_config(ns, broker.addr)[KEY] == "2"
            assert f"{KEY}=2\n" in conf_file.read_text(encoding="utf-8")
            assert (tmp_path / "b" / "broker-broker-a-0.conf.bak").exists()

            done = run_mqadmin(
                "updateBrokerConfig", "-n", ns, "-b", broker.addr, "-k", "listenPort", "-v", "1"
            )
            assert done.returncode == 1
            assert "CODE: 16" in done.stderr and "listenPort cannot change at runtime" in done.stderr
            done = run_mqadmin("updateBrokerConfig", "-n", ns, "-b", broker.addr, "-k", KEY, "-v", "many")
            assert done.returncode == 1
            assert f"{KEY}: expected an integer, got 'many'" in done.stderr
            assert shown_config(ns, broker.addr)[KEY] == "2"
        finally:
            broker.terminate()
        # the same broker again, from the file it rewrote (same store, same port)
        with spawn_broker(tmp_path / "b-again", ns, extra_args=("-c", str(conf_file))) as again:
            assert again.addr == broker.addr
            assert shown_config(ns, again.addr)[KEY] == "2"
            assert pulled(ns, again.addr) == 2


def test_get_namesrv_config_prints_every_namesrv(tmp_path: Path) -> None:
    b_args = ("-o", "orderMessageEnable=true")
    with spawn_namesrv(tmp_path / "a") as a, spawn_namesrv(tmp_path / "b", *b_args) as b:
        done = run_mqadmin("getNamesrvConfig", "-n", f"{a.addr};{b.addr}")
        assert done.returncode == 0, done.stderr
        for ns, order in ((a, "false"), (b, "true")):
            block = done.stdout.split(f"============{ns.addr}============\n")[1].split("\n\n")[0]
            assert re.search(rf"^orderMessageEnable +=  {order}$", block, re.M), done.stdout
            assert re.search(r"^scanNotActiveBrokerInterval +=  5000$", block, re.M), done.stdout


def test_broker_config_commands_need_a_target() -> None:
    done = run_mqadmin("updateBrokerConfig", "-n", "127.0.0.1:1", "-k", KEY, "-v", "2")
    assert done.returncode == 2
    assert "give -b brokerAddr (one broker) or -c clusterName" in done.stderr
