"""The web console in headless Chromium against a real broker with data (docs/console.md).

One broker process (``--console-port 0``, ``--metrics-port 0``: the
transactions' gauges are scraped from the same data) and one Chromium session (selenium
driving Debian's chromium through /usr/bin/chromedriver) for the module.
Each test opens a page, waits (bounded) for its content and asserts on what
is visible; screenshots go to build/console/*.png (docs/img/console/ holds
copies). Without chromium the tests skip, unless LOGBROKER_BROWSER_REQUIRED=1
(CI: `make test` installs it with tools/install-chromium.sh).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.support.fixtures import FAST, BrokerProcess, consume, missing, wait_until
from tests.support.metrics_scrape import scrape, value

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "build" / "console"
CHROMEDRIVER = "/usr/bin/chromedriver"
WAIT_S = 10


def _browser_or_skip():
    chromium = shutil.which("chromium")
    try:
        import selenium  # noqa: F401
    except ImportError:
        why = "selenium is not installed (pip install -e '.[dev]')"
    else:
        why = None if chromium and os.path.exists(CHROMEDRIVER) else \
            "chromium or chromedriver is missing: run 'sudo bash tools/install-chromium.sh'"
    if why:
        missing(why, "LOGBROKER_BROWSER_REQUIRED")
    return chromium


@pytest.fixture(scope="module")
def console(tmp_path_factory):
    """(console URL, broker) with 2 topics, 2 groups and JSON / binary / header records,
    and topic payments with a committed, an aborted and an open transaction
    (``broker.metrics_url``: its /metrics)."""
    broker = BrokerProcess(tmp_path_factory.mktemp("console") / "data", "--console-port", "0",
                           "--metrics-port", "0").start()
    try:
        yield from _with_data(broker)
    finally:
        broker.stop()


def _with_data(broker):
    from logbroker.client import Admin, Consumer, Producer

    # printed right after the listening line (maybe already in stdout's buffer: no select)
    line = broker.proc.stdout.readline()
    if line.startswith("logbroker metrics on "):
        broker.metrics_url = line.split(" on ", 1)[1].strip()
        line = broker.proc.stdout.readline()
    assert line.startswith("logbroker console on http://127.0.0.1:"), line
    url = line.split(" on ", 1)[1].strip()
    admin, consumer, open_txn = Admin(broker.bootstrap, **FAST), None, None
    try:
        admin.create_topics([("orders", 2), ("events", 1)])
        with Producer(broker.bootstrap, **FAST) as producer:
            for i in range(30):
                producer.send("orders", json.dumps({"n": i, "item": "book"}).encode(), key=b"k%d" % i,
                              headers=[("source", b"web")], partition=0)
            for i in range(12):
                producer.send("orders", bytes(range(i, i + 16)), partition=1)
            for i in range(5):
                producer.send("events", b"event %d" % i, partition=0)
            producer.flush()
        admin.commit_offsets("billing", {("orders", 0): 10, ("orders", 1): 12})  # lag 20 + 0
        consumer = Consumer(broker.bootstrap, group="audit", auto_offset_reset="earliest",
                            enable_auto_commit=False, **FAST)
        consumer.subscribe(["events"])
        assert len(consume(consumer, 5)) == 5
        consumer.commit()
        open_txn = _transactions(broker.bootstrap, admin)
        yield url, broker
    finally:
        if open_txn is not None:
            open_txn.close()
        if consumer is not None:
            consumer.close()
        admin.close()


def _transactions(bootstrap: str, admin):
    """payments-0: 3 records committed (pay-done), 2 aborted (pay-undone),
    2 in a transaction left open (pay-open: its producer is returned, open)."""
    from logbroker.client import Producer

    admin.create_topics([("payments", 1)])
    for tid, commit in (("pay-done", True), ("pay-undone", False)):
        with Producer(bootstrap, transactional_id=tid, **FAST) as p:
            p.init_transactions()
            p.begin_transaction()
            for i in range(3 if commit else 2):
                p.send("payments", b"%s %d" % (tid.encode(), i), partition=0)
            p.flush()
            p.commit_transaction() if commit else p.abort_transaction()
    p = Producer(bootstrap, transactional_id="pay-open", **FAST)
    p.init_transactions()
    p.begin_transaction()
    p.send("payments", b"pending 0", partition=0)
    p.send("payments", b"pending 1", partition=0)
    p.flush()
    states = lambda: {t.transactional_id: t.state for t in admin.list_transactions()}  # noqa: E731
    wait_until(lambda: states() == {"pay-done": "CompleteCommit", "pay-undone": "CompleteAbort",
                                    "pay-open": "Ongoing"}, WAIT_S, "the transactions settled")
    return p


@pytest.fixture(scope="module")
def browser():
    chromium = _browser_or_skip()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1200,820", "--disable-extensions", "--no-first-run"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(WAIT_S)
    SHOTS.mkdir(parents=True, exist_ok=True)
    try:
        yield driver
    finally:
        driver.quit()


def _open(browser, console, hash_: str, page: str):
    """Load the console at ``#hash_`` and wait until ``page`` rendered."""
    url, _ = console
    browser.get(f"{url}#{hash_}")
    browser.refresh()  # a new hash alone on the same document would not reload
    _wait(browser, lambda d: d.execute_script("return document.body.dataset.loaded") == page)
    return browser


