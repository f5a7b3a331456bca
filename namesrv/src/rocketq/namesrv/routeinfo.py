"""The NameServer's route registry: which broker serves which topic queues, and who is alive.

Plain synchronous code with no I/O, guarded by one lock so the server may call it from any
thread, and unit-tested without sockets.  It mirrors RocketMQ's ``RouteInfoManager``:

* ``topic_queue_table``  topic -> broker name -> queue settings (from the *master's* registration)
* ``broker_addr_table``  broker name -> (cluster, {broker id -> "ip:port"})
* ``cluster_addr_table`` cluster -> broker names
* ``broker_live_table``  broker address -> last registration time, data version, channel, HA address
* ``filter_server_table`` broker address -> filter server addresses (kept for the wire format)

Theory of operation: a broker registers every 30 s; its queue settings are (re)applied only for
a master (id 0) whose topic-config data version changed or that registered for the first time,
exactly as RocketMQ does (registration is additive; topics disappear through
``DELETE_TOPIC_IN_NAMESRV`` or when their last broker goes away).  A broker is forgotten when it
unregisters, when its channel closes, or when :meth:`RouteInfoManager.scan_not_active_brokers`
finds it silent for longer than the expiry; removing the last address of a broker name removes
that name from its cluster and from every topic, and topics left without queues are dropped.
The ``channel`` handed in with a registration is an opaque hashable token of the transport.

Elected masters (controller mode, RocketMQ 5).  A broker promoted by the controller registers
as id 0 while the old master's entry may still be listed (it was SIGSTOPped or partitioned, or
its expiry has not run yet): the new address replaces the old one under id 0 at once, and its
topic settings are applied as a first registration.  One address is only ever listed under one
id (a demoted master re-registers under its own id > 0).  The old master's later channel close
or expiry only removes entries that still hold *its* address, never the new master's.  A broker
in controller mode puts its master epoch into its topic-config ``DataVersion.stateVersion``; as
in RocketMQ 5, a registration for an id held by another live address with a *higher*
stateVersion is refused (a stale master that wakes up cannot take id 0 back) and the refused
address is forgotten.  BROKER_HEARTBEAT (904) refreshes a broker's liveness between
registrations.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field

from rocketq.client.remoting.vocabulary import MASTER_ID, Perm

DataVersionKey = tuple[int, int, int]  # (timestamp, counter, state_version)


def _now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class QueueConf:
    """One broker name's queues of one topic (RocketMQ ``QueueData`` minus the broker name)."""

    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0


@dataclass(frozen=True, slots=True)
class BrokerRoute:
    """A broker name's cluster and addresses by broker id (RocketMQ ``BrokerData``)."""

    cluster: str
    broker_name: str
    broker_addrs: dict[int, str]


@dataclass(frozen=True, slots=True)
class TopicRoute:
    """A snapshot of a topic's route (RocketMQ ``TopicRouteData`` without orderTopicConf)."""

    queue_datas: dict[str, QueueConf]  # broker name -> queues
    broker_datas: list[BrokerRoute]
    filter_server_table: dict[str, list[str]]


@dataclass(frozen=True, slots=True)
class ClusterSnapshot:
    """Every broker name's addresses and every cluster's broker names."""

    broker_addr_table: dict[str, BrokerRoute]
    cluster_addr_table: dict[str, list[str]]


@dataclass(frozen=True, slots=True)
class RegisterResult:
    """What the NameServer tells a registering broker (the response header)."""

    ha_server_addr: str | None
    master_addr: str | None
    first_registration: bool
    accepted: bool = True  # False: refused, another address holds the id with a newer stateVersion
    replaced_addr: str | None = None  # the address that held this broker id until now


@dataclass(frozen=True, slots=True)
class RemovedBroker:
    """A broker address dropped by expiry or channel close; ``channel`` should be closed."""

    broker_addr: str
    broker_name: str | None
    channel: Hashable | None


@dataclass(slots=True)
class _LiveInfo:
    last_update_ms: int
    data_version: DataVersionKey
    channel: Hashable | None
    ha_server_addr: str


@dataclass(slots=True)
class _BrokerData:
    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)

    def snapshot(self) -> BrokerRoute:
        return BrokerRoute(self.cluster, self.broker_name, dict(sorted(self.broker_addrs.items())))


