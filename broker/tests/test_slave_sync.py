"""SlaveSynchronize: a slave's managers copy a real master's metadata (GET_ALL_* over TCP).

The master is a real ``BrokerController`` in this process; the slave is a context around its own
store and ``config/`` directory, synchronised round by round with :meth:`SlaveSynchronizer.sync_all`.
A fake "master" that answers garbage checks that nothing on the slave is lost to bad input.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path

from rocketq.broker.config import BrokerConfig
from rocketq.broker.config_loader import build_store_config, load_broker_config
from rocketq.broker.metadata import (
    DELAY_OFFSET_JSON,
    SUBSCRIPTION_GROUP_JSON,
    TOPICS_JSON,
    SubscriptionGroupConfig,
    load_json_file,
)
from rocketq.broker.offset_manager import ConsumerOffsetManager
from rocketq.broker.processor.context import BrokerContext, build_context
from rocketq.broker.server import BrokerController
from rocketq.broker.slave_sync import SlaveSynchronizer, SyncOutcome, SyncReport
from rocketq.broker.store.message_store import MessageStore
from rocketq.broker.subscription_manager import SubscriptionGroupManager
from rocketq.broker.testing import SMALL_STORE_CONF
from rocketq.broker.topic_manager import DataVersion, TopicConfig, TopicConfigManager
from rocketq.client.launcher import free_port
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.headers import CreateTopicRequestHeader, UpdateConsumerOffsetRequestHeader
from rocketq.client.transport.aio import RemotingClient
from rocketq.server import Channel, RemotingServer

U, S, F, N = SyncOutcome.UPDATED, SyncOutcome.UNCHANGED, SyncOutcome.FAILED, SyncOutcome.NO_MASTER


class Slave:
    """A slave broker's context (own store, own config dir) and its synchroniser."""

    def __init__(self, ctx: BrokerContext, sync: SlaveSynchronizer, config_dir: Path) -> None:
        self.ctx, self.sync, self.config_dir = ctx, sync, config_dir
        self.master: str | None = None

    def file(self, name: str) -> object:
        return load_json_file(str(self.config_dir / name))


Scenario = Callable[[BrokerController, RemotingClient, str, Slave], Awaitable[None]]


def run(tmp_path: Path, scenario: Scenario) -> None:
    master_props = {**SMALL_STORE_CONF, "storePathRootDir": str(tmp_path / "master")}
    slave_cfg = load_broker_config(
        None,
        overrides={
            **SMALL_STORE_CONF,
            "storePathRootDir": str(tmp_path / "slave"),
            "brokerRole": "SLAVE",
            "brokerId": "1",
        },
    )

    async def main() -> None:
        master = BrokerController(load_broker_config(None, overrides=master_props))
        _, port = await master.start()
        client = RemotingClient()
        store = MessageStore(build_store_config(slave_cfg))
        await asyncio.to_thread(store.start)
        config_dir = Path(store.config.config_dir)
        ctx = build_context(slave_cfg, store, asyncio.get_running_loop(), config_dir=str(config_dir))
        slave = Slave(
            ctx,
            SlaveSynchronizer(ctx, client, master_addr=lambda: slave.master, config_dir=str(config_dir)),
            config_dir,
        )
        slave.master = f"127.0.0.1:{port}"
        try:
            await scenario(master, client, slave.master, slave)
        finally:
            await slave.sync.close()
            ctx.hold.shutdown()
            for ex in (ctx.send_executor, ctx.pull_executor, ctx.query_executor):
                ex.shutdown(wait=True)
            await asyncio.to_thread(store.shutdown)
            await client.close()
            await master.shutdown(grace_s=1)

    asyncio.run(main())


async def create_topic(client: RemotingClient, addr: str, topic: str, queues: int = 4) -> None:
    header = CreateTopicRequestHeader(
        topic=topic,
        default_topic="TBW102",
        read_queue_nums=queues,
        write_queue_nums=queues,
        perm=6,
        topic_filter_type="SINGLE_TAG",
    )
    cmd = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext_fields())
    assert (await client.invoke(addr, cmd, 5000)).code == ResponseCode.SUCCESS


async def commit(
    client: RemotingClient, addr: str, group: str, topic: str, queue_id: int, offset: int
) -> None:
    header = UpdateConsumerOffsetRequestHeader(
        consumer_group=group, topic=topic, queue_id=queue_id, commit_offset=offset
    )
    cmd = RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, header.to_ext_fields())
    assert (await client.invoke(addr, cmd, 5000)).code == ResponseCode.SUCCESS


