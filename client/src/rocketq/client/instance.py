"""ClientInstance: the shared state and background tasks of one client (Java's MQClientInstance).

A client instance owns the :class:`~rocketq.client.api.MQClientAPI` (and so the connections and
the ``client_id``), the route cache (``topic -> TopicRouteData``) and the broker address table
(``brokerName -> {brokerId: addr}``) built from it, and the producers and consumers registered
on it.  Its background tasks are the ones RocketMQ runs:

* every ``poll_name_server_interval_ms`` (30 s): refresh the route of every topic in use and tell
  the members when a route changed;
* every ``heartbeat_broker_interval_ms`` (30 s): HEART_BEAT to the brokers (masters only when
  there is no consumer) with the HeartbeatData of every member;
* every ``persist_consumer_offset_interval_ms`` (5 s): ask each consumer to persist its offsets;
* every ``rebalance_interval_ms`` (20 s; the smallest of the registered consumers'
  ``ConsumerConfig.rebalance_interval_ms``), and at once when a broker sends
  NOTIFY_CONSUMER_IDS_CHANGED: rebalance each consumer.

A member is any object with the small interface of :class:`Member` (producers and consumers).
Brokers call the client back over the same connections: NOTIFY_CONSUMER_IDS_CHANGED (rebalance
now), RESET_CONSUMER_CLIENT_OFFSET (handed to the group's consumer) and CHECK_TRANSACTION_STATE
(decoded and handed to the ``check_transaction_state`` of the producer of the half message's
``PGROUP``; that producer must be in the HeartbeatData's producerDataSet, which every registered
producer is, so that the broker has a live channel of the group to ask).

Replicas.  Writes go to a broker group's master only (:meth:`ClientInstance.find_master_addr_or_refresh`,
Java's ``findBrokerAddressInPublish``).  Reads (pulls, offsets, consumer lists) go through
:meth:`ClientInstance.invoke_on_replica`: the replica a pull answer suggested, else the master,
else any slave of the group (``findBrokerAddressInSubscribe``).  A replica that fails at the
transport level is marked unreachable for ``unreachable_broker_backoff_ms`` and the read is made
again on the next replica, so consumers keep reading from a slave while the master is down, even
before the NameServer drops it, and go back to the master once it answers again.

Failover (elected masters).  A request that fails because its broker is gone or no longer the
master calls :meth:`ClientInstance.refresh_route_after_failure`: the topic's route is fetched from
the NameServer at once instead of at the next 30 s poll, at most once per
``route_refresh_on_failure_interval_ms`` (500 ms) per topic, so a failover is seen within about a
second and a burst of failures does not flood the NameServer.  When a refresh shows that a broker
group's master moved (another address under id 0), the instance closes its connections to the
addresses that left the group (requests still waiting on a stopped master fail at once and are
retried), and tells every member through ``on_master_changed``: producers forget the group's
fault record, orderly consumers lock their queues on the new master before consuming again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Collection, Container, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from rocketq.client.api import MQClientAPI
from rocketq.client.config import ClientConfig
from rocketq.client.errors import NoRouteError, RemotingError, RocketQError
from rocketq.client.remoting import headers as h
from rocketq.client.remoting.admin_bodies import parse_offset_table
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.message import iter_stored_messages
from rocketq.client.remoting.properties import MessageConst
from rocketq.client.remoting.route import TopicRouteData
from rocketq.client.remoting.vocabulary import MASTER_ID
from rocketq.client.transport.channel import Channel

__all__ = ["ClientInstance", "FindBrokerResult", "Member", "UnreachableReplicas", "pick_replica"]

log = logging.getLogger("rocketq.client")

REBALANCE_INTERVAL_MS = 20_000
#: the shortest pause between the route refreshes of :meth:`ClientInstance.watch_route_while`
MIN_WATCH_INTERVAL_MS = 200
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class FindBrokerResult:
    """Java's FindBrokerResult: the replica a read goes to (``broker_id`` 0 is the master)."""

    broker_addr: str
    broker_id: int

    @property
    def slave(self) -> bool:
        return self.broker_id != MASTER_ID

    def __str__(self) -> str:
        return f"{'slave ' + str(self.broker_id) if self.slave else 'master'} at {self.broker_addr}"


