"""The web console behind authentication and ACLs (docs/console.md, "Security").

Real broker processes with --auth-required and super_users = ["User:admin"]
on 127.0.0.1, users made through the CLI (the bootstrap rule) and the
Admin client; plain HTTP through http.client (no redirects followed, no
cookie jar: every cookie is sent by hand). Tests that make failed logins
use their own source address (127.0.0.N: all of 127/8 is loopback on
Linux), since failures are throttled per address. The session table and
the throttle are also unit tested with a fake clock.
"""

from __future__ import annotations

import dataclasses
import http.client
import itertools
import json
import re
import ssl
import urllib.request
from types import SimpleNamespace
from urllib.parse import urlencode

import pytest
from tests.support.fixtures import BrokerProcess, invoke_cli, invoked_ok

from logbroker import Admin
from logbroker.client.admin.results import Acl

ADMIN_PW, ALICE_PW = "admin-Pa55word", "alice-Pa55word"
COOKIE = "logbroker-console"
_ips = itertools.count(2)


def fresh_ip() -> str:
    """A loopback source address no other test uses (its own login throttle)."""
    return f"127.0.0.{next(_ips)}"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """admin (super user), alice (describe on topic alpha and group g-alpha only),
    topics alpha and beta with records, group g-alpha with offsets on both."""
    data = tmp_path_factory.mktemp("console-auth") / "data"
    b = BrokerProcess(data, "--auth-required", "--metrics-port", "0", "--console-port", "0",
                      config={"super_users": ["User:admin"]}).start()
    b.metrics_url = b.proc.stdout.readline().split()[-1]
    line = b.proc.stdout.readline()
    assert line.startswith("logbroker console on http://127.0.0.1:"), line
    b.console_port = int(line.rstrip().rstrip("/").rpartition(":")[2])
    try:
        invoked_ok(invoke_cli(["users", "add", "admin", "--user-password-stdin"],
                              stdin=ADMIN_PW + "\n", bootstrap=b.bootstrap))
        with admin_of(b) as admin:
            admin.create_user("alice", ALICE_PW)
            admin.create_topics([("alpha", 1), ("beta", 1)])
            from logbroker import Producer
            with Producer(b.bootstrap, username="admin", password=ADMIN_PW) as p:
                for i in range(3):
                    p.send("alpha", b"alpha-secret-%d" % i)
                    p.send("beta", b"beta-secret-%d" % i)
                p.flush()
            admin.commit_offsets("g-alpha", {("alpha", 0): 1, ("beta", 0): 2})
            admin.create_acls([Acl("User:alice", "topic", "alpha", operation="describe"),
                               Acl("User:alice", "group", "g-alpha", operation="describe")])
        yield b
    finally:
        b.stop()


def admin_of(b) -> Admin:
    return Admin(b.bootstrap, username="admin", password=ADMIN_PW)


def call(b, method: str, path: str, cookie: "str | None" = None, form: "dict | None" = None,
         origin: "str | None" = "same", ip: str = "127.0.0.1", port: "int | None" = None,
         context: "ssl.SSLContext | None" = None, cookie_name: str = COOKIE):
    """One request to the console; ``origin`` "same": the console's own (for POSTs)."""
    port = port or b.console_port
    if context is None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10, source_address=(ip, 0))
    else:
        conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=10, context=context)
    headers, body = {}, None
    if cookie is not None:
        headers["Cookie"] = f"{cookie_name}={cookie}"
    if form is not None:
        body = urlencode(form)
        headers["Content-Type"] = "application/x-www-form-urlencoded"
        if origin is not None:
            scheme = "https" if context is not None else "http"
            headers["Origin"] = f"{scheme}://127.0.0.1:{port}" if origin == "same" else origin
    try:
        conn.request(method, path, body, headers)
        resp = conn.getresponse()
        text = resp.read().decode()
    finally:
        conn.close()
    return SimpleNamespace(status=resp.status, headers=resp.headers, text=text,
                           json=(lambda: json.loads(text)))


