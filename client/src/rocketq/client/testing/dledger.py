"""The DLedger group of the DLedger tests: a NameServer and the three members of the example files.

:class:`DLedgerGroup` starts ``mqnamesrv`` and the brokers of ``examples/conf/dledger/``
(broker-n0..n2.conf) from copies in which only the fixed ports (``listenPort``, the
``dLegerPeers`` Raft ports) and the store paths are rewritten, plus :data:`TEST_CONF` (small store
files, short HA timeouts); each member keeps its ports across restarts.  It reads the members'
view from GET_BROKER_HA_STATUS and the route from the NameServer, creates :data:`TOPIC`, sends to
one member, signals members and reads a member's queues.  :func:`check_stored` checks a member
against the ledger of a per-key ordered load (:mod:`.ordered`), :func:`rejoined` waits for a
restarted member to follow.  Used by ``test_dledger.py`` and ``test_dledger_rolling_restart.py``.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rocketq.client.admin import Admin
from rocketq.client.admin_config import parse_properties_body
from rocketq.client.api import BlockingMQClientAPI
from rocketq.client.config import ClientConfig
from rocketq.client.errors import RocketQError
from rocketq.client.launcher import ServerProcess, free_port, spawn_broker, spawn_namesrv
from rocketq.client.model import MessageExt, PullStatus
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.lenient_json import loads
from rocketq.client.testing.chaos import Ledger
from rocketq.client.testing.cluster import FAST_FAILOVER_BROKER_CONF, broker_knows_topic
from rocketq.client.testing.messaging import pull_header, send_header
from rocketq.client.testing.ordered import check_acked_stored
from rocketq.client.testing.wait import wait_for

__all__ = [
    "FAST",
    "GROUP",
    "KEYS",
    "QUEUES",
    "TEST_CONF",
    "TOPIC",
    "WAIT_S",
    "DLedgerGroup",
    "check_stored",
    "rejoined",
]

GROUP = "RaftNode00"
TOPIC = "DLedgerT"
QUEUES = 4
KEYS = tuple(f"key-{i}" for i in range(4))
WAIT_S = 90.0
FAST = ClientConfig(
    poll_name_server_interval_ms=1000, heartbeat_broker_interval_ms=1000, mq_client_api_timeout_ms=2000
)
#: the test settings added to the shipped files: small store files, short HA timeouts, a disk
#: threshold a shared CI disk never trips (the DLedger keys and ports are the files' own)
TEST_CONF = {
    k: v
    for k, v in FAST_FAILOVER_BROKER_CONF.items()
    if k not in ("enableControllerMode", "allAckInSyncStateSet", "controllerHeartBeatTimeoutMills")
    and not k.startswith(("syncBrokerMetadata", "checkSyncStateSet"))
}


class DLedgerGroup:
    """The NameServer and the three members of ``conf_dir``'s broker-n0..n2.conf (slots 0..2 =
    n0..n2; the repository's ``examples/conf/dledger``), ``extra`` keys added to each."""

    def __init__(self, tmp: Path, conf_dir: Path, **extra: object) -> None:
        self.tmp = tmp
        self._ports: dict[int, int] = {}
        self.props = [{**self._localized(conf_dir / f"broker-n{i}.conf", i), **extra} for i in range(3)]
        self.members: list[ServerProcess | None] = [None, None, None]
        self.namesrv = spawn_namesrv(tmp / "ns")
        self.api = BlockingMQClientAPI(self.namesrv.addr, config=FAST)

    def _port(self, match: re.Match[str]) -> str:
        fixed = int(match[0])
        if fixed not in self._ports:
            self._ports[fixed] = free_port()
        return str(self._ports[fixed])

    def _localized(self, path: Path, slot: int) -> dict[str, Any]:
        props: dict[str, Any] = parse_properties_body(path.read_bytes())
        for key in ("listenPort", "dLegerPeers"):
            props[key] = re.sub(r"(?<=:)\d+|^\d+$", self._port, props[key])
        props["storePathRootDir"] = str(self.tmp / f"node{slot}")
        del props["namesrvAddr"]  # the test's NameServer
        return {**props, **TEST_CONF}

    def start(self, *slots: int) -> None:
        for slot in slots or range(3):
            self.members[slot] = spawn_broker(self.tmp / f"b{slot}", self.namesrv.addr, **self.props[slot])

    def addr(self, slot: int) -> str:
        return f"127.0.0.1:{self.props[slot]['listenPort']}"

    def port(self, slot: int) -> int:
        return int(self.props[slot]["listenPort"])

    def slot_of(self, addr: str) -> int:
        return [self.addr(s) for s in range(3)].index(addr)

    def member(self, slot: int) -> ServerProcess:
        proc = self.members[slot]
        assert proc is not None
        return proc

    def status(self, slot: int) -> dict[str, Any]:
        """GET_BROKER_HA_STATUS of one member; {} when it does not answer."""
        cmd = RemotingCommand.request(RequestCode.GET_BROKER_HA_STATUS)
        try:
            response = self.api.run(self.api.api.invoke(self.addr(slot), cmd, 2000), 5)
        except (RocketQError, TimeoutError):
            return {}
        obj = loads(response.body) if response.code == ResponseCode.SUCCESS else {}
        return obj if isinstance(obj, dict) else {}

    def route(self) -> dict[int, str]:
        try:
            bd = self.api.get_broker_cluster_info().broker_addr_table.get(GROUP)
        except (RocketQError, TimeoutError):
            return {}
        return dict(bd.broker_addrs) if bd is not None else {}

    def master(self) -> tuple[int, dict[str, Any]] | None:
        """The member the NameServer lists as brokerId 0, when it says it is an unfenced master."""
        addr = self.route().get(0)
        if addr is None:
            return None
        slot = self.slot_of(addr)
        st = self.status(slot)
        return (slot, st) if st.get("master") and not st.get("fenced") else None

    def following(self, master_slot: int, epoch: int) -> list[int]:
        """The other members that follow ``master_slot`` under ``epoch``."""
        out = []
        for slot in range(3):
            if slot == master_slot:
                continue
            st = self.status(slot)
            if (
                st
                and not st.get("master")
                and st.get("masterEpoch") == epoch
                and st.get("haClientRuntimeInfo")
            ):
                out.append(slot)
        return out

    def wait_master(
        self, what: str, ok: Callable[[int, dict[str, Any]], bool] = lambda s, st: True
    ) -> tuple[int, dict[str, Any]]:
        found: list[tuple[int, dict[str, Any]]] = []

        def ready() -> bool:
            m = self.master()
            if m is not None and ok(*m):
                found.append(m)
            return bool(found)

        wait_for(ready, what, WAIT_S)
        return found[-1]

    def wait_whole_group(self) -> tuple[int, dict[str, Any]]:
        """A master that both other members follow."""
        return self.wait_master(
            "a master followed by both other members",
            lambda slot, st: len(self.following(slot, st["masterEpoch"])) == 2,
        )

    def knows_topic(self, slot: int) -> bool:
        return broker_knows_topic(self.api, self.addr(slot), TOPIC)

    def create_topic(self, master_slot: int) -> None:
        with Admin(self.namesrv.addr) as admin:
            admin.create_topic(
                TOPIC, broker_addr=self.addr(master_slot), read_queue_nums=QUEUES, write_queue_nums=QUEUES
            )
        for slot in range(3):
            wait_for(functools.partial(self.knows_topic, slot), f"member {slot} to know {TOPIC}", WAIT_S)

    def raw_send(self, slot: int, body: bytes, timeout_ms: int = 10_000) -> RemotingCommand | None:
        """A SEND_MESSAGE_V2 addressed to one member (no route, no retry); None without an answer."""
        header = send_header(TOPIC, default_topic_queue_nums=QUEUES, producer_group="dledger-raw")
        cmd = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header.to_ext_fields(), body)
        try:
            return self.api.run(self.api.api.invoke(self.addr(slot), cmd, timeout_ms), timeout_ms / 1000 + 5)
        except (RocketQError, TimeoutError):
            return None

    def signal(self, slot: int, sig: signal.Signals) -> None:
        os.killpg(self.member(slot).pid, sig)

    def read_queues(self, slot: int) -> dict[tuple[int, int], MessageExt]:
        """Every message of the topic on one member, by (queue id, queue offset)."""
        stored: dict[tuple[int, int], MessageExt] = {}
        for queue_id in range(QUEUES):
            end = self.api.get_max_offset(self.addr(slot), TOPIC, queue_id)
            offset = 0
            for _ in range(end + 1):
                if offset >= end:
                    break
                header = pull_header(TOPIC, queue_id, offset, group="dledger-check", max_msg_nums=4000)
                result = self.api.pull_message(self.addr(slot), header, 10_000)
                assert result.status is PullStatus.FOUND, (slot, queue_id, offset, end, result.status)
                for m in result.messages:
                    stored[(queue_id, m.queue_offset)] = m
                offset = result.next_begin_offset
        return stored

    def close(self) -> str:
        tails = []
        for slot, proc in enumerate(self.members):
            if proc is None:
                continue
            if proc.is_alive():
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGCONT)
            proc.kill9()
            tails.append(f"--- member n{slot} ---\n{proc.log_tail(40)}")
        self.api.close()
        self.namesrv.kill9()
        return "\n".join(tails)


def check_stored(g: DLedgerGroup, ledger: Ledger, slot: int) -> str:
    """0 acknowledged messages lost on member ``slot``, none replaced, per-key order kept."""
    acked = ledger.acked()
    stored = g.read_queues(slot)
    check_acked_stored(acked, stored, KEYS)
    return f"{len(acked)} acknowledged, {len(stored)} stored on n{slot}: 0 lost, per-key order kept"


def rejoined(g: DLedgerGroup, slot: int, epoch: int) -> Callable[[], bool]:
    def check() -> bool:
        st = g.status(slot)
        return (
            bool(st)
            and not st.get("master")
            and st.get("masterEpoch", 0) >= epoch
            and bool(st.get("haClientRuntimeInfo"))
        )

    return check