class Member(Protocol):
    """What a producer or consumer exposes to its client instance."""

    @property
    def group(self) -> str: ...

    def topics_in_use(self) -> set[str]: ...

    def heartbeat_data(self) -> tuple[str, dict[str, Any]]:
        """("producer"|"consumer", the group's entry of HeartbeatData)."""
        ...

    def on_route_changed(self, topic: str, route: TopicRouteData) -> None: ...

    def on_master_changed(self, broker_name: str, master_addr: str | None) -> None:
        """The master of ``broker_name`` is now ``master_addr`` (None: no master listed)."""
        ...

    async def periodic(self, what: str) -> None:
        """Run the periodic job ``what`` ("rebalance" or "persist"); producers ignore it."""
        ...


class UnreachableReplicas:
    """Broker addresses that failed at the transport level, passed over by reads until a deadline."""

    def __init__(self, backoff_ms: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.backoff_s = backoff_ms / 1000
        self._clock = clock
        self._until: dict[str, float] = {}

    def mark(self, addr: str) -> None:
        self._until[addr] = self._clock() + self.backoff_s

    def clear(self, addr: str) -> None:
        self._until.pop(addr, None)

    def __contains__(self, addr: object) -> bool:
        until = self._until.get(addr) if isinstance(addr, str) else None
        if until is None or until > self._clock():
            return until is not None
        self._until.pop(str(addr), None)  # the backoff is over: try it again
        return False


def pick_replica(
    addrs: Mapping[int, str],
    broker_id: int = MASTER_ID,
    *,
    only_this: bool = False,
    exclude: Collection[str] = (),
    unreachable: Container[str] = (),
) -> FindBrokerResult | None:
    """The replica of one broker group (``addrs``: broker id -> address) a read goes to.

    Java's ``findBrokerAddressInSubscribe``: ``broker_id`` (a pull answer's
    ``suggestWhichBrokerId``) if listed, else for a slave id the next one, else (unless
    ``only_this``) another replica, the master first.  A replica in ``unreachable`` is passed
    over while another one is listed; one in ``exclude`` (it just failed) is never returned.
    """
    live = {bid: a for bid, a in addrs.items() if a not in exclude}
    wanted = [broker_id] if broker_id == MASTER_ID else [broker_id, broker_id + 1]
    order = [bid for bid in wanted if bid in live]
    if not only_this:
        order += [bid for bid in sorted(live) if bid not in order]
    if not order:
        return None
    reachable = [bid for bid in order if live[bid] not in unreachable]
    chosen = (reachable or order)[0]
    return FindBrokerResult(live[chosen], chosen)


def _member_rebalance_interval(member: Member) -> int | None:
    """A consumer's ``config.rebalance_interval_ms`` (None for producers)."""
    value = getattr(getattr(member, "config", None), "rebalance_interval_ms", None)
    return value if isinstance(value, int) and value > 0 else None


class ClientInstance:
    """Route cache, broker table, heartbeats and periodic jobs shared by producers/consumers."""

    def __init__(
        self,
        namesrv_addr: str | Sequence[str],
        *,
        config: ClientConfig | None = None,
        api: MQClientAPI | None = None,
    ) -> None:
        self.config = config or ClientConfig()
        self.api = api or MQClientAPI(namesrv_addr, config=self.config)
        self.topic_routes: dict[str, TopicRouteData] = {}
        self.broker_addr_table: dict[str, dict[int, str]] = {}
        self.unreachable = UnreachableReplicas(self.config.unreachable_broker_backoff_ms)
        self.clock: Callable[[], float] = time.monotonic
        self._failure_refresh_at: dict[str, float] = {}
        self.members: dict[str, Member] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._watchers: set[asyncio.Task[None]] = set()  # watch_route_while's route refreshes
        self._route_lock = asyncio.Lock()
        self._rebalance_wakeup = asyncio.Event()
        self._waiting_interval_ms = REBALANCE_INTERVAL_MS
        self._started = False
        self._closed = False
        self.api.register_processor(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, self._on_consumer_ids_changed)
        self.api.register_processor(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, self._on_reset_offset)
        self.api.register_processor(RequestCode.CHECK_TRANSACTION_STATE, self._on_check_transaction_state)
        self.api.register_processor(RequestCode.CONSUME_MESSAGE_DIRECTLY, self._on_consume_message_directly)

    @property
    def client_id(self) -> str:
        return self.api.client_id

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        if self._started:
            return
        self._started = True
        c = self.config
        self._tasks = [
            asyncio.create_task(
                self._every(c.poll_name_server_interval_ms, self.update_all_routes), name="route"
            ),
            asyncio.create_task(
                self._every(c.heartbeat_broker_interval_ms, self.send_heartbeat_to_all_brokers),
                name="heartbeat",
            ),
            asyncio.create_task(
                self._every(c.persist_consumer_offset_interval_ms, self._persist_all), name="persist"
            ),
            asyncio.create_task(self._rebalance_loop(), name="rebalance"),
        ]

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for task in [*self._tasks, *self._watchers]:
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=5.0)  # bounded: shutdown must never hang
        await self.api.close()

    def register(self, member: Member) -> None:
        if member.group in self.members:
            raise RocketQError(f"the group {member.group!r} is already registered on client {self.client_id}")
        self.members[member.group] = member
        interval = _member_rebalance_interval(member)
        if self._started and interval is not None and interval < self._waiting_interval_ms:
            # the loop waits with a longer interval: wake it (a consumer that joins rebalances at
            # once anyway, as Java's rebalanceImmediately() at start); it then waits the new one
            self.rebalance_immediately()

    def unregister(self, member: Member) -> None:
        self.members.pop(member.group, None)

    async def _every(self, interval_ms: int, job: Callable[[], Awaitable[Any]]) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                await job()
            except asyncio.CancelledError:
                raise
            except Exception:  # a periodic job must survive one failed round
                log.exception("periodic client job %s failed", getattr(job, "__name__", job))

    def rebalance_interval_ms(self) -> int:
        """The smallest ``rebalance_interval_ms`` of the registered consumers (REBALANCE_INTERVAL_MS
        when there is none)."""
        intervals = [_member_rebalance_interval(m) for m in self.members.values()]
        return min((i for i in intervals if i is not None), default=REBALANCE_INTERVAL_MS)

    async def _rebalance_loop(self) -> None:
        while True:
            try:
                self._waiting_interval_ms = self.rebalance_interval_ms()
                async with asyncio.timeout(self._waiting_interval_ms / 1000):
                    await self._rebalance_wakeup.wait()
            except TimeoutError:
                pass
            self._rebalance_wakeup.clear()
            await self.run_members("rebalance")

    def rebalance_immediately(self) -> None:
        self._rebalance_wakeup.set()

    async def run_members(self, what: str) -> None:
        for member in list(self.members.values()):
            try:
                await member.periodic(what)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s of group %s failed", what, member.group)

    async def _persist_all(self) -> None:
        await self.run_members("persist")

    # ------------------------------------------------------------------ routes

    async def update_topic_route(self, topic: str) -> TopicRouteData:
        """Fetch ``topic``'s route, update the tables and tell the members if it changed."""
        route = await self.api.get_topic_route(topic)
        moved: list[tuple[str, dict[int, str], dict[int, str]]] = []
        async with self._route_lock:
            old = self.topic_routes.get(topic)
            for bd in route.broker_datas:
                before = self.broker_addr_table.get(bd.broker_name)
                after = dict(bd.broker_addrs)
                if before is not None and before.get(MASTER_ID) != after.get(MASTER_ID):
                    moved.append((bd.broker_name, before, after))
                self.broker_addr_table[bd.broker_name] = after
            self.topic_routes[topic] = route
        for broker_name, before, after in moved:
            await self._on_master_changed(broker_name, before, after)
        if old != route:
            for member in list(self.members.values()):
                if topic in member.topics_in_use():
                    member.on_route_changed(topic, route)
        return route

    async def _on_master_changed(
        self, broker_name: str, before: dict[int, str], after: dict[int, str]
    ) -> None:
        """A group's master moved: drop connections to addresses that left the group, tell members."""
        new_master = after.get(MASTER_ID)
        log.info(
            "the master of broker group %s moved from %s to %s",
            broker_name,
            before.get(MASTER_ID) or "(none)",
            new_master or "(none)",
        )
        if new_master is not None:
            self.unreachable.clear(new_master)
        gone = set(before.values()) - set(after.values())
        old_master = before.get(MASTER_ID)
        if old_master is not None and old_master != new_master:
            gone.add(old_master)  # a hung master stays listed as a replica: its writes still wait
        for addr in gone:
            with contextlib.suppress(TimeoutError, RocketQError, OSError):
                async with asyncio.timeout(1.0):
                    await self.api.remoting.close_channel(addr)
        for member in list(self.members.values()):
            member.on_master_changed(broker_name, new_master)

    async def refresh_route_after_failure(self, topic: str, *, wait_s: float = 0.0) -> TopicRouteData | None:
        """Fetch ``topic``'s route again after a failed request (a master may have moved).

        At most once per ``route_refresh_on_failure_interval_ms`` per topic: within the interval
        the cached route is returned, or, with ``wait_s > 0``, the call waits (at most ``wait_s``)
        for the interval to end and refreshes then.  A failed lookup is logged and the cached
        route returned (None when there is none).
        """
        interval = self.config.route_refresh_on_failure_interval_ms / 1000
        last = self._failure_refresh_at.get(topic)
        if last is not None:
            pause = last + interval - self.clock()
            if pause > 0:
                if wait_s <= 0 or pause > wait_s:
                    return self.topic_routes.get(topic)
                await asyncio.sleep(pause)
                if self._failure_refresh_at.get(topic, last) != last:  # another caller refreshed
                    return self.topic_routes.get(topic)
        self._failure_refresh_at[topic] = self.clock()
        try:
            return await self.update_topic_route(topic)
        except RocketQError as exc:
            log.info("route refresh of %s after a failure did not succeed: %s", topic, exc)
            return self.topic_routes.get(topic)

    async def watch_route_while(self, topic: str, call: Awaitable[_T], *, answer_within_ms: int = 0) -> _T:
        """Await ``call`` (a request to a master of ``topic``), refreshing the topic's route
        (:meth:`refresh_route_after_failure`, rate-limited) every
        ``route_refresh_on_failure_interval_ms`` while it gets no answer, from
        ``answer_within_ms`` (the time a healthy broker may take, e.g. a long-polling pull's
        suspend time) plus one interval on.

        A master that hangs (stopped, or cut off) keeps its connections open, so its requests
        would only fail at their timeout; once a refresh shows that another master took over,
        the connections to the old one are closed (:meth:`update_topic_route`) and ``call``
        fails at once, so its caller can retry on the new master.
        """
        loop = asyncio.get_running_loop()
        interval = max(self.config.route_refresh_on_failure_interval_ms, MIN_WATCH_INTERVAL_MS) / 1000
        answered = asyncio.Event()

        def start_watching() -> None:
            watcher = loop.create_task(self._watch_route(topic, interval, answered), name=f"watch {topic}")
            self._watchers.add(watcher)
            watcher.add_done_callback(self._watchers.discard)

        # only a request still waiting then costs a task
        timer = loop.call_later(answer_within_ms / 1000 + interval, start_watching)
        try:
            return await call
        finally:
            timer.cancel()
            answered.set()

    async def _watch_route(self, topic: str, interval_s: float, answered: asyncio.Event) -> None:
        """Refresh ``topic``'s route every ``interval_s`` until ``answered``.  A refresh is never
        cut short (it may be telling the members that a master moved)."""
        while not answered.is_set():
            await self.refresh_route_after_failure(topic)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(interval_s):
                    await answered.wait()

    async def get_route(self, topic: str) -> TopicRouteData:
        """The cached route, fetched on first use."""
        route = self.topic_routes.get(topic)
        return route if route is not None else await self.update_topic_route(topic)

    async def update_all_routes(self) -> None:
        topics: set[str] = set()
        for member in list(self.members.values()):
            topics |= member.topics_in_use()
        for topic in sorted(topics):
            try:
                await self.update_topic_route(topic)
            except NoRouteError:
                log.debug("no route for topic %s during the periodic refresh", topic)
            except RocketQError as exc:
                log.warning("route refresh of %s failed: %s", topic, exc)

    def find_broker_addr(
        self, broker_name: str, broker_id: int = MASTER_ID, *, only_this: bool = False
    ) -> str | None:
        """The address of ``broker_id`` of ``broker_name``; else (unless ``only_this``) any replica,
        the master first."""
        addrs = self.broker_addr_table.get(broker_name)
        if not addrs:
            return None
        addr = addrs.get(broker_id)
        if addr or only_this:
            return addr
        for bid in sorted(addrs):
            return addrs[bid]
        return None

    async def find_master_addr_or_refresh(self, broker_name: str, topic: str) -> str:
        """Java's ``findBrokerAddressInPublish``: the master of ``broker_name``, never a slave
        (slaves refuse writes); raises NoRouteError when the route lists no master."""
        addr = self.find_broker_addr(broker_name, MASTER_ID, only_this=True)
        if addr is None:
            await self.refresh_route_after_failure(topic)
            addr = self.find_broker_addr(broker_name, MASTER_ID, only_this=True)
        if addr is None:
            raise NoRouteError(topic, f"the broker group {broker_name} has no master in the route")
        return addr

    # ------------------------------------------------------------------ replicas (reads)

    def find_broker_in_subscribe(
        self,
        broker_name: str,
        broker_id: int = MASTER_ID,
        *,
        only_this: bool = False,
        exclude: Collection[str] = (),
    ) -> FindBrokerResult | None:
        """Java's ``findBrokerAddressInSubscribe`` over the broker address table (see
        :func:`pick_replica`), passing over replicas marked unreachable."""
        addrs = self.broker_addr_table.get(broker_name, {})
        return pick_replica(
            addrs, broker_id, only_this=only_this, exclude=exclude, unreachable=self.unreachable
        )

    async def invoke_on_replica(
        self,
        broker_name: str,
        topic: str,
        call: Callable[[FindBrokerResult], Awaitable[_T]],
        broker_id: int = MASTER_ID,
    ) -> _T:
        """Run the read ``call`` on the replica :meth:`find_broker_in_subscribe` picks.

        A transport error (the master was killed, or hangs) marks that replica unreachable,
        refreshes the route and tries the next replica of the group, each at most once; the
        last error is raised when none answers.  Broker answers (MQBrokerError) are raised as
        they are: the replica is alive.
        """
        tried: set[str] = set()
        last: RemotingError | None = None
        while True:
            found = self.find_broker_in_subscribe(broker_name, broker_id, exclude=tried)
            if found is None and not tried:
                await self.update_topic_route(topic)
                found = self.find_broker_in_subscribe(broker_name, broker_id)
            if found is None:
                if last is not None:
                    raise last
                raise NoRouteError(topic, f"the broker group {broker_name} is not in the route")
            try:
                result = await call(found)
            except RemotingError as exc:
                log.info("%s of %s does not answer (%s); trying another replica", found, broker_name, exc)
                self.unreachable.mark(found.broker_addr)
                tried.add(found.broker_addr)
                last = exc
                await self.refresh_route_after_failure(topic)
                continue
            self.unreachable.clear(found.broker_addr)
            return result

    # ------------------------------------------------------------------ heartbeat

    def heartbeat_body(self) -> tuple[dict[str, Any], bool]:
        producers: list[dict[str, Any]] = []
        consumers: list[dict[str, Any]] = []
        for member in self.members.values():
            kind, data = member.heartbeat_data()
            (consumers if kind == "consumer" else producers).append(data)
        body = {"clientID": self.client_id, "consumerDataSet": consumers, "producerDataSet": producers}
        return body, bool(consumers)

    async def send_heartbeat_to_all_brokers(self) -> None:
        body, has_consumer = self.heartbeat_body()
        if not body["consumerDataSet"] and not body["producerDataSet"]:
            return
        for broker_name, addrs in list(self.broker_addr_table.items()):
            for broker_id, addr in sorted(addrs.items()):
                if broker_id != MASTER_ID and not has_consumer:
                    continue
                try:
                    await self.api.send_heartbeat(addr, body)
                except RocketQError as exc:
                    log.warning("heartbeat to %s (%s) failed: %s", broker_name, addr, exc)

    async def send_heartbeat_to(self, addr: str) -> None:
        """One HEART_BEAT with every member's data to ``addr`` (a broker just started using)."""
        body, _ = self.heartbeat_body()
        await self.api.send_heartbeat(addr, body)

    async def unregister_from_brokers(
        self, *, producer_group: str | None = None, consumer_group: str | None = None
    ) -> None:
        for addrs in list(self.broker_addr_table.values()):
            for addr in addrs.values():
                with contextlib.suppress(RocketQError):
                    await self.api.unregister_client(
                        addr, producer_group=producer_group, consumer_group=consumer_group
                    )

    # ------------------------------------------------------------------ broker -> client

    async def _on_consumer_ids_changed(
        self, cmd: RemotingCommand, channel: Channel
    ) -> RemotingCommand | None:
        with contextlib.suppress(RocketQError):
            group = h.NotifyConsumerIdsChangedRequestHeader.from_ext_fields(cmd.ext_fields).consumer_group
            log.info("broker says the members of %s changed; rebalancing", group)
        self.rebalance_immediately()
        return None if cmd.is_oneway else cmd.make_response(ResponseCode.SUCCESS)

    async def _on_reset_offset(self, cmd: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        """RESET_CONSUMER_CLIENT_OFFSET (mqadmin resetOffsetByTime): move a group's queues."""
        header = h.ResetConsumerClientOffsetRequestHeader.from_ext_fields(cmd.ext_fields)
        member = self.members.get(header.group)
        reset = getattr(member, "reset_offset", None)
        if reset is not None:
            await reset(header.topic, parse_offset_table(cmd.body))
        return None if cmd.is_oneway else cmd.make_response(ResponseCode.SUCCESS)

    async def _on_consume_message_directly(
        self, cmd: RemotingCommand, channel: Channel
    ) -> RemotingCommand | None:
        """CONSUME_MESSAGE_DIRECTLY (mqadmin queryMsgById -g -d): the group's push consumer's
        listener consumes the message in the body (Java's ClientRemotingProcessor)."""
        group = cmd.ext_fields.get("consumerGroup", "")
        member = self.members.get(group)
        consume = getattr(member, "consume_message_directly", None)
        remark = f"The Consumer Group <{group}> not exist in this consumer"
        if consume is None:
            return cmd.make_response(ResponseCode.SYSTEM_ERROR, remark)
        try:
            msg = next(iter_stored_messages(cmd.body), None)
        except RocketQError as exc:
            return cmd.make_response(ResponseCode.SYSTEM_ERROR, f"the message cannot be decoded: {exc}")
        if msg is None:
            return cmd.make_response(ResponseCode.SYSTEM_ERROR, "CONSUME_MESSAGE_DIRECTLY carries no message")
        result = await consume(msg, cmd.ext_fields.get("brokerName", ""))
        if result is None:  # a member that has no listener to run (a simple consumer)
            return cmd.make_response(ResponseCode.SYSTEM_ERROR, remark)
        return cmd.make_response(ResponseCode.SUCCESS, body=result.encode())

    async def _on_check_transaction_state(
        self, cmd: RemotingCommand, channel: Channel
    ) -> RemotingCommand | None:
        """CHECK_TRANSACTION_STATE (oneway): hand the half message to its group's producer.

        As Java's ClientRemotingProcessor, nothing is ever answered here: the producer replies
        later with a oneway END_TRANSACTION (``fromTransactionCheck=true``) to the asking broker.
        """
        peer = getattr(channel, "remote_address", "?")
        try:
            header = h.CheckTransactionStateRequestHeader.from_ext_fields(cmd.ext_fields)
            msg = next(iter_stored_messages(cmd.body), None)
        except Exception as exc:  # bad bytes from the wire: log, never answer
            log.warning("CHECK_TRANSACTION_STATE from %s cannot be decoded: %s", peer, exc)
            return None
        if msg is None:
            log.warning("CHECK_TRANSACTION_STATE from %s carries no message", peer)
            return None
        group = msg.properties.get(MessageConst.PRODUCER_GROUP)
        member = self.members.get(group) if group else None
        check = getattr(member, "check_transaction_state", None)
        if check is None:
            log.warning(
                "CHECK_TRANSACTION_STATE from %s for group %r: no transaction producer of that "
                "group on client %s",
                peer,
                group,
                self.client_id,
            )
            return None
        check(peer, msg, header)
        return None