async def create_group(client: RemotingClient, addr: str, sgc: SubscriptionGroupConfig) -> None:
    cmd = RemotingCommand.request(
        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=json.dumps(sgc.to_json()).encode()
    )
    assert (await client.invoke(addr, cmd, 5000)).code == ResponseCode.SUCCESS


def outcomes(report: SyncReport) -> tuple[SyncOutcome, ...]:
    return report.outcomes


def test_slave_copies_topics_offsets_groups_and_delay_offsets(tmp_path: Path) -> None:
    async def scenario(master: BrokerController, client: RemotingClient, addr: str, slave: Slave) -> None:
        await create_topic(client, addr, "Orders", 6)
        await commit(client, addr, "cg", "Orders", 2, 17)
        group = SubscriptionGroupConfig(
            group_name="cg-strict", retry_max_times=3, which_broker_when_consume_slowly=1
        )
        await create_group(client, addr, group)
        assert master.ctx is not None and master.ctx.schedule is not None
        master.ctx.schedule.replace_offsets({1: 5, 3: 9})
        assert slave.ctx.topics.select("Orders") is None

        report = await slave.sync.sync_all()
        assert report.master_addr == addr and report.errors == ()
        assert outcomes(report) == (U, U, U, U)
        ctx = slave.ctx
        assert ctx.topics.select("Orders") == master.ctx.topics.select("Orders")
        assert ctx.topics.data_version == master.ctx.topics.data_version
        assert ctx.offsets.query_offset("cg", "Orders", 2) == 17 and ctx.offsets.dirty
        assert ctx.groups.get("cg-strict") == group
        assert ctx.groups.data_version == master.ctx.groups.data_version
        # persisted on the slave as the master persists them
        topics_doc = slave.file(TOPICS_JSON)
        assert isinstance(topics_doc, dict) and "Orders" in topics_doc["topicConfigTable"]
        groups_doc = slave.file(SUBSCRIPTION_GROUP_JSON)
        assert isinstance(groups_doc, dict) and "cg-strict" in groups_doc["subscriptionGroupTable"]
        assert slave.file(DELAY_OFFSET_JSON) == {"offsetTable": {"1": 5, "3": 9}}

        # nothing changed on the master: nothing changes on the slave
        assert outcomes(await slave.sync.sync_all()) == (S, S, S, S)
        # a change on the master arrives at the next round
        await commit(client, addr, "cg", "Orders", 2, 21)
        await create_topic(client, addr, "Payments")
        assert outcomes(await slave.sync.sync_all()) == (U, U, S, S)
        assert ctx.offsets.query_offset("cg", "Orders", 2) == 21 and ctx.topics.select("Payments") is not None

    run(tmp_path, scenario)


def test_offsets_merge_as_java_put_all(tmp_path: Path) -> None:
    async def scenario(master: BrokerController, client: RemotingClient, addr: str, slave: Slave) -> None:
        await commit(client, addr, "cg", "Orders", 0, 10)
        await slave.sync.sync_all()
        # commits the slave received while the master was away
        slave.ctx.offsets.commit_offset("cg", "Orders", 0, 15)  # a key the master has
        slave.ctx.offsets.commit_offset("cg", "Other", 0, 7)  # a key only the slave has
        report = await slave.sync.sync_all()
        assert report.consumer_offsets is U
        assert slave.ctx.offsets.query_offset("cg", "Orders", 0) == 10  # the master's value wins
        assert slave.ctx.offsets.query_offset("cg", "Other", 0) == 7  # kept until the master has it

    run(tmp_path, scenario)


def test_no_master_or_a_dead_master_leaves_the_slave_as_it_was(tmp_path: Path) -> None:
    async def scenario(master: BrokerController, client: RemotingClient, addr: str, slave: Slave) -> None:
        await create_topic(client, addr, "Orders")
        await commit(client, addr, "cg", "Orders", 0, 3)
        await slave.sync.sync_all()
        before = (slave.ctx.topics.encode(), slave.ctx.offsets.encode(), slave.ctx.groups.encode())
        slave.master = None
        assert outcomes(await slave.sync.sync_all()) == (N, N, N, N)
        slave.master = slave.ctx.broker_addr  # a broker never syncs from itself
        assert outcomes(await slave.sync.sync_all()) == (N, N, N, N)
        slave.master = f"127.0.0.1:{free_port()}"  # nothing listens there
        report = await slave.sync.sync_all()
        assert outcomes(report) == (F, F, F, F) and len(report.errors) == 4
        assert all("GET_ALL_" in e for e in report.errors)
        assert (slave.ctx.topics.encode(), slave.ctx.offsets.encode(), slave.ctx.groups.encode()) == before

    run(tmp_path, scenario)


