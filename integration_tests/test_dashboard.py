"""The web dashboard in a real headless browser against a real NameServer and broker.

One module-scoped set of processes (NameServer, broker, a dashboard with a users file, a
read-only dashboard) and one Chromium session (Debian's ``/usr/bin/chromium`` through
``/usr/bin/chromedriver``; selenium is given both paths, so selenium-manager never downloads
anything).  The checks follow issue 18: every page loads, the topic list shows a topic the test
created, a consumer group's lag equals its backlog, a search by key finds the message and shows
its trace, a topic created from the page exists for the admin API, a state change without a login
is refused and with one succeeds, read-only mode refuses.  Each page is saved as a PNG under the
test's tmp_path, and also under ``$ROCKETQ_DASHBOARD_SCREENSHOTS`` when set
(``ROCKETQ_DASHBOARD_SCREENSHOTS=docs/images`` refreshes the docs' screenshots).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rocketq.client.admin import Admin
from rocketq.client.config import ClientConfig, ConsumeFromWhere
from rocketq.client.consumer import ConsumeConcurrentlyStatus, PushConsumer, SimpleConsumer
from rocketq.client.errors import RocketQError
from rocketq.client.launcher import ServerProcess, spawn_broker, spawn_namesrv
from rocketq.client.model import Message, MessageExt
from rocketq.client.producer import Producer
from rocketq.client.remoting.pop import ConsumeInitMode
from rocketq.client.testing import wait_value
from rocketq.tools.dashboard.launch import dashboard_url, spawn_dashboard

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.common.exceptions import WebDriverException  # noqa: E402
from selenium.webdriver.chrome.options import Options  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
TOPIC = "dash_orders"
LOAD_TOPIC = "dash_load"
GROUP = "dash_billing"
USER, PASSWORD = "admin", "s3cret-pass"
FIRST_BATCH, BACKLOG = 5, 7
KEY = "order-4711"
WAIT_S = 30.0
#: what a wait for a server answer treats as "not yet"
NOT_YET = (RocketQError,)

pytestmark = pytest.mark.skipif(
    not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()),
    reason=f"the dashboard browser test needs Debian's {CHROMIUM} and {CHROMEDRIVER} (apt: chromium-driver)",
)


@dataclass
class Env:
    namesrv: ServerProcess
    broker: ServerProcess
    url: str
    read_only_url: str
    admin: Admin
    traced_msg_id: str
    shots: list[Path]


def _hash_with_cli(password: str) -> str:
    """The users file's hash, made by the documented helper."""
    out = subprocess.run(
        [sys.executable, "-m", "rocketq.tools.dashboard", "hash-password", "--password-stdin"],
        input=password + "\n", capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return out.stdout.strip()


def _backlog(ns_addr: str, admin: Admin) -> str:
    """Topic with a group that consumed FIRST_BATCH messages (traced) and has BACKLOG unconsumed."""
    admin.create_topic(TOPIC, read_queue_nums=2, write_queue_nums=2)
    wait_value(lambda: admin.topic_route(TOPIC), "the topic's route", retry_on=NOT_YET)
    traced = ""
    with Producer(ns_addr, producer_group="dash_pg", enable_msg_trace=True) as producer:
        for i in range(FIRST_BATCH):
            keys = KEY if i == 2 else f"k-{i}"
            result = producer.send(Message(topic=TOPIC, body=f"order {i}".encode(), tags="new", keys=keys))
            traced = result.msg_id if i == 2 else traced
    done = threading.Event()
    seen: set[str] = set()

    def listener(msgs: list[MessageExt], ctx: Any) -> ConsumeConcurrentlyStatus:
        seen.update(m.msg_id for m in msgs)
        if len(seen) >= FIRST_BATCH:
            done.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        ns_addr, consumer_group=GROUP, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        enable_msg_trace=True, rebalance_interval_ms=1000,
        client=ClientConfig(heartbeat_broker_interval_ms=1000, persist_consumer_offset_interval_ms=300),
    )  # fmt: skip
    consumer.subscribe(TOPIC, "*")
    consumer.register_message_listener(listener)
    consumer.start()
    try:
        assert done.wait(WAIT_S), f"the consumer got {len(seen)} of {FIRST_BATCH} messages"
        wait_value(
            lambda: sum(q.lag for q in admin.consume_stats(GROUP)) == 0,
            "the group's committed offsets",
            retry_on=NOT_YET,
        )
    finally:
        consumer.shutdown()
    with Producer(ns_addr, producer_group="dash_pg") as producer:
        for i in range(BACKLOG):
            producer.send(Message(topic=TOPIC, body=f"late {i}".encode(), keys=f"late-{i}"))
    return traced


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    tmp = tmp_path_factory.mktemp("dashboard")
    users = tmp / "users.yml"
    users.write_text(f'users:\n  {USER}: "{_hash_with_cli(PASSWORD)}"\n', encoding="utf-8")
    with (
        spawn_namesrv(tmp) as ns,
        spawn_broker(tmp, ns.addr) as broker,
        Admin(ns.addr) as admin,
    ):
        traced = _backlog(ns.addr, admin)
        with (
            spawn_dashboard(tmp, ns.addr, "--users", str(users), "--sample-interval", "1") as dash,
            spawn_dashboard(tmp, ns.addr, "--read-only") as ro,
        ):
            yield Env(ns, broker, dashboard_url(dash), dashboard_url(ro), admin, traced, [])
            print(f"--- dashboard log ---\n{dash.log_tail()}")