class RouteInfoManager:
    """The route tables and the operations on them; every public method takes the lock."""

    def __init__(self, *, clock_ms: Callable[[], int] = _now_ms) -> None:
        self._lock = threading.RLock()
        self._clock_ms = clock_ms
        self._topic_queue_table: dict[str, dict[str, QueueConf]] = {}
        self._broker_addr_table: dict[str, _BrokerData] = {}
        self._cluster_addr_table: dict[str, set[str]] = {}
        self._broker_live_table: dict[str, _LiveInfo] = {}
        self._filter_server_table: dict[str, list[str]] = {}

    # -- registration ----------------------------------------------------------------------

    def register_broker(
        self,
        *,
        cluster_name: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        ha_server_addr: str = "",
        topic_queues: Mapping[str, QueueConf] | None = None,
        data_version: DataVersionKey = (0, 0, 0),
        filter_server_list: Iterable[str] = (),
        channel: Hashable | None = None,
    ) -> RegisterResult:
        """Record a broker's registration (REGISTER_BROKER)."""
        with self._lock:
            data = self._broker_addr_table.get(broker_name)
            if data is not None and self._conflicts(data, broker_id, broker_addr, data_version):
                self._remove_broker_addr(broker_addr)
                return RegisterResult(None, None, False, accepted=False, replaced_addr=None)
            self._cluster_addr_table.setdefault(cluster_name, set()).add(broker_name)
            first = data is None
            if data is None:
                data = _BrokerData(cluster_name, broker_name)
                self._broker_addr_table[broker_name] = data
            data.cluster = cluster_name
            # An address that switched role (slave -> master) must not stay under its old id.
            for other_id in [i for i, a in data.broker_addrs.items() if a == broker_addr and i != broker_id]:
                del data.broker_addrs[other_id]
            old_addr = data.broker_addrs.get(broker_id)
            data.broker_addrs[broker_id] = broker_addr
            first = first or old_addr != broker_addr
            if topic_queues is not None and broker_id == MASTER_ID:
                live = self._broker_live_table.get(broker_addr)
                if first or live is None or live.data_version != data_version:
                    for topic, conf in topic_queues.items():
                        self._topic_queue_table.setdefault(topic, {})[broker_name] = conf
            self._broker_live_table[broker_addr] = _LiveInfo(
                self._clock_ms(), data_version, channel, ha_server_addr
            )
            filters = list(filter_server_list)
            if filters:
                self._filter_server_table[broker_addr] = filters
            else:
                self._filter_server_table.pop(broker_addr, None)
            replaced = old_addr if old_addr != broker_addr else None
            ha, master = self._master_of(data) if broker_id != MASTER_ID else (None, None)
            return RegisterResult(ha, master, first, replaced_addr=replaced)

    def _conflicts(
        self, data: _BrokerData, broker_id: int, broker_addr: str, data_version: DataVersionKey
    ) -> bool:
        """RocketMQ 5's rule: another live address holds ``broker_id`` with a newer stateVersion
        (a master elected after this one), so this registration is stale."""
        holder = data.broker_addrs.get(broker_id)
        if holder is None or holder == broker_addr:
            return False
        holder_live = self._broker_live_table.get(holder)
        return holder_live is not None and holder_live.data_version[2] > data_version[2]

    def _master_of(self, data: _BrokerData) -> tuple[str | None, str | None]:
        """(HA address, address) of the group's master, as a slave's registration answer."""
        master = data.broker_addrs.get(MASTER_ID)
        if master is None:
            return None, None
        master_live = self._broker_live_table.get(master)
        return (master_live.ha_server_addr if master_live else None), master

    def unregister_broker(
        self, *, cluster_name: str, broker_addr: str, broker_name: str, broker_id: int
    ) -> bool:
        """Forget one broker address (UNREGISTER_BROKER); returns whether it was known."""
        with self._lock:
            known = self._broker_live_table.pop(broker_addr, None) is not None
            self._filter_server_table.pop(broker_addr, None)
            data = self._broker_addr_table.get(broker_name)
            if data is not None and data.broker_addrs.get(broker_id) == broker_addr:
                del data.broker_addrs[broker_id]
                known = True
                if not data.broker_addrs:
                    self._remove_broker_name(broker_name, cluster_name)
            return known

    def update_broker_info_update_timestamp(self, broker_addr: str) -> bool:
        """BROKER_HEARTBEAT: a known broker is alive; returns whether the address is registered."""
        with self._lock:
            live = self._broker_live_table.get(broker_addr)
            if live is None:
                return False
            live.last_update_ms = self._clock_ms()
            return True

    def query_data_version_changed(
        self, broker_addr: str, data_version: DataVersionKey
    ) -> tuple[bool, DataVersionKey | None]:
        """QUERY_DATA_VERSION: (changed?, the version we hold); an unchanged broker counts as alive."""
        with self._lock:
            live = self._broker_live_table.get(broker_addr)
            if live is None:
                return True, None
            changed = live.data_version != data_version
            if not changed:
                live.last_update_ms = self._clock_ms()
            return changed, live.data_version

    # -- removal -----------------------------------------------------------------------------

    def _remove_broker_name(self, broker_name: str, cluster_hint: str | None) -> None:
        data = self._broker_addr_table.pop(broker_name, None)
        clusters = [cluster_hint] if cluster_hint else []
        if data is not None:
            clusters.append(data.cluster)
        for cluster in clusters:
            names = self._cluster_addr_table.get(cluster)
            if names is not None:
                names.discard(broker_name)
                if not names:
                    del self._cluster_addr_table[cluster]
        for topic in list(self._topic_queue_table):
            queues = self._topic_queue_table[topic]
            queues.pop(broker_name, None)
            if not queues:
                del self._topic_queue_table[topic]

    def _remove_broker_addr(self, broker_addr: str) -> str | None:
        self._broker_live_table.pop(broker_addr, None)
        self._filter_server_table.pop(broker_addr, None)
        for name, data in list(self._broker_addr_table.items()):
            ids = [i for i, a in data.broker_addrs.items() if a == broker_addr]
            if not ids:
                continue
            for bid in ids:
                del data.broker_addrs[bid]
            if not data.broker_addrs:
                self._remove_broker_name(name, None)
            return name
        return None

    def on_channel_destroy(self, channel: Hashable) -> list[RemovedBroker]:
        """A transport connection closed: drop every broker address that registered over it."""
        with self._lock:
            addrs = [a for a, live in self._broker_live_table.items() if live.channel == channel]
            return [RemovedBroker(a, self._remove_broker_addr(a), channel) for a in addrs]

    def scan_not_active_brokers(self, expired_time_ms: int) -> list[RemovedBroker]:
        """Drop brokers not re-registered within ``expired_time_ms``; returns what was dropped."""
        with self._lock:
            now = self._clock_ms()
            removed = []
            for addr, live in list(self._broker_live_table.items()):
                if live.last_update_ms + expired_time_ms < now:
                    channel = live.channel
                    removed.append(RemovedBroker(addr, self._remove_broker_addr(addr), channel))
            return removed

    # -- topics ------------------------------------------------------------------------------

    def pick_topic_route(self, topic: str) -> TopicRoute | None:
        """The route of ``topic``, or None when no live broker serves it."""
        with self._lock:
            queues = self._topic_queue_table.get(topic)
            if not queues:
                return None
            brokers = [self._broker_addr_table[n].snapshot() for n in queues if n in self._broker_addr_table]
            if not brokers:
                return None
            filters: dict[str, list[str]] = {}
            for b in brokers:
                for addr in b.broker_addrs.values():
                    if addr in self._filter_server_table:
                        filters[addr] = list(self._filter_server_table[addr])
            return TopicRoute(dict(queues), brokers, filters)

    def delete_topic(self, topic: str, cluster_name: str | None = None) -> bool:
        """DELETE_TOPIC_IN_NAMESRV: the whole topic, or only its queues on ``cluster_name``."""
        with self._lock:
            queues = self._topic_queue_table.get(topic)
            if queues is None:
                return False
            if cluster_name:
                for name in self._cluster_addr_table.get(cluster_name, set()):
                    queues.pop(name, None)
                if queues:
                    return True
            del self._topic_queue_table[topic]
            return True

    def all_topics(self) -> list[str]:
        with self._lock:
            return sorted(self._topic_queue_table)

    def topics_by_cluster(self, cluster_name: str) -> list[str]:
        with self._lock:
            names = self._cluster_addr_table.get(cluster_name, set())
            return sorted(t for t, q in self._topic_queue_table.items() if names.intersection(q))

    def update_write_perm(self, broker_name: str, *, writable: bool) -> int:
        """WIPE/ADD_WRITE_PERM_OF_BROKER: returns how many topics were touched."""
        with self._lock:
            count = 0
            for queues in self._topic_queue_table.values():
                conf = queues.get(broker_name)
                if conf is not None:
                    perm = int(conf.perm | Perm.WRITE) if writable else int(conf.perm & ~Perm.WRITE)
                    queues[broker_name] = QueueConf(
                        conf.read_queue_nums, conf.write_queue_nums, perm, conf.topic_sys_flag
                    )
                    count += 1
            return count

    # -- clusters ----------------------------------------------------------------------------

    def cluster_info(self) -> ClusterSnapshot:
        with self._lock:
            return ClusterSnapshot(
                {name: data.snapshot() for name, data in sorted(self._broker_addr_table.items())},
                {c: sorted(names) for c, names in sorted(self._cluster_addr_table.items())},
            )

    def live_broker_addrs(self) -> list[str]:
        with self._lock:
            return sorted(self._broker_live_table)