def login(b, user: str, password: str, **kw):
    return call(b, "POST", "/login", form={"user": user, "password": password}, **kw)


def cookie_of(resp, name: str = COOKIE) -> str:
    match = re.search(rf"{re.escape(name)}=([^;]+)", resp.headers.get("Set-Cookie", ""))
    assert resp.status == 303 and match, (resp.status, resp.text)
    return match.group(1)


def failures(b) -> float:
    return metric(b, "logbroker_auth_failures_total")


def metric(b, sample: str) -> float:
    """The value of the scraped ``sample`` (name and labels as printed), 0 when absent."""
    with urllib.request.urlopen(b.metrics_url, timeout=10) as resp:
        text = resp.read().decode()
    rows = [line for line in text.splitlines() if line.startswith(sample + " ")]
    return float(rows[0].split()[-1]) if rows else 0.0


PAGES = ["/api/overview", "/api/topics", "/api/topic?name=alpha", "/api/groups",
         "/api/group?name=g-alpha", "/api/throughput", "/api/messages?topic=alpha",
         "/api/session"]


def test_without_a_session_every_page_asks_for_a_login(broker):
    root = call(broker, "GET", "/")
    assert root.status == 303 and root.headers["Location"] == "/login"
    for path in PAGES:
        resp = call(broker, "GET", path)
        assert resp.status == 401 and resp.json()["code"] == "LOGIN_REQUIRED", (path, resp.text)
        assert "alpha" not in resp.text and "secret" not in resp.text
    for sneaky in ("/login/../api/topics", "/static/../api/topics", "/static/%2e%2e/api/topics",
                   "/loginx", "/api/topics/"):
        resp = call(broker, "GET", sneaky)
        assert resp.status in (303, 401, 403, 404) and "alpha" not in resp.text, (sneaky, resp.text)
    form = call(broker, "GET", "/login")
    assert form.status == 200 and 'action="/login"' in form.text and 'type="password"' in form.text
    assert call(broker, "GET", "/static/console.js").status == 200  # code, no data


def test_wrong_password_and_unknown_user_get_the_same_answer(broker):
    ip, before = fresh_ip(), failures(broker)
    answers = [login(broker, "alice", "wrong", ip=ip), login(broker, "nobody", ALICE_PW, ip=ip),
               login(broker, "bad/name", ALICE_PW, ip=ip)]
    assert {(a.status, a.text) for a in answers} == {(answers[0].status, answers[0].text)}
    assert answers[0].status == 401 and "invalid user name or password" in answers[0].text
    assert all("Set-Cookie" not in a.headers for a in answers)
    assert failures(broker) == before + 3


def test_a_super_user_logs_in_and_sees_every_page(broker):
    resp = login(broker, "admin", ADMIN_PW)
    assert resp.headers["Location"] == "/"
    attrs = resp.headers["Set-Cookie"].lower()
    assert all(a in attrs for a in ("httponly", "samesite=strict", "path=/", "max-age=28800"))
    assert "secure" not in attrs  # plain HTTP on loopback
    cookie = cookie_of(resp)
    assert call(broker, "GET", "/", cookie).status == 200
    assert call(broker, "GET", "/login", cookie).headers["Location"] == "/"
    names = {t["name"] for t in call(broker, "GET", "/api/topics", cookie).json()["topics"]}
    assert {"alpha", "beta"} <= names
    assert call(broker, "GET", "/api/overview", cookie).json()["brokers"][0]["address"] == \
        broker.bootstrap
    page = call(broker, "GET", "/api/messages?topic=beta", cookie).json()
    assert [r["value"]["text"] for r in page["records"]] == [f"beta-secret-{i}" for i in range(3)]
    assert call(broker, "GET", "/api/session", cookie).json() == \
        {"auth": True, "acls": True, "principal": "User:admin"}


