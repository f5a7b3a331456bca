"""The store maintenance requests on an in-process broker, each checked on its own:
CLEAN_EXPIRED_CONSUMEQUEUE removes only consume queue files below the CommitLog minimum (the
CommitLog files are deleted directly, so no retention round runs); CLEAN_UNUSED_TOPIC drops the
queues of a topic missing from the topic table and keeps the configured ones; RESET_MASTER_FLUSH_OFFSET
is refused with its reason."""

from __future__ import annotations

from pathlib import Path

from rocketq.broker.server import BrokerController
from rocketq.broker.testing import put_test_message, run_broker
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.vocabulary import TopicConfig
from rocketq.client.transport.aio import RemotingClient

SMALL = {
    "mappedFileSizeCommitLog": str(64 * 1024),
    "maxMessageSize": str(16 * 1024),
    "mappedFileSizeConsumeQueue": str(20 * 10),  # 10 units per consume queue file
    "cleanResourceInterval": str(3_600_000),  # no retention round of its own during the test
}


def test_clean_expired_consume_queue_and_unused_topic(tmp_path: Path) -> None:
    async def scenario(controller: BrokerController, client: RemotingClient, addr: str) -> None:
        assert controller.ctx is not None
        store, topics = controller.ctx.store, controller.ctx.topics
        for _ in range(60):
            put_test_message(store, "T", b"x" * 4000)
        put_test_message(store, "Unused", b"y")
        assert store.wait_dispatched()
        assert store.get_min_offset_in_queue("T", 0) == 0
        deleted = store.commit_log.mfq.delete_files_if(lambda mf: True, 2)
        assert deleted == 2 and store.min_phy_offset == 2 * 64 * 1024
        assert store.get_min_offset_in_queue("T", 0) == 0  # nothing cleaned the queue yet

        cmd = RemotingCommand.request(RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE)
        answer = await client.invoke(addr, cmd, 5000)
        assert answer.code == ResponseCode.SUCCESS and answer.remark is not None
        assert int(answer.remark.split()[1]) >= 1, answer.remark
        assert store.get_min_offset_in_queue("T", 0) >= 10

        assert "T" not in topics and "Unused" not in topics
        topics.update(TopicConfig(topic_name="T", read_queue_nums=1, write_queue_nums=1))
        answer = await client.invoke(addr, RemotingCommand.request(RequestCode.CLEAN_UNUSED_TOPIC), 5000)
        assert answer.code == ResponseCode.SUCCESS and answer.remark == "cleaned unused topics ['Unused']"
        assert "Unused" not in store.topics() and "T" in store.topics()

        cmd = RemotingCommand.request(RequestCode.RESET_MASTER_FLUSH_OFFSET, {"masterFlushOffset": "0"})
        answer = await client.invoke(addr, cmd, 5000)
        assert answer.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        assert "nothing to reset" in (answer.remark or "")

    run_broker(tmp_path, scenario, **SMALL)