def _wait(browser, predicate):
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(browser, WAIT_S, poll_frequency=0.05,
                         ignored_exceptions=(StaleElementReferenceException,)).until(predicate)


def _cells(browser, table: str, col: str) -> list[str]:
    from selenium.webdriver.common.by import By

    return [td.text for td in browser.find_elements(By.CSS_SELECTOR, f"#{table} td[data-col={col}]")]


def _text(browser, selector: str) -> str:
    from selenium.webdriver.common.by import By

    return browser.find_element(By.CSS_SELECTOR, selector).text


def _shot(browser, name: str) -> None:
    assert browser.save_screenshot(str(SHOTS / f"{name}.png"))


def test_overview_page(browser, console):
    _open(browser, console, "/overview", "overview")
    _, broker = console
    assert "single node" in _text(browser, "#mode")
    assert _cells(browser, "brokers", "address") == [broker.bootstrap]
    assert "controller" in _cells(browser, "brokers", "role")[0]
    assert _text(browser, "#under-replicated").endswith("0")
    _shot(browser, "overview")


def test_topics_page(browser, console):
    _open(browser, console, "/topics", "topics")
    names = _cells(browser, "topics", "name")
    records = dict(zip(names, _cells(browser, "topics", "records")))
    assert records["orders"] == "42" and records["events"] == "5", records
    _shot(browser, "topics")


def test_topic_page_shows_partitions_with_their_high_watermarks(browser, console):
    _open(browser, console, "/topic/orders", "topic")
    assert _cells(browser, "partitions", "partition") == ["0", "1"]
    assert _cells(browser, "partitions", "hw") == ["30", "12"]
    assert _cells(browser, "partitions", "log_end") == ["30", "12"]
    assert _cells(browser, "partitions", "leader") == ["0", "0"]
    _shot(browser, "topic")


def test_groups_page_shows_the_known_lag(browser, console):
    _open(browser, console, "/groups", "groups")
    lag = dict(zip(_cells(browser, "groups", "name"), _cells(browser, "groups", "lag")))
    assert lag == {"audit": "0", "billing": "20"}, lag
    _shot(browser, "groups")


def test_group_page_lag_per_partition_and_over_time(browser, console):
    from selenium.webdriver.common.by import By

    _open(browser, console, "/group/billing", "group")
    assert _cells(browser, "offsets", "committed") == ["10", "12"]
    assert _cells(browser, "offsets", "lag") == ["20", "0"]
    assert _text(browser, "#total-lag").endswith("20")
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "svg.chart path[data-series]"))
    _shot(browser, "group")
    _open(browser, console, "/group/audit", "group")
    assert _text(browser, "#state").endswith("Stable")
    assert _cells(browser, "members", "assignment") == ["events-0"]


def test_throughput_page_charts_the_produced_topics(browser, console):
    from selenium.webdriver.common.by import By

    _open(browser, console, "/throughput", "throughput")
    _wait(browser, lambda d: {p.get_attribute("data-series") for p in d.find_elements(
        By.CSS_SELECTOR, "svg.chart path[data-series]")} >= {"orders", "events"})
    # two rates (three samples) make a line in the screenshot
    _wait(browser, lambda d: "L" in d.find_element(By.CSS_SELECTOR, "svg.chart path").get_attribute("d"))
    _shot(browser, "throughput")


def test_message_browser_text_json_and_hex(browser, console):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    _open(browser, console, "/messages?topic=orders&partition=0&offset=5&limit=3&format=json",
          "messages")
    assert _cells(browser, "records", "offset") == ["5", "6", "7"]
    value = _cells(browser, "records", "value")[0]
    assert '"n": 5' in value and '"item": "book"' in value, value
    assert "source" in _cells(browser, "records", "headers")[0]
    _shot(browser, "messages")
    Select(browser.find_element(By.ID, "format")).select_by_value("hex")
    _wait(browser, lambda d: "7b 22 6e 22" in (_cells(d, "records", "value") or [""])[0])
    Select(browser.find_element(By.ID, "format")).select_by_value("text")
    _wait(browser, lambda d: (_cells(d, "records", "value") or [""])[0] == '{"n": 5, "item": "book"}')
    _open(browser, console, "/messages?topic=orders&partition=1&offset=2&limit=1&format=hex",
          "messages")
    assert _cells(browser, "records", "value")[0].startswith("000000  02 03 04 05")


def test_message_browser_refuses_a_page_over_the_cap(browser, console):
    _open(browser, console, "/messages?topic=orders&partition=0&limit=51", "messages")
    error = _text(browser, "#error")
    assert error.startswith("INVALID_REQUEST") and "1..50" in error, error


