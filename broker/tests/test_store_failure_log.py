"""A failing disk under dispatch and flush: logged once per state change, never escaping to callers."""

from __future__ import annotations

import errno
import logging
import time
from pathlib import Path

import pytest

from rocketq.broker.store.config import FlushDiskType, StoreConfig
from rocketq.broker.store.consume_queue import ConsumeQueue
from rocketq.broker.store.errors import StoreIOError
from rocketq.broker.store.flush import FailureLog
from rocketq.broker.store.message_store import MessageStore
from rocketq.broker.store.record_batch import MessageToStore
from rocketq.broker.store.status import PutMessageStatus

HOST = ("127.0.0.1", 10911)


def _cfg(root: Path) -> StoreConfig:
    return StoreConfig(
        store_path_root_dir=str(root),
        mapped_file_size_commit_log_bytes=64 * 1024,
        mapped_file_size_consume_queue_units=100,
        max_message_size_bytes=16 * 1024,
        flush_disk_type=FlushDiskType.ASYNC_FLUSH,
        clean_resource_interval_ms=3_600_000,
    )


def _msg(i: int) -> MessageToStore:
    return MessageToStore(
        topic="TopicA",
        queue_id=0,
        body=b"m%05d" % i,
        properties={"UNIQ_KEY": f"U{i:08d}"},
        born_timestamp=int(time.time() * 1000),
        born_host=HOST,
        store_host=HOST,
    )


def test_failure_log_logs_entering_and_leaving_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    failures = FailureLog("flushing X")
    disk_full = StoreIOError("cannot write: [Errno 28] No space left on device")
    for _ in range(50):
        failures.failed(disk_full)
    failures.succeeded()
    failures.succeeded()
    records = [r for r in caplog.records if "flushing X" in r.getMessage()]
    assert len(records) == 2, [r.getMessage() for r in records]
    entered, left = records
    assert entered.levelno == logging.ERROR and "disk holding the store is full" in entered.getMessage()
    assert entered.exc_info is None  # an I/O error: no traceback
    assert left.levelno == logging.WARNING and "recovered after 50 failed rounds" in left.getMessage()


def test_failure_log_other_errors_name_the_generic_remedy_and_keep_the_trace(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR)
    failures = FailureLog("reput")
    failures.failed(OSError(errno.EIO, "Input/output error"))
    failures.succeeded()
    failures.failed(KeyError("bug"))
    io, bug = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert "mounted, writable and healthy" in io.getMessage() and io.exc_info is None
    assert bug.exc_info is not None  # not an I/O error: a bug, so the traceback is kept once


def test_dispatch_on_a_full_disk_never_raises_and_recovers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="rocketq.broker.store.dispatch")
    real = ConsumeQueue.put_units
    failing = True

    def put_units(self: ConsumeQueue, first: int, units: bytes | bytearray, end: int) -> None:
        if failing:
            raise StoreIOError("cannot extend the ConsumeQueue: [Errno 28] No space left on device")
        real(self, first, units, end)

    monkeypatch.setattr(ConsumeQueue, "put_units", put_units)
    with MessageStore(_cfg(tmp_path)) as store:
        for i in range(20):
            assert store.put_message(_msg(i)).status is PutMessageStatus.PUT_OK
            store.dispatch_appended()  # what the broker's event loop calls: must not raise
        time.sleep(0.5)  # reput thread retries every 0.1 s: several failing rounds
        errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
        assert len(errors) == 1, [r.getMessage() for r in errors]
        assert "No space left" in errors[0].getMessage() and "free space" in errors[0].getMessage()
        assert errors[0].exc_info is None
        failing = False
        assert store.wait_dispatched()
        assert store.get_max_offset_in_queue("TopicA", 0) == 20
        for _ in range(100):  # the recovery line follows the round that caught up
            recovered = [r for r in caplog.records if "recovered after" in r.getMessage()]
            if recovered:
                break
            time.sleep(0.05)
        assert len(recovered) == 1
