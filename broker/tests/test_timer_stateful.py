"""The timer store against a model (hypothesis state machine): timer messages sent with random
delays (some past the roll window of 4 slots), recalls, the clock moving by less than a slot with a
service round after each step (as the running service, which also runs at once when a message
arrives), flushes and crashes (the process dies: files keep what was written, memory is lost) in
any order.  At the end every message is in its topic unless it was recalled, and a recalled one is
not; with no crash, none is there twice."""

from __future__ import annotations

import shutil
import tempfile

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule

from rocketq.broker.store.config import StoreConfig
from rocketq.broker.store.message_store import MessageStore
from rocketq.broker.store.record_batch import MessageToStore
from rocketq.broker.timer.config import TimerConfig
from rocketq.broker.timer.rules import TimerRouteStatus, route_timer_message
from rocketq.broker.timer.store import TimerMessageStore, delete_key
from rocketq.client.remoting.message import decode_stored_message
from rocketq.client.remoting.properties import encode_properties

HOST = ("127.0.0.1", 10911)
T0 = 1_700_000_000_000
TOPIC = "Orders"
CONFIG = TimerConfig.of(roll_window_slots=4, timer_log_file_size=4096)


class Clock:
    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


class TimerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = tempfile.mkdtemp(prefix="rq-timer-stateful-")
        self.clock = Clock(T0 + 123)
        self.store = self._open_store()
        self.timer = self._open_timer()
        self.due: dict[str, int] = {}  # uniq key -> TIMER_OUT_MS (delivered once its slot has passed)
        self.recalled: set[str] = set()  # recalls the broker accepted (their time still ahead)
        self.crashed = False
        self.counter = 0

    def _open_store(self) -> MessageStore:
        store = MessageStore(
            StoreConfig(
                store_path_root_dir=self.root,
                mapped_file_size_commit_log_bytes=1 << 20,
                mapped_file_size_consume_queue_units=1000,
                max_message_size_bytes=4096,
                max_hash_slot_num=64,
                max_index_num=2000,
                clean_resource_interval_ms=3_600_000,
            )
        )
        store.start()
        return store

    def _open_timer(self) -> TimerMessageStore:
        timer = TimerMessageStore(self.store, CONFIG, self.root, clock=self.clock)
        timer.load()
        return timer

    def _put(self, props: dict[str, str]) -> int | None:
        route = route_timer_message(CONFIG, TOPIC, 0, encode_properties(props), self.clock.now)
        if route.status is not TimerRouteStatus.TIMER:
            return None
        msg = MessageToStore(
            topic=route.topic,
            queue_id=route.queue_id,
            body=b"x",
            properties=route.properties,
            born_timestamp=self.clock.now,
            born_host=HOST,
            store_host=HOST,
        )
        assert self.store.put_message(msg).is_ok
        assert self.store.wait_dispatched()
        return route.deliver_ms

    def teardown(self) -> None:
        self.timer.close()
        self.store.shutdown()
        shutil.rmtree(self.root, ignore_errors=True)

    @rule(delay_ms=st.integers(min_value=1, max_value=12_000))
    def send(self, delay_ms: int) -> None:
        self.counter += 1
        uniq = f"U{self.counter}"
        out = self._put({"TIMER_DELAY_MS": str(delay_ms), "UNIQ_KEY": uniq})
        assert out is not None
        self.due[uniq] = out

    @precondition(lambda self: bool(self.due))
    @rule(data=st.data())
    def recall(self, data: st.DataObject) -> None:
        uniq = data.draw(st.sampled_from(sorted(self.due)))
        out = self.due[uniq]
        tomb = {
            "TIMER_DEL_UNIQKEY": delete_key(TOPIC, uniq),
            "UNIQ_KEY": uniq,
            "TIMER_DELIVER_MS": str(out + 1),
            "TAGS": "_RECALL_TAG_",
        }
        if self._put(tomb) is not None:  # refused once the time has passed, as RECALL_MESSAGE
            self.recalled.add(uniq)
            self.tick()  # the arrival wakes the service

    @rule(ms=st.integers(min_value=1, max_value=999))
    def advance(self, ms: int) -> None:
        self.clock.now += ms
        self.tick()

    @rule()
    def tick(self) -> None:
        assert self.store.wait_dispatched()  # the service is woken by the dispatch of an arrival
        while self.timer.enqueue():
            pass
        self.timer.dequeue()

    @rule()
    def flush(self) -> None:
        self.timer.flush()

    @rule()
    def crash(self) -> None:
        self.store.halt()
        self.store = self._open_store()
        self.timer = self._open_timer()
        self.crashed = True

    def check_model(self) -> None:
        """The end: everything due is delivered on time, once unless a crash intervened."""
        for _ in range(60):  # 30 s in half-slot steps: everything sent is due by then
            self.advance(500)
        assert self.store.wait_dispatched()
        seen: dict[str, list[int]] = {}
        for queue_id in (0,):
            g = self.store.get_message("g", TOPIC, queue_id, 0, 10_000, 1 << 24)
            try:
                for buf in g.buffers:
                    m = decode_stored_message(buf)
                    seen.setdefault(m.properties["UNIQ_KEY"], []).append(m.store_timestamp)
            finally:
                g.release()
        for uniq, out in self.due.items():
            if uniq in self.recalled:
                assert uniq not in seen, f"{uniq} was recalled but delivered"
            else:
                assert uniq in seen, f"{uniq} (due {out - T0}) was never delivered"
        assert set(seen) <= set(self.due)
        if not self.crashed:
            assert all(len(times) == 1 for times in seen.values()), seen


class TimerMachineWithCheck(TimerMachine):
    def teardown(self) -> None:
        try:
            self.check_model()
        finally:
            super().teardown()


TestTimerStateful = TimerMachineWithCheck.TestCase
TestTimerStateful.settings = settings(
    max_examples=50, stateful_step_count=30, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