@pytest.fixture(scope="module")
def browser(env: Env) -> Iterator[WebDriver]:
    options = Options()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        options.add_argument(arg)
    try:
        driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    except WebDriverException as exc:
        pytest.fail(f"chromium/chromedriver did not start ({exc.msg}); check {CHROMIUM} --version")
    driver.set_page_load_timeout(WAIT_S)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def shots_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("screenshots")


def _shot(driver: WebDriver, shots_dir: Path, name: str) -> None:
    path = shots_dir / f"dashboard-{name}.png"
    assert driver.save_screenshot(str(path)), f"could not save {path}"
    extra = os.environ.get("ROCKETQ_DASHBOARD_SCREENSHOTS")
    if extra:
        Path(extra).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, Path(extra) / path.name)


def _open(driver: WebDriver, url: str) -> None:
    driver.get(url)
    WebDriverWait(driver, WAIT_S).until(
        lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready")
    )


def _text(driver: WebDriver, css: str) -> str:
    return str(WebDriverWait(driver, WAIT_S).until(lambda d: d.find_element(By.CSS_SELECTOR, css)).text)


def _wait_text(driver: WebDriver, css: str, needle: str) -> str:
    def probe(d: WebDriver) -> str | bool:
        found = d.find_elements(By.CSS_SELECTOR, css)
        return found[0].text if found and needle in found[0].text else False

    try:
        return str(WebDriverWait(driver, WAIT_S).until(probe))
    except Exception as exc:
        status = driver.find_element(By.ID, "status").text
        raise AssertionError(f"{css} never showed {needle!r} (status line: {status!r})") from exc


def _fill(driver: WebDriver, element_id: str, value: str) -> None:
    field = driver.find_element(By.ID, element_id)
    field.clear()
    field.send_keys(value)


def _http(url: str, *, method: str = "GET", body: object = None, auth: str | None = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    if auth:
        req.add_header("Authorization", "Basic " + base64.b64encode(auth.encode()).decode())
    try:
        with urllib.request.urlopen(req, timeout=WAIT_S) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"{}")


def test_cluster_page_shows_the_broker(env: Env, browser: WebDriver, shots_dir: Path) -> None:
    _open(browser, env.url)
    table = _wait_text(browser, "#broker-table", env.broker.addr)
    assert "MASTER" in table and "broker-a" in table, table
    wait_value(
        lambda: _http(env.url + "api/history")[1]["samples"] or None, "a first TPS sample", retry_on=NOT_YET
    )
    with Producer(env.namesrv.addr, producer_group="dash_load") as producer:  # traffic for the TPS chart
        for i in range(40):
            producer.send(Message(topic=LOAD_TOPIC, body=b"load %d" % i))
            time.sleep(0.05)

    def put_rate() -> float | None:
        samples = _http(env.url + "api/history")[1]["samples"]
        rates = [s["tps"].get(env.broker.addr, {}).get("put", 0.0) for s in samples]
        return max(rates) if rates and max(rates) > 0 else None

    assert wait_value(put_rate, "a sample with a put TPS above 0", retry_on=NOT_YET) > 0
    _open(browser, env.url)  # redrawn with samples in the chart
    _wait_text(browser, "#broker-table", env.broker.addr)
    _shot(browser, shots_dir, "cluster")


