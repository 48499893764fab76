"""The kcat-like CLI against a real broker: produce, consume, topics, groups."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.support.fixtures import LOGBROKER, BrokerProcess, cli_ok, run_cli


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    # a group's first join waits group_initial_rebalance_delay_ms (1 s by default): 0.1 s here,
    # the group test's three CLI group consumers each waited out the full second
    b = BrokerProcess(tmp_path_factory.mktemp("cli") / "data",
                      config={"group_initial_rebalance_delay_ms": 100}).start()
    yield b
    b.kill()


def lb(broker, *args, stdin: "bytes | None" = None, timeout: float = 60):
    return run_cli(*args, bootstrap=broker.bootstrap, stdin=stdin, timeout=timeout)


ok = cli_ok


def test_produce_consume_text_keys_headers(broker):
    ok(lb(broker, "topics", "create", "t1", "--partitions", "2"))
    ok(lb(broker, "produce", "t1", "--key-separator", ":", "-H", "src=cli",
          stdin=b"a:one\nb:two\nc:three\n"))
    ok(lb(broker, "produce", "t1", "four", "five", "-p", "1"))
    out = ok(lb(broker, "consume", "t1"))
    assert sorted(out.split()) == ["five", "four", "one", "three", "two"]
    rows = [json.loads(line) for line in ok(lb(broker, "consume", "t1", "--format", "json")).splitlines()]
    keyed = {r["value"]: r for r in rows}
    assert keyed["one"]["key"] == "a" and keyed["one"]["headers"] == [{"key": "src", "value": "cli"}]
    assert keyed["four"]["partition"] == 1 and keyed["four"]["key"] is None
    only1 = ok(lb(broker, "consume", "t1", "-p", "1", "--offset", "0", "-n", "100"))
    assert {"four", "five"} <= set(only1.split())


def test_json_round_trip_including_binary(broker):
    ok(lb(broker, "produce", "bin", "--format", "json", stdin=(
        b'{"key": "k", "value": "/w==", "value_base64": true, "headers": [{"key": "h", "value": null}]}\n'
        b'{"value": "plain", "timestamp": 1234}\n')))
    first = ok(lb(broker, "consume", "bin", "--format", "json"))
    ok(lb(broker, "produce", "bin2", "--format", "json", stdin=first.encode()))
    second = ok(lb(broker, "consume", "bin2", "--format", "json"))
    strip = lambda text: [{k: v for k, v in json.loads(line).items() if k != "topic"}  # noqa: E731
                          for line in text.splitlines()]
    assert strip(first) == strip(second)
    rec = json.loads(first.splitlines()[0])
    assert rec["value_base64"] is True and rec["value"] == "/w=="
    assert json.loads(first.splitlines()[1])["timestamp"] == 1234


def test_offsets_timestamps_and_max_messages(broker):
    lines = b"".join(b'{"value": "v%d", "timestamp": %d}\n' % (i, 1000 * i) for i in range(10))
    ok(lb(broker, "produce", "ts", "--format", "json", stdin=lines))
    assert ok(lb(broker, "consume", "ts", "--offset", "7")).split() == ["v7", "v8", "v9"]
    assert ok(lb(broker, "consume", "ts", "--offset", "@4500")).split() == ["v5", "v6", "v7", "v8", "v9"]
    assert ok(lb(broker, "consume", "ts", "--offset", "latest")).split() == []
    assert ok(lb(broker, "consume", "ts", "-n", "2")).split() == ["v0", "v1"]


def test_group_commit_describe_and_reset(broker):
    ok(lb(broker, "produce", "g", *[f"m{i}" for i in range(6)]))
    assert ok(lb(broker, "consume", "g", "--group", "grp", "-n", "4")).split() == ["m0", "m1", "m2", "m3"]
    assert ok(lb(broker, "consume", "g", "--group", "grp")).split() == ["m4", "m5"]
    [desc] = json.loads(ok(lb(broker, "groups", "describe", "grp", "--json")))
    assert [(d["topic"], d["committed"], d["log_end"], d["lag"]) for d in desc["partitions"]] \
        == [("g", 6, 6, 0)]
    assert desc["state"] == "Empty" and desc["members"] == []  # the members left when done
    table = ok(lb(broker, "groups", "describe", "grp"))
    assert "COMMITTED" in table and "LAG" in table and "state Empty" in table
    dry = json.loads(ok(lb(broker, "groups", "reset-offsets", "grp", "-t", "g", "--to-offset", "2", "--json")))
    assert dry["executed"] is False and dry["offsets"][0]["new"] == 2
    assert json.loads(ok(lb(broker, "groups", "describe", "grp", "--json"))
                      )[0]["partitions"][0]["committed"] == 6
    ok(lb(broker, "groups", "reset-offsets", "grp", "-t", "g", "--to-earliest", "--execute"))
    assert ok(lb(broker, "consume", "g", "--group", "grp", "-n", "1")).split() == ["m0"]
    assert "grp" in json.loads(ok(lb(broker, "groups", "list", "--json")))


def test_topics_admin_json(broker):
    ok(lb(broker, "topics", "create", "adm", "--partitions", "3", "--retention-ms", "60000",
          "--segment-bytes", "4096"))
    listed = {t["topic"]: t["partitions"] for t in json.loads(ok(lb(broker, "topics", "list", "--json")))}
    assert listed["adm"] == 3
    desc = json.loads(ok(lb(broker, "topics", "describe", "adm", "--json")))[0]
    assert desc["configs"]["retention_ms"] == 60000 and len(desc["partitions"]) == 3
    ok(lb(broker, "topics", "delete", "adm"))
    assert "adm" not in {t["topic"] for t in json.loads(ok(lb(broker, "topics", "list", "--json")))}


@pytest.mark.parametrize("args, needle", [
    (("consume", "missing-topic"), "UNKNOWN_TOPIC_OR_PARTITION: unknown topic 'missing-topic'"),
    (("topics", "create", "bad/name"), "INVALID_TOPIC"),
    (("topics", "create", "x", "--config", "nonsense=1"), "INVALID_CONFIG"),
    (("consume", "t1", "--offset", "banana"), "--offset"),
    (("groups", "reset-offsets", "grp", "-t", "g"), "choose one"),
])
def test_errors_are_one_line_and_nonzero(broker, args, needle):
    result = lb(broker, *args)
    assert result.returncode != 0
    assert needle in result.stderr.decode() and b"Traceback" not in result.stderr


def test_produce_file_and_follow(broker, tmp_path):
    path = tmp_path / "lines.txt"
    path.write_bytes(b"".join(b"line%d\n" % i for i in range(1000)))
    ok(lb(broker, "produce", "file", "--file", str(path)))
    assert len(ok(lb(broker, "consume", "file")).split()) == 1000
    ok(lb(broker, "topics", "create", "fol"))
    follow = subprocess.Popen([LOGBROKER, "consume", "fol", "--follow", "--offset", "earliest", "-n", "3",
                               "-b", broker.bootstrap], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        ok(lb(broker, "produce", "fol", "x", "y", "z"))
        out, err = follow.communicate(timeout=60)
    finally:
        follow.kill()
    assert follow.returncode == 0, err
    assert out.split() == [b"x", b"y", b"z"]