def test_acls_decide_what_a_user_sees(broker):
    denials = 'logbroker_authorization_denials_total{request="Console"}'
    denied_before = metric(broker, denials)
    cookie = cookie_of(login(broker, "alice", ALICE_PW))
    topics = [t["name"] for t in call(broker, "GET", "/api/topics", cookie).json()["topics"]]
    assert topics == ["alpha"]
    for path, code, need in (("/api/topic?name=beta", "TOPIC_AUTHORIZATION_FAILED",
                              "describe topic 'beta'"),
                             ("/api/topic?name=nosuch", "TOPIC_AUTHORIZATION_FAILED",
                              "describe topic 'nosuch'"),  # not 404: names stay hidden
                             ("/api/messages?topic=beta", "TOPIC_AUTHORIZATION_FAILED",
                              "read topic 'beta'"),
                             ("/api/messages?topic=alpha", "TOPIC_AUTHORIZATION_FAILED",
                              "read topic 'alpha'"),  # describe is not read
                             ("/api/overview", "CLUSTER_AUTHORIZATION_FAILED",
                              "describe cluster 'logbroker'")):
        resp = call(broker, "GET", path, cookie)
        assert resp.status == 403, (path, resp.text)
        assert resp.json() == {"code": code,
                               "message": f"User:alice may not {need} (no ACL allows it)"}
    assert metric(broker, denials) - denied_before == 5  # each 403 counted
    assert [p["partition"] for p in
            call(broker, "GET", "/api/topic?name=alpha", cookie).json()["partitions"]] == [0]
    group = call(broker, "GET", "/api/group?name=g-alpha", cookie).json()
    assert [o["topic"] for o in group["offsets"]] == ["alpha"] and group["lag_history"] == []
    assert [g["name"] for g in call(broker, "GET", "/api/groups", cookie).json()["groups"]] == \
        ["g-alpha"]
    with admin_of(broker) as admin:  # an ACL added applies to open sessions at once
        admin.create_acls([Acl("User:alice", "topic", "alpha", operation="read")])
    page = call(broker, "GET", "/api/messages?topic=alpha", cookie)
    assert page.status == 200 and page.json()["records"][0]["value"]["text"] == "alpha-secret-0"


def test_logout_ends_the_session(broker):
    cookie = cookie_of(login(broker, "alice", ALICE_PW))
    assert call(broker, "GET", "/api/topics", cookie).status == 200
    out = call(broker, "POST", "/logout", cookie, form={})
    assert out.status == 303 and out.headers["Location"] == "/login"
    assert f'{COOKIE}=""' in out.headers["Set-Cookie"] or "Max-Age=0" in out.headers["Set-Cookie"]
    assert call(broker, "GET", "/api/topics", cookie).status == 401


def test_forged_cookies_and_cross_site_posts_are_refused(broker):
    for forged in ("x" * 43, "", "%00" * 30, "a" * 5000):
        assert call(broker, "GET", "/api/topics", forged).status == 401, forged
    ip = fresh_ip()
    for origin in ("http://evil.example", None, "null"):
        resp = login(broker, "admin", ADMIN_PW, origin=origin, ip=ip)
        assert resp.status == 403 and "Set-Cookie" not in resp.headers, origin
    cookie = cookie_of(login(broker, "alice", ALICE_PW))
    assert call(broker, "POST", "/logout", cookie, form={}, origin="http://evil.example").status == 403
    assert call(broker, "GET", "/api/topics", cookie).status == 200  # still logged in


def test_failed_logins_are_throttled_per_address(broker):
    ip = fresh_ip()
    assert [login(broker, "alice", "wrong", ip=ip).status for _ in range(5)] == [401] * 5
    blocked = login(broker, "alice", ALICE_PW, ip=ip)  # even the right password
    assert blocked.status == 429 and 1 <= int(blocked.headers["Retry-After"]) <= 60
    assert "Set-Cookie" not in blocked.headers
    cookie_of(login(broker, "alice", ALICE_PW, ip=fresh_ip()))  # another address logs in


