"""The event loop rocketq builds for its own loops (uvloop's by default, asyncio's when asked), and
the background loop's ``run``: results, exceptions, timeouts and refusals as the blocking APIs see them."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest
import uvloop

from rocketq.client.errors import ClientError
from rocketq.client.loop import BackgroundLoop
from rocketq.client.transport import event_loop


def test_uvloop_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(event_loop.EVENT_LOOP_ENV, raising=False)
    assert event_loop.loop_kind() == "uvloop"
    loop = event_loop.new_event_loop()
    try:
        assert isinstance(loop, uvloop.Loop)
    finally:
        loop.close()


def test_asyncio_when_the_environment_asks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(event_loop.EVENT_LOOP_ENV, "asyncio")
    assert event_loop.loop_kind() == "asyncio"
    loop = event_loop.new_event_loop()
    try:
        assert not isinstance(loop, uvloop.Loop)
        assert isinstance(loop, asyncio.BaseEventLoop)
    finally:
        loop.close()


def test_unknown_loop_is_refused_with_the_choices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(event_loop.EVENT_LOOP_ENV, "trio")
    with pytest.raises(ClientError, match=r"ROCKETQ_EVENT_LOOP='trio'.*uvloop or asyncio"):
        event_loop.new_event_loop()


def test_run_returns_the_result_on_the_chosen_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(event_loop.EVENT_LOOP_ENV, raising=False)

    async def main() -> str:
        return type(asyncio.get_running_loop()).__module__

    assert event_loop.run(main()).startswith("uvloop")


@pytest.mark.parametrize("kind", ["uvloop", "asyncio"])
def test_background_loop_runs_coroutines_on_either_loop(monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    monkeypatch.setenv(event_loop.EVENT_LOOP_ENV, kind)
    bg = BackgroundLoop(name="test-event-loop")
    try:

        async def where() -> bool:
            await asyncio.sleep(0.001)
            return isinstance(asyncio.get_running_loop(), uvloop.Loop)

        assert bg.run(where(), 10) is (kind == "uvloop")
    finally:
        bg.stop()


@pytest.fixture
def background() -> Iterator[BackgroundLoop]:
    bg = BackgroundLoop(name="test-background-run")
    try:
        yield bg
    finally:
        bg.stop()


def test_run_raises_the_coroutines_own_exception(background: BackgroundLoop) -> None:
    class Boom(Exception):
        pass

    async def fail() -> None:
        await asyncio.sleep(0)
        raise Boom("from the loop")

    with pytest.raises(Boom, match="from the loop"):
        background.run(fail())


def test_run_times_out_and_cancels_the_coroutine(background: BackgroundLoop) -> None:
    cancelled = threading.Event()

    async def forever() -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    with pytest.raises(TimeoutError):
        background.run(forever(), 0.05)
    assert cancelled.wait(5)
    assert background.run(asyncio.sleep(0, "still usable"), 5) == "still usable"


def test_run_from_the_loop_thread_is_refused(background: BackgroundLoop) -> None:
    async def nested() -> None:
        background.run(asyncio.sleep(0))

    with pytest.raises(ClientError, match="its own event loop thread"):
        background.run(nested(), 5)


def test_run_after_stop_is_refused(background: BackgroundLoop) -> None:
    background.stop()
    with pytest.raises(ClientError, match="not running"):
        background.run(asyncio.sleep(0))


def test_many_threads_share_one_loop(background: BackgroundLoop) -> None:
    results: list[int] = []

    async def double(x: int) -> int:
        await asyncio.sleep(0)
        return 2 * x

    def worker(base: int) -> None:
        results.extend(background.run(double(base + i), 10) for i in range(200))

    threads = [threading.Thread(target=worker, args=(1000 * t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(results) == sorted(2 * (1000 * t + i) for t in range(4) for i in range(200))