def test_garbage_from_the_master_changes_nothing(tmp_path: Path) -> None:
    bodies = {
        RequestCode.GET_ALL_TOPIC_CONFIG: b'{"topicConfigTable": {"Bad": 5}, "dataVersion": {"counter": 9}}',
        RequestCode.GET_ALL_CONSUMER_OFFSET: b'{"offsetTable": {"T@g": {"zero": 1}}}',
        RequestCode.GET_ALL_DELAY_OFFSET: b"not json at all",
        RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: b"[1, 2]",
    }

    async def scenario(master: BrokerController, client: RemotingClient, addr: str, slave: Slave) -> None:
        await create_topic(client, addr, "Orders")
        await commit(client, addr, "cg", "Orders", 0, 3)
        assert outcomes(await slave.sync.sync_all()) == (U, U, U, U)
        before = (
            slave.ctx.topics.encode(),
            slave.ctx.offsets.encode(),
            slave.ctx.groups.encode(),
            slave.file(DELAY_OFFSET_JSON),
        )
        fake = RemotingServer(host="127.0.0.1", port=0)
        for code, body in bodies.items():
            fake.register(code, answer(body))
        host, port = await fake.start()
        try:
            slave.master = f"{host}:{port}"
            report = await slave.sync.sync_all()
        finally:
            await fake.stop(1)
        assert outcomes(report) == (F, F, F, F), report.errors
        assert "GET_ALL_DELAY_OFFSET: the body does not parse" in report.errors[2]
        after = (
            slave.ctx.topics.encode(),
            slave.ctx.offsets.encode(),
            slave.ctx.groups.encode(),
            slave.file(DELAY_OFFSET_JSON),
        )
        assert after == before

    run(tmp_path, scenario)


def answer(body: bytes) -> Callable[[RemotingCommand, Channel], Awaitable[RemotingCommand | None]]:
    async def processor(request: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        return request.make_response(ResponseCode.SUCCESS, body=body)

    return processor


def test_master_change_triggers_a_round(tmp_path: Path) -> None:
    async def scenario(master: BrokerController, client: RemotingClient, addr: str, slave: Slave) -> None:
        await create_topic(client, addr, "Orders")
        slave.sync.master_changed(addr, "127.0.0.1:1")
        # the topics land before the round's other steps finish: wait for the round's report
        for _ in range(500):
            if slave.ctx.topics.select("Orders") is not None and slave.sync.last_report is not None:
                break
            await asyncio.sleep(0.02)
        assert slave.ctx.topics.select("Orders") is not None
        report = slave.sync.last_report
        assert report is not None and report.topics is U
        slave.sync.master_changed(None, None)  # the master went away: nothing to do
        await slave.sync.close()

    run(tmp_path, scenario)


# -- the managers' entry points ------------------------------------------------------------------
def test_replace_all_follows_the_master_data_version() -> None:
    written: list[dict[str, object]] = []
    topics = TopicConfigManager(BrokerConfig(broker_name="b"), persist=written.append)
    version = DataVersion(timestamp=123, counter=7)
    table = {"A": TopicConfig(topic_name="A", read_queue_nums=2, write_queue_nums=2)}
    assert topics.replace_all(table, version)
    assert topics.topics() == ["A"] and topics.data_version == version and len(written) == 1
    assert not topics.replace_all({}, version)  # same version: nothing to do
    assert topics.topics() == ["A"] and len(written) == 1

    groups = SubscriptionGroupManager(persist=written.append)
    assert groups.replace_all({"g": SubscriptionGroupConfig(group_name="g")}, version)
    assert groups.groups() == ["g"] and groups.data_version == version
    assert not groups.replace_all({}, version)

    offsets = ConsumerOffsetManager()
    assert offsets.put_all({"T@g": {0: 4, 1: 5}}) and offsets.dirty
    offsets.dirty = False
    assert not offsets.put_all({"T@g": {0: 4, 1: 5}}) and not offsets.dirty
    assert offsets.put_all({"T@g": {0: 6}})  # the whole entry is the master's
    assert offsets.query_offsets("g", "T") == {0: 6}