def test_topics_page_lists_the_topic_and_its_queues(env: Env, browser: WebDriver, shots_dir: Path) -> None:
    _open(browser, env.url + "topics")
    _wait_text(browser, "#topic-table", TOPIC)
    browser.find_element(By.CSS_SELECTOR, f'#topic-table tr[data-key="{TOPIC}"]').click()
    queues = _wait_text(browser, "#queue-table", "broker-a")
    max_offsets = [int(r.find_elements(By.TAG_NAME, "td")[3].text) for r in browser.find_elements(
        By.CSS_SELECTOR, "#queue-table tbody tr")]  # fmt: skip
    assert sum(max_offsets) == FIRST_BATCH + BACKLOG, queues
    _shot(browser, shots_dir, "topics")


def test_creating_a_topic_needs_a_login(env: Env, browser: WebDriver) -> None:
    name = "dash_created_in_browser"
    _open(browser, env.url + "topics")
    browser.execute_script("sessionStorage.clear()")
    _fill(browser, "new-topic-name", name)
    browser.find_element(By.ID, "create-topic-btn").click()
    status = _wait_text(browser, "#status", "401")
    assert "login" in status, status
    assert name not in env.admin.topic_list()

    _fill(browser, "login-user", USER)
    _fill(browser, "login-pass", "wrong")
    browser.find_element(By.ID, "login-btn").click()
    _wait_text(browser, "#status", "login failed")
    _fill(browser, "login-pass", PASSWORD)
    browser.find_element(By.ID, "login-btn").click()
    _wait_text(browser, "#login-state", f"logged in as {USER}")

    _fill(browser, "new-topic-name", name)
    _fill(browser, "new-topic-queues", "3")
    browser.find_element(By.ID, "create-topic-btn").click()
    _wait_text(browser, "#status", f"created topic {name}")
    route = wait_value(lambda: env.admin.topic_route(name), "the created topic's route", retry_on=NOT_YET)
    assert [q.write_queue_nums for q in route.queue_datas] == [3]
    _wait_text(browser, "#topic-table", name)


def test_send_a_test_message_from_the_page(env: Env, browser: WebDriver) -> None:
    _open(browser, env.url + "topics")  # still logged in (sessionStorage)
    _wait_text(browser, "#topic-table", TOPIC)
    browser.find_element(By.CSS_SELECTOR, f'#topic-table tr[data-key="{TOPIC}"]').click()
    _wait_text(browser, "#queue-table", "broker-a")
    _fill(browser, "msg-keys", "from-the-page")
    browser.find_element(By.ID, "send-msg-btn").click()
    _wait_text(browser, "#status", "SEND_OK")
    found = wait_value(
        lambda: env.admin.query_msg_by_key(TOPIC, "from-the-page"), "the page's message", retry_on=NOT_YET
    )
    assert found[0].body == b"hello from the dashboard"


def test_group_lag_matches_the_backlog(env: Env, browser: WebDriver, shots_dir: Path) -> None:
    backlog = sum(q.lag for q in env.admin.consume_stats(GROUP, TOPIC))
    assert backlog >= BACKLOG  # plus the page's test message when that test ran first
    _open(browser, env.url + "groups")
    _wait_text(browser, "#group-table", GROUP)
    browser.find_element(By.CSS_SELECTOR, f'#group-table tr[data-key="{GROUP}"]').click()
    assert _wait_text(browser, "#group-lag", str(backlog)) == str(backlog)
    rows = browser.find_elements(By.CSS_SELECTOR, "#group-queues tbody tr")
    cells = [[td.text for td in r.find_elements(By.TAG_NAME, "td")] for r in rows]
    lags = [int(c[5]) for c in cells if c[0] == TOPIC]  # the group's %RETRY% topic is listed too
    assert sum(lags) == backlog and len(lags) == 2, cells
    wait_value(
        lambda: _http(env.url + "api/history")[1]["samples"][-1]["lag"].get(GROUP) == backlog,
        "a lag sample",
        retry_on=NOT_YET,
    )
    _open(browser, env.url + "groups")
    browser.find_element(By.CSS_SELECTOR, f'#group-table tr[data-key="{GROUP}"]').click()
    _wait_text(browser, "#group-lag", str(backlog))
    _shot(browser, shots_dir, "groups")