def test_logins_sent_at_once_cannot_outrun_the_throttle(broker):
    from concurrent.futures import ThreadPoolExecutor

    ip = fresh_ip()
    with ThreadPoolExecutor(12) as pool:
        statuses = list(pool.map(lambda _: login(broker, "alice", "wrong", ip=ip).status,
                                 range(12)))
    assert set(statuses) <= {401, 429, 503} and 401 in statuses, statuses
    for _ in range(6):  # then one by one until the address is blocked
        statuses.append(login(broker, "alice", "wrong", ip=ip).status)
        if statuses[-1] == 429:
            break
    # each 401 cost a PBKDF2: at most 2 of one address at a time, so at most one past the 5
    assert statuses[-1] == 429 and 5 <= statuses.count(401) <= 6, statuses


def test_deleting_the_user_ends_its_sessions(broker):
    with admin_of(broker) as admin:
        admin.create_user("carol", "carol-Pa55word")
    cookie = cookie_of(login(broker, "carol", "carol-Pa55word"))
    assert call(broker, "GET", "/api/session", cookie).json()["principal"] == "User:carol"
    with admin_of(broker) as admin:
        admin.delete_user("carol")
    assert call(broker, "GET", "/api/session", cookie).status == 401


def test_over_tls_the_console_is_https_with_secure_cookies(tmp_path):
    trustme = pytest.importorskip("trustme")
    ca = trustme.CA()
    leaf = ca.issue_cert("127.0.0.1")
    cert, key = str(tmp_path / "b.crt"), str(tmp_path / "b.key")
    leaf.cert_chain_pems[0].write_to_path(cert)
    leaf.private_key_pem.write_to_path(key)
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    b = BrokerProcess(tmp_path / "data", "--auth-required", "--console-port", "0",
                      "--tls-cert", cert, "--tls-key", key).start()
    try:
        line = b.proc.stdout.readline()
        assert line.startswith("logbroker console on https://127.0.0.1:"), line
        port = int(line.rstrip().rstrip("/").rpartition(":")[2])
        with Admin(b.bootstrap, tls_ca=str(tmp_path / "ca.pem")) as admin:  # the bootstrap rule
            admin.create_user("admin", ADMIN_PW)
        ctx = ssl.create_default_context(cafile=str(tmp_path / "ca.pem"))
        resp = login(b, "admin", ADMIN_PW, port=port, context=ctx)
        assert "secure" in resp.headers["Set-Cookie"].lower()
        cookie = cookie_of(resp, "__Host-" + COOKIE)
        session = call(b, "GET", "/api/session", cookie, port=port, context=ctx,
                       cookie_name="__Host-" + COOKIE)
        assert session.json() == {"auth": True, "acls": False, "principal": "User:admin"}
        with pytest.raises((ssl.SSLError, ConnectionError, http.client.HTTPException)):
            call(b, "GET", "/login", port=port)  # plain HTTP to the HTTPS console
    finally:
        b.stop()


# -- units: the session table and the throttle, on a fake clock -------------------------------
class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_sessions_expire_idle_and_old_and_the_table_is_bounded():
    from logbroker.console.sessions import SessionTable

    clock = Clock()
    table = SessionTable(capacity=3, idle_s=60, max_age_s=300, clock=clock)
    token = table.open("User:a", "a", b"k")
    assert table.find(token).principal == "User:a" and table.find(token + "x") is None
    clock.now += 61
    assert table.find(token) is None and len(table) == 0  # idle: gone
    token = table.open("User:a", "a", b"k")
    alive = []
    for _ in range(7):  # used every 50 s, still ended after 300 s
        clock.now += 50
        alive.append(table.find(token) is not None)
    assert alive == [True] * 6 + [False]
    tokens = [table.open(f"User:{i}", str(i), b"k") for i in range(4)]
    assert len(table) == 3 and table.find(tokens[0]) is None and table.find(tokens[3]) is not None
    assert table.close(tokens[3]) and not table.close(tokens[3])


