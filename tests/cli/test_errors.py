"""The CLI's edge: every bad input is one ``error: NAME: message`` line and a
non-zero exit (never a traceback or a log line); produce checks its whole
input before sending; consume names unknown topics and out-of-range offsets;
an unreachable broker fails every command within its --timeout."""

from __future__ import annotations

import json
import time

import pytest

from tests.support.fixtures import (BrokerProcess, cli_error, cli_ok, closed_port, invoke_cli,
                      invoked_error, invoked_ok, run_cli)
from logbroker.cli.consume import parse_offset


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("cli-errors") / "data").start()
    yield b
    b.kill()


@pytest.fixture(scope="module")
def abc(broker):
    """Topic ``abc``: records a, b, c at offsets 0..2."""
    cli_ok(run_cli("produce", "abc", "a", "b", "c", bootstrap=broker.bootstrap))
    return "abc"


@pytest.mark.parametrize("args, name, needle", [
    (("consume", "abc", "--offset", "@-1"), "INVALID_REQUEST", "@-AGE"),
    (("consume", "abc", "--offset", "@99999999999999999999"), "INVALID_REQUEST", "timestamp"),
    (("consume", "abc", "--offset", "1" * 25), "INVALID_REQUEST", "--offset"),
    (("consume", "abc", "-b", "host:notaport"), "INVALID_CONFIG", "host:notaport"),
    (("produce", "abc", "x", "-b", "127.0.0.1:99999"), "INVALID_CONFIG", "1..65535"),
    (("consume", "abc", "-g", ""), "INVALID_GROUP_ID", "''"),
    (("consume", "abc", "-g", "x" * 300), "INVALID_GROUP_ID", "1-249"),
    (("consume", "abc", "-p", "99999999999"), "INVALID_REQUEST", "partition"),
    (("consume", "abc", "--timeout", "nan"), "INVALID_REQUEST", "--timeout"),
    (("consume", "", "--timeout", "1"), "INVALID_TOPIC", "''"),
    (("topics", "create", ""), "INVALID_TOPIC", "''"),
    (("produce", "abc", "x", "--key-separator", ""), "INVALID_REQUEST", "--key-separator"),
    (("consume", "abc", "--bogus"), "USAGE", "--bogus"),
    (("consume", "abc", "-g"), "USAGE", "requires an argument. (see 'logbroker consume --help')"),
    (("groups", "describe", "no-such-group"), "GROUP_ID_NOT_FOUND", "no-such-group"),
])
def test_bad_input_is_one_error_line(broker, abc, args, name, needle):
    result = invoke_cli(args, bootstrap=broker.bootstrap)
    assert needle in invoked_error(result, name)
    assert result.exit_code == (2 if name == "USAGE" else 1)


def test_real_executable_bad_input_is_one_error_line(broker, abc):
    for args, name in [(("consume", "abc", "--offset", "@-1"), "INVALID_REQUEST"),
                       (("consume", "abc", "-b", "host:notaport"), "INVALID_CONFIG"),
                       (("consume", "abc", "-g", ""), "INVALID_GROUP_ID")]:
        cli_error(run_cli(*args, bootstrap=broker.bootstrap), name)


def test_client_log_records_stay_off_stderr(broker):
    """A record the broker refuses: the producer logs a warning; the user sees
    only the error line, which says how many records got through."""
    cli_ok(run_cli("topics", "create", "tiny", "--config", "max_batch_bytes=100",
                   bootstrap=broker.bootstrap))
    result = run_cli("produce", "tiny", "x", "y" * 300, bootstrap=broker.bootstrap)
    assert cli_error(result, "RECORD_TOO_LARGE").endswith("(1 of 2 record(s) acknowledged)")


def lb(broker, *args: str, stdin: "bytes | None" = None):
    """The CLI in process against the module's broker."""
    return invoke_cli(args, stdin=stdin, bootstrap=broker.bootstrap)


@pytest.mark.parametrize("fmt, lines, needle", [
    ("json", b'{"value": "a"}\n{"value": "b"}\n{"value": 3}\n', "line 3: 'value' must be"),
    ("json", b'{"value": "a"}\n\n{"value": "b", "timestamp": 99999999999999999999}\n',
     "line 3: timestamp 99999999999999999999 is not in 0..253402300799999"),
    ("json", b'{"value": "a"}\n{"value": "b", "partition": 5}\n', "line 2: partition 5 is not in 0..1"),
    ("json", b'{"value": "a"}\n' + b"[" * 100_000 + b"\n", "line 2:"),
    ("json", b'{"value": "a"}\n{"value": "b", "headers": true}\n', "line 2: headers must be a list"),
    ("text", b"k:a\nk:b\nno separator\nk:d\n", "line 3: no key separator"),
], ids=["bad-value", "timestamp", "partition", "nesting", "headers", "separator"])
def test_produce_checks_the_whole_input_before_sending(broker, fmt, lines, needle):
    topic = f"whole-{fmt}-{abs(hash(lines)) % 10**8}"
    invoked_ok(lb(broker, "topics", "create", topic, "--partitions", "2"))
    args = ["produce", topic, "--format", fmt] + (["--key-separator", ":"] if fmt == "text" else [])
    t = time.monotonic()
    assert needle in invoked_error(lb(broker, *args, stdin=lines), "INVALID_REQUEST")
    assert time.monotonic() - t < 15
    assert invoked_ok(lb(broker, "consume", topic)) == ""  # nothing stored