@pytest.fixture
def auth_console(tmp_path):
    """(console URL, broker) with --auth-required, super user admin and topic orders."""
    from logbroker.client import Admin

    broker = BrokerProcess(tmp_path / "data", "--auth-required", "--console-port", "0",
                           config={"super_users": ["User:admin"]}).start()
    try:
        url = broker.proc.stdout.readline().split(" on ", 1)[1].strip()
        with Admin(broker.bootstrap, **FAST) as admin:  # the bootstrap rule: loopback, no user yet
            admin.create_user("admin", "admin-Pa55word")
        with Admin(broker.bootstrap, username="admin", password="admin-Pa55word", **FAST) as admin:
            admin.create_topics([("orders", 2), ("events", 1)])
        yield url, broker
    finally:
        broker.stop()


def test_login_through_the_form_then_topics_and_logout(browser, auth_console):
    from urllib.parse import urlparse

    from selenium.webdriver.common.by import By

    url, _ = auth_console
    browser.get(url + "#/topics")
    _wait(browser, lambda d: urlparse(d.current_url).path == "/login")  # no session: the form
    _shot(browser, "login")
    browser.find_element(By.ID, "user").send_keys("admin")
    browser.find_element(By.ID, "password").send_keys("wrong")
    browser.find_element(By.ID, "submit").click()
    _wait(browser, lambda d: d.find_elements(By.ID, "error"))
    assert _text(browser, "#error") == "invalid user name or password"
    browser.find_element(By.ID, "user").send_keys("admin")
    browser.find_element(By.ID, "password").send_keys("admin-Pa55word")
    browser.find_element(By.ID, "submit").click()  # Origin checked, cookie set, 303 to /
    _wait(browser, lambda d: d.execute_script("return document.body.dataset.loaded") == "overview")
    assert _text(browser, "#principal") == "User:admin"
    _open(browser, auth_console, "/topics", "topics")
    assert _cells(browser, "topics", "name") == ["events", "orders"]
    _shot(browser, "topics-logged-in")
    browser.find_element(By.ID, "logout-button").click()
    _wait(browser, lambda d: urlparse(d.current_url).path == "/login")
    browser.get(url + "api/topics")
    assert "LOGIN_REQUIRED" in browser.page_source


def test_topic_page_shows_the_last_stable_offset_and_the_open_transaction(browser, console):
    _open(browser, console, "/topic/payments", "topic")
    hw, lso = int(_cells(browser, "partitions", "hw")[0]), int(_cells(browser, "partitions", "lso")[0])
    assert (hw, lso) == (9, 7)  # 3 + marker + 2 + marker, then the 2 open records
    assert _cells(browser, "partitions", "lso_lag") == ["2"]
    opened = _cells(browser, "partitions", "open_transactions")[0]
    assert "/0 @7 (" in opened, opened  # producer/epoch @first offset (age)
    _open(browser, console, "/topics", "topics")
    assert dict(zip(_cells(browser, "topics", "name"),
                    _cells(browser, "topics", "open_transactions")))["payments"] == "1"


def test_transactions_page_lists_the_ids_and_the_open_transaction(browser, console):
    _open(browser, console, "/transactions", "transactions")
    states = dict(zip(_cells(browser, "txn-ids", "transactional_id"), _cells(browser, "txn-ids", "state")))
    assert states == {"pay-open": "Ongoing", "pay-done": "CompleteCommit",
                      "pay-undone": "CompleteAbort"}, states
    assert _cells(browser, "txn-ids", "transactional_id")[0] == "pay-open"  # open ones first
    assert _cells(browser, "txn-ids", "partitions")[0] == "payments-0"
    assert _cells(browser, "txn-ids", "age")[0] != "–" and _cells(browser, "txn-ids", "age")[1] == "–"
    assert _text(browser, "#txn-open").endswith("1")
    assert _text(browser, "#txn-committed").endswith("1") and _text(browser, "#txn-aborted").endswith("1")
    assert _cells(browser, "txn-open-parts", "first_offset") == ["7"]
    assert _cells(browser, "txn-open-parts", "lso_lag") == ["2"]
    _shot(browser, "transactions")


def test_metrics_show_lso_lag_open_transactions_and_outcomes(console):
    _, broker = console
    got = scrape(broker.metrics_url)
    assert value(got, "logbroker_partition_lso_lag_records", topic="payments", partition=0) == 2
    assert value(got, "logbroker_partition_open_transactions", topic="payments", partition=0) == 1
    assert value(got, "logbroker_partition_lso_lag_records", topic="orders", partition=0) == 0
    assert value(got, "logbroker_transactions_total", outcome="committed") == 1
    assert value(got, "logbroker_transactions_total", outcome="aborted") == 1
    assert value(got, "logbroker_transactions_total", outcome="timed_out") == 0