def test_search_by_key_shows_the_trace(env: Env, browser: WebDriver, shots_dir: Path) -> None:
    _open(browser, env.url + "messages")
    _fill(browser, "key-topic", TOPIC)
    _fill(browser, "key-key", KEY)
    browser.find_element(By.ID, "key-search-btn").click()
    _wait_text(browser, "#message-results", env.traced_msg_id)
    WebDriverWait(browser, WAIT_S).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, "#trace-0 table, #trace-0 .trace-unavailable")
    )
    trace = browser.find_element(By.ID, "trace-0").text
    if "traces unavailable" in trace:
        _shot(browser, shots_dir, "messages")
        pytest.skip(f"message traces are not installed: {trace}")
    trace = _wait_text(browser, "#trace-0 table", "Pub")
    assert "dash_pg" in trace, trace
    if "Sub" in trace:  # the consumer's records, when the consumer side of tracing reported them
        assert GROUP in trace, trace
    _shot(browser, shots_dir, "messages")


def test_search_by_id_and_by_time(env: Env) -> None:
    status, doc = _http(env.url + f"api/messages?msg_id={env.traced_msg_id}&topic={TOPIC}")
    assert status == 200 and [m["msg_id"] for m in doc["messages"]] == [env.traced_msg_id], doc
    now = int(time.time() * 1000)
    status, doc = _http(env.url + f"api/messages?topic={TOPIC}&begin_ms={now - 600_000}&end_ms={now}")
    assert status == 200, doc
    bodies = {m["body"] for m in doc["messages"]}
    assert {f"order {i}" for i in range(FIRST_BATCH)} | {f"late {i}" for i in range(BACKLOG)} <= bodies


def test_reset_offset_needs_a_login_and_moves_the_group(env: Env) -> None:
    url = env.url + f"api/groups/{GROUP}/reset-offset"
    body = {"topic": TOPIC, "timestamp_ms": 0}
    assert _http(url, method="POST", body=body)[0] == 401
    assert _http(url, method="POST", body=body, auth=f"{USER}:nope")[0] == 401
    status, doc = _http(url, method="POST", body=body, auth=f"{USER}:{PASSWORD}")
    assert status == 200 and all(o["offset"] == 0 for o in doc["offsets"]), doc
    lag = sum(q.lag for q in env.admin.consume_stats(GROUP, TOPIC))
    total = sum(s.max_offset for s in env.admin.topic_status(TOPIC))
    assert lag == total


def test_read_only_mode_refuses_state_changes(env: Env, browser: WebDriver) -> None:
    status, doc = _http(
        env.read_only_url + "api/topics", method="POST", body={"topic": "dash_ro"}, auth=f"{USER}:{PASSWORD}"
    )
    assert status == 403 and "read-only" in doc["error"], doc
    _open(browser, env.read_only_url + "topics")
    assert "Read-only" in _text(browser, "#banner")
    _fill(browser, "new-topic-name", "dash_ro")
    browser.find_element(By.ID, "create-topic-btn").click()
    assert "read-only" in _wait_text(browser, "#status", "403")
    assert "dash_ro" not in env.admin.topic_list()


def test_group_page_shows_pop_in_flight(env: Env) -> None:
    pop_group = "dash-pop"
    settings: dict[str, Any] = {"await_duration_s": 1.0, "init_mode": ConsumeInitMode.MIN}
    with SimpleConsumer(env.namesrv.addr, pop_group, {TOPIC: "*"}, **settings) as consumer:
        got = wait_value(lambda: consumer.receive(1, 120) or None, "one popped message")
        status, doc = _http(env.url + f"api/groups/{pop_group}")
        assert status == 200, doc
        assert [(r["topic"], r["in_flight"]) for r in doc["pop"]] == [(TOPIC, 1)], doc
        # rocketq's own consumer: a remoting client of version V4_9_4 (5.x SDKs: test_grpc_clients_on_brokers)
        members = [(c["language"], c["version_name"], c["protocol"]) for c in doc["connections"]]
        assert members == [("PYTHON", "V4_9_4", "remoting")], doc["connections"]
        consumer.ack(got[0])
    status, doc = _http(env.url + f"api/groups/{pop_group}")
    assert [(r["topic"], r["in_flight"]) for r in doc["pop"]] == [(TOPIC, 0)], doc