def test_throttle_windows_addresses_and_bound():
    from logbroker.console.throttle import LoginThrottle, key_of

    clock = Clock()
    t = LoginThrottle(max_failures=2, window_s=60, capacity=3, clock=clock)
    t.failed("10.0.0.1")
    assert not t.blocked("10.0.0.1")
    t.failed("10.0.0.1")
    assert t.blocked("10.0.0.1") and t.retry_after("10.0.0.1") == 60
    clock.now += 60
    assert not t.blocked("10.0.0.1") and t.retry_after("10.0.0.1") == 0
    assert key_of("2001:db8::1") == key_of("2001:db8::ffff:2") == "2001:db8::/64"
    assert key_of("::ffff:10.0.0.1") == "10.0.0.1" and key_of(None) == "?"
    for i in range(10):
        t.failed(f"10.0.1.{i}")
    assert len(t) == 3


def test_narrowing_hides_topics_everywhere_a_page_could_show_them():
    from logbroker.security.acl import AclBinding, Authorizer
    from logbroker.console import pages
    from logbroker.console.access import Access
    from logbroker.console.history import History
    from logbroker.console.state import State
    from logbroker.protocol.consumer_protocol import Assignment

    class Auth:
        enforcing = True
        authorizer = Authorizer([AclBinding("User:alice", "topic", "ord", "prefix", "describe"),
                                 AclBinding("User:alice", "group", "billing", "literal", "read")],
                                ["User:admin"])

        def allows(self, principal, operation, resource_type, name):
            return self.authorizer.authorize(principal, operation, resource_type, name)

    member = ("m1", None, "c1", "/127.0.0.1", Assignment((("orders", 0), ("secret", 0))).encode())
    state = State(0, "127.0.0.1:9555", 1000, 1, {"orders": 1, "secret": 1},
                  {("orders", 0): (0, 5, 5, 10, False), ("secret", 0): (0, 9, 9, 20, False)},
                  [{"name": "billing", "state": "Stable", "protocol": "range", "generation": 1,
                    "members": [member], "offsets": {("orders", 0): 1, ("secret", 0): 2}},
                   {"name": "other", "state": "Empty", "protocol": "", "generation": 0,
                    "members": [], "offsets": {("orders", 0): 3}}],
                  {("orders", 0): (1, 1, 1), ("secret", 0): (2, 2, 2)},
                  {"name": "c", "controller": 0, "me": 0, "brokers": [(0, "h", 1)],
                   "partitions": {("orders", 0): (0, (0,), (0,), 1),
                                  ("secret", 0): (0, (0,), (0,), 1)},
                   "replication": {"orders": 1, "secret": 1}, "under_replicated_led": 0,
                   "leaders": 2})
    history = History()
    history.record(state)
    history.record(dataclasses.replace(state, taken_ms=3000, traffic={
        ("orders", 0): (5, 5, 5), ("secret", 0): (9, 9, 9)}))
    console = SimpleNamespace(state=lambda: state, history=history, sample_s=2.0)
    alice = Access(Auth(), "User:alice")
    narrow = alice.narrow(state)
    assert set(narrow.topics) == {"orders"} and set(narrow.logs) == set(narrow.traffic) == \
        {("orders", 0)}
    assert set(narrow.cluster["partitions"]) == {("orders", 0)} and \
        narrow.cluster["replication"] == {"orders": 1}
    assert [g["name"] for g in narrow.groups] == ["billing"] and narrow.groups[0]["hidden"]
    group = pages.group(console, {"name": "billing"}, alice)
    assert [o["topic"] for o in group["offsets"]] == ["orders"] and group["lag_history"] == []
    assert group["members"][0]["assignment"] == ["orders-0"]
    assert pages.throughput(console, {}, alice)["topics"] == ["orders"]
    admin = Access(Auth(), "User:admin")
    assert set(admin.narrow(state).topics) == {"orders", "secret"}  # a super user sees all
    assert pages.throughput(console, {}, admin)["topics"] == ["orders", "secret"]
    assert Access(Auth(), None).narrow(state) is state  # no login: the console is open
