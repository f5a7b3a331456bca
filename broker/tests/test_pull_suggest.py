"""``suggestWhichBrokerId`` and slave reads in the pull processor (RocketMQ 4.x rules).

The pure decision (:func:`suggest_which_broker`), the page-cache heuristic on a real store
(:func:`is_suggest_pulling_from_slave`), and the processor on a real store in a temporary directory,
as a master with and without ``slaveReadEnable`` and as a slave (no offset correction, no commit).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import cast

import pytest

from rocketq.broker.config import BrokerConfig
from rocketq.broker.config_loader import build_store_config, load_broker_config
from rocketq.broker.metadata import SubscriptionGroupConfig
from rocketq.broker.processor.context import BrokerContext, build_context
from rocketq.broker.processor.pull import (
    PullMessageProcessor,
    PullSuggestion,
    is_suggest_pulling_from_slave,
    suggest_which_broker,
    total_physical_memory_bytes,
)
from rocketq.broker.store.message_store import MessageStore
from rocketq.broker.store.record_batch import MessageToStore
from rocketq.broker.testing import SMALL_STORE_CONF
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.headers import PullMessageRequestHeader
from rocketq.client.remoting.properties import encode_properties
from rocketq.client.remoting.vocabulary import MASTER_ID, PullSysFlag, TopicConfig
from rocketq.server import Channel

TOPIC = "T1"
BODY = b"x" * 1000
COUNT = 10
SLAVE_CONF = {"brokerRole": "SLAVE", "brokerId": "1"}


# -- the decision ------------------------------------------------------------------------------
GROUP = SubscriptionGroupConfig(group_name="cg", broker_id=0, which_broker_when_consume_slowly=2)


def decide(
    code: ResponseCode, *, slave: bool = False, read: bool = False, check: bool = False, lagging: bool = False
) -> PullSuggestion:
    return suggest_which_broker(
        code,
        GROUP,
        is_slave=slave,
        slave_read_enable=read,
        offset_check_in_slave=check,
        pulling_from_slave=lagging,
    )


def test_without_slave_read_the_master_is_always_suggested() -> None:
    for code in (ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_OFFSET_MOVED):
        assert decide(code, lagging=True) == PullSuggestion(code, MASTER_ID)
    # Java 4.x's PULL_RETRY_IMMEDIATELY for a slave without slaveReadEnable is overwritten by the
    # status's code: the slave serves the read and points back at the master
    assert decide(ResponseCode.SUCCESS, slave=True, lagging=True) == PullSuggestion(
        ResponseCode.SUCCESS, MASTER_ID
    )


def test_slave_read_suggests_the_slowly_consuming_broker_when_lagging() -> None:
    assert decide(ResponseCode.SUCCESS, read=True, lagging=True) == PullSuggestion(ResponseCode.SUCCESS, 2)
    assert decide(ResponseCode.SUCCESS, read=True) == PullSuggestion(ResponseCode.SUCCESS, GROUP.broker_id)
    assert decide(ResponseCode.SUCCESS, slave=True, read=True, lagging=True).suggest_which_broker_id == 2


def test_a_slave_never_moves_a_consumer_offset_unless_offset_check_in_slave() -> None:
    moved = ResponseCode.PULL_OFFSET_MOVED
    expected = PullSuggestion(ResponseCode.PULL_RETRY_IMMEDIATELY, GROUP.broker_id)
    assert decide(moved, slave=True) == expected
    assert decide(moved, slave=True, read=True, lagging=True) == expected
    assert decide(moved, slave=True, check=True) == PullSuggestion(moved, MASTER_ID)
    assert decide(moved) == PullSuggestion(moved, MASTER_ID)  # a master corrects


def test_machine_memory_is_known_here() -> None:
    memory = total_physical_memory_bytes()
    assert memory is not None and memory > 1 << 20


# -- a real store --------------------------------------------------------------------------------
def config(tmp_path: Path, **conf: str) -> BrokerConfig:
    return load_broker_config(
        None, overrides={**SMALL_STORE_CONF, "storePathRootDir": str(tmp_path / "store"), **conf}
    )


def fill(store: MessageStore, count: int = COUNT) -> None:
    for i in range(count):
        result = store.put_message(
            MessageToStore(
                topic=TOPIC,
                queue_id=0,
                body=BODY,
                properties=encode_properties({"UNIQ_KEY": f"K{i}"}),
                born_timestamp=int(time.time() * 1000),
                born_host=("127.0.0.1", 1),
                store_host=("127.0.0.1", 2),
            )
        )
        assert result.is_ok
    assert store.wait_dispatched()


def test_lag_heuristic_on_a_real_store(tmp_path: Path) -> None:
    store = MessageStore(build_store_config(config(tmp_path)))
    store.start()
    try:
        fill(store)
        cq = store.find_consume_queue(TOPIC, 0)
        unit = cq.unit_at(1) if cq is not None else None
        assert unit is not None
        behind = store.max_phy_offset - unit[0]
        assert 8 * len(BODY) < behind < 10 * len(BODY) + 2000

        def lagging(next_offset: int, memory: int | None, ratio: int = 40, requested: int = 0) -> bool:
            return is_suggest_pulling_from_slave(store, TOPIC, 0, requested, next_offset, memory, ratio)

        # 40 % of memory against the bytes after the last record examined (queue offset next - 1)
        assert lagging(2, memory=int(behind / 0.4) - 100)
        assert not lagging(2, memory=int(behind / 0.4) + 100)
        assert not lagging(COUNT, memory=int(behind / 0.4) - 100)  # at the tail nothing is behind
        assert lagging(COUNT, memory=1 << 40, ratio=0)  # ratio 0: anything behind the end of the last record
        assert not lagging(2, memory=None)  # memory unknown: never suggest
        assert not lagging(2, memory=10, requested=2)  # the pull examined nothing
    finally:
        store.shutdown()


# -- the processor ---------------------------------------------------------------------------------
Scenario = Callable[[BrokerContext, PullMessageProcessor], Awaitable[None]]


def run(tmp_path: Path, scenario: Scenario, *, memory_bytes: int, **conf: str) -> None:
    """Fill a store as a master, reopen it with ``conf`` and run ``scenario`` on its pull processor."""
    master_store = MessageStore(build_store_config(config(tmp_path)))
    master_store.start()
    try:
        fill(master_store)
    finally:
        master_store.shutdown()
    cfg = config(tmp_path, **conf)

    async def main() -> None:
        store = MessageStore(build_store_config(cfg))
        await asyncio.to_thread(store.start)
        ctx = build_context(cfg, store, asyncio.get_running_loop())
        ctx.topics.update(TopicConfig(topic_name=TOPIC, read_queue_nums=1, write_queue_nums=1))
        try:
            await scenario(ctx, PullMessageProcessor(ctx, memory_bytes=memory_bytes))
        finally:
            ctx.hold.shutdown()
            for ex in (ctx.send_executor, ctx.pull_executor, ctx.query_executor):
                ex.shutdown(wait=True)
            await asyncio.to_thread(store.shutdown)

    asyncio.run(main())


async def pull(
    processor: PullMessageProcessor, offset: int, *, max_msgs: int = 2, commit_offset: int | None = None
) -> RemotingCommand:
    flags = PullSysFlag.SUBSCRIPTION | (PullSysFlag.COMMIT_OFFSET if commit_offset is not None else 0)
    header = PullMessageRequestHeader(
        consumer_group="cg",
        topic=TOPIC,
        queue_id=0,
        queue_offset=offset,
        max_msg_nums=max_msgs,
        sys_flag=int(flags),
        commit_offset=commit_offset or 0,
        suspend_timeout_millis=0,
        subscription="*",
        sub_version=0,
    )
    request = RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext_fields())
    response = await processor.process(request, cast(Channel, None))
    assert response is not None
    return response


def suggested(response: RemotingCommand) -> int:
    return int(response.ext_fields["suggestWhichBrokerId"])


#: a "machine" whose 40 % holds about two records: a consumer more than two records behind lags
TINY_MEMORY = int(2.5 * (len(BODY) + 200) / 0.4)


@pytest.mark.parametrize("slave_read", ["true", "false"])
def test_master_suggests_a_slave_only_with_slave_read_enable(tmp_path: Path, slave_read: str) -> None:
    async def scenario(ctx: BrokerContext, processor: PullMessageProcessor) -> None:
        behind = await pull(processor, 0)
        assert behind.code == ResponseCode.SUCCESS
        assert suggested(behind) == (1 if slave_read == "true" else MASTER_ID)  # default whichBroker... = 1
        at_tail = await pull(processor, COUNT - 1)
        assert at_tail.code == ResponseCode.SUCCESS and suggested(at_tail) == MASTER_ID
        # the group's settings decide where a lagging consumer goes, and where a caught-up one goes
        ctx.groups.update(
            SubscriptionGroupConfig(group_name="cg", broker_id=0, which_broker_when_consume_slowly=3)
        )
        assert suggested(await pull(processor, 0)) == (3 if slave_read == "true" else MASTER_ID)
        moved = await pull(processor, COUNT + 5)
        assert moved.code == ResponseCode.PULL_OFFSET_MOVED and moved.ext_fields["nextBeginOffset"] == "0"

    run(tmp_path, scenario, memory_bytes=TINY_MEMORY, slaveReadEnable=slave_read)


def test_master_with_plenty_of_memory_keeps_consumers_on_the_master(tmp_path: Path) -> None:
    async def scenario(ctx: BrokerContext, processor: PullMessageProcessor) -> None:
        assert suggested(await pull(processor, 0)) == MASTER_ID

    run(tmp_path, scenario, memory_bytes=1 << 34, slaveReadEnable="true")


def test_ratio_comes_from_broker_conf(tmp_path: Path) -> None:
    async def scenario(ctx: BrokerContext, processor: PullMessageProcessor) -> None:
        assert ctx.config.access_message_in_memory_max_ratio_percent == 0
        assert suggested(await pull(processor, 0)) == 1

    run(tmp_path, scenario, memory_bytes=1 << 34, slaveReadEnable="true", accessMessageInMemoryMaxRatio="0")


def test_master_applies_the_piggy_backed_commit(tmp_path: Path) -> None:
    async def scenario(ctx: BrokerContext, processor: PullMessageProcessor) -> None:
        await pull(processor, 4, commit_offset=4)
        assert ctx.offsets.query_offset("cg", TOPIC, 0) == 4

    run(tmp_path, scenario, memory_bytes=1 << 34)


def test_slave_serves_reads_without_moving_offsets(tmp_path: Path) -> None:
    async def scenario(ctx: BrokerContext, processor: PullMessageProcessor) -> None:
        assert not ctx.config.is_master and not ctx.config.slave_read_enable
        found = await pull(processor, 3, commit_offset=3)
        assert found.code == ResponseCode.SUCCESS and found.ext_fields["nextBeginOffset"] == "5"
        assert suggested(found) == MASTER_ID
        assert ctx.offsets.query_offset("cg", TOPIC, 0) == -1  # the commit flag is ignored on a slave
        # a consumer ahead of this slave (the master had more): retry, keep the offset
        ahead = await pull(processor, COUNT + 5)
        assert ahead.code == ResponseCode.PULL_RETRY_IMMEDIATELY
        assert ahead.ext_fields["nextBeginOffset"] == str(COUNT + 5) and suggested(ahead) == 0
        tail = await pull(processor, COUNT)
        assert tail.code == ResponseCode.PULL_NOT_FOUND and tail.ext_fields["nextBeginOffset"] == str(COUNT)

    run(tmp_path, scenario, memory_bytes=TINY_MEMORY, **SLAVE_CONF)


def test_slave_with_offset_check_corrects_like_a_master(tmp_path: Path) -> None:
    async def scenario(ctx: BrokerContext, processor: PullMessageProcessor) -> None:
        moved = await pull(processor, COUNT + 5)
        assert moved.code == ResponseCode.PULL_OFFSET_MOVED and moved.ext_fields["nextBeginOffset"] == "0"

    run(tmp_path, scenario, memory_bytes=TINY_MEMORY, offsetCheckInSlave="true", **SLAVE_CONF)


def test_slave_with_slave_read_enable_suggests_by_lag(tmp_path: Path) -> None:
    async def scenario(ctx: BrokerContext, processor: PullMessageProcessor) -> None:
        assert suggested(await pull(processor, 0)) == 1
        assert suggested(await pull(processor, COUNT - 1)) == 0

    run(tmp_path, scenario, memory_bytes=TINY_MEMORY, slaveReadEnable="true", **SLAVE_CONF)