def test_produce_json_partition_field(broker):
    invoked_ok(lb(broker, "topics", "create", "parts", "--partitions", "3"))
    lines = b'{"value": "two", "partition": 2}\n{"value": "zero", "partition": 0}\n{"value": "dflt"}\n'
    invoked_ok(lb(broker, "produce", "parts", "--format", "json", "-p", "1", stdin=lines))
    got = {p: invoked_ok(lb(broker, "consume", "parts", "-p", str(p))).split() for p in range(3)}
    assert got == {0: ["zero"], 1: ["dflt"], 2: ["two"]}


def test_consume_unknown_topic_and_offsets_out_of_range(broker, abc):
    assert "never-made" in invoked_error(lb(broker, "consume", "never-made"),
                                         "UNKNOWN_TOPIC_OR_PARTITION")
    assert invoked_ok(lb(broker, "consume", abc, "--offset", "3")) == ""
    assert "abc[0]: offset 4 is not in 0..3" in invoked_error(
        lb(broker, "consume", abc, "--offset", "4"), "OFFSET_OUT_OF_RANGE")
    invoked_error(lb(broker, "consume", abc, "-p", "1"), "UNKNOWN_TOPIC_OR_PARTITION")


def test_relative_timestamp_offsets(broker):
    now = int(time.time() * 1000)
    lines = b"".join(json.dumps({"value": v, "timestamp": now - ago}).encode() + b"\n"
                     for v, ago in (("old", 7_200_000), ("recent", 600_000)))
    invoked_ok(lb(broker, "produce", "rel", "--format", "json", stdin=lines))
    assert invoked_ok(lb(broker, "consume", "rel", "--offset", "@-1h")).split() == ["recent"]
    assert invoked_ok(lb(broker, "consume", "rel", "--offset", "@-3h")).split() == ["old", "recent"]
    assert parse_offset("@-90s", now_ms=100_000) == ("ts", 10_000)
    assert parse_offset("@-2d", now_ms=0) == ("ts", 0)
    assert parse_offset("@1234") == ("ts", 1234) and parse_offset("7") == 7


UNREACHABLE_COMMANDS = [
    ("produce", "t", "x"),
    ("produce", "t", "x", "--acks", "0"),
    ("consume", "t"),
    ("consume", "t", "--follow"),
    ("topics", "list"),
    ("topics", "create", "t"),
    ("topics", "describe"),
    ("topics", "delete", "t"),
    ("groups", "list"),
    ("groups", "describe", "g"),
    ("groups", "reset-offsets", "g", "-t", "t", "--to-earliest"),
    ("cluster", "status"),
    ("cluster", "rebalance"),
]


@pytest.mark.parametrize("args", UNREACHABLE_COMMANDS, ids=" ".join)
def test_unreachable_broker_fails_every_command_within_its_timeout(args):
    """Against a closed loopback port with --timeout 0.2 (each command waits
    it out, retrying): the one BROKER_UNAVAILABLE line, within the timeout
    plus a small margin."""
    port = closed_port()
    t = time.monotonic()
    result = invoke_cli([*args, "-b", f"127.0.0.1:{port}", "--timeout", "0.2"])
    took = time.monotonic() - t
    assert invoked_error(result, "BROKER_UNAVAILABLE") == \
        f"cannot connect to 127.0.0.1:{port} within 0.2 s: connection refused"
    assert took < 0.2 + 1.0, took


def test_unreachable_broker_real_executable_produce():
    """The issue's case: ``produce`` took 60 s whatever --timeout said."""
    port = closed_port()
    t = time.monotonic()
    result = run_cli("produce", "t", "x", "-b", f"127.0.0.1:{port}", "--timeout", "1", timeout=90)
    took = time.monotonic() - t
    assert cli_error(result, "BROKER_UNAVAILABLE") == \
        f"cannot connect to 127.0.0.1:{port} within 1.0 s: connection refused"
    assert took < 1.0 + 4.0, took  # the interpreter's start-up is most of the margin
