"""Hypothesis fuzz of the CLI: random argument lists for every command (the
real flags, random values: empty, huge, negative, unicode, ``@`` forms, bad
host:port, bad JSON lines on stdin, ...) run in process (click's CliRunner)
against one real broker, and a few through the real executable.

The property: exit status 0, 1 or 2; no traceback and no Python exception
name in the output (only our ``error: NAME: message`` line); every run ends
within a bound. Never fuzzed: ``consume --follow`` (runs until interrupted by
contract; tested with SIGTERM below) and a ``serve`` that would start (each
``serve`` example carries an option its validation refuses). ``inspect``
reads only paths under the test's tmp dir. Only loopback addresses are
targets (a bad host never parses, so nothing is looked up).

Default run: ~200 examples. ``-m slow``: 10,000.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tests.support.fixtures import LOGBROKER, BrokerProcess, closed_port, invoke_cli, run_cli

BOUND_S = 20.0  # no run may take longer (every client command gets --timeout <= 2 s)
EXCEPTION_NAME = re.compile(r"\b[A-Z][a-z]+(?:[A-Z][a-z]*)*(?:Error|Exception|Warning)\b")
STATS = {"runs": 0, "by_exit": {0: 0, 1: 0, 2: 0}, "slowest": 0.0, "errors": {}}
TOPICS = ["fz", "fz1", "fz2", "fz3"]  # the only valid names created: bounded state


class World:
    """What the examples run against: the broker and tmp paths."""

    def __init__(self, broker: BrokerProcess, tmp) -> None:
        self.broker, self.tmp = broker, tmp
        self.closed = f"127.0.0.1:{closed_port()}"
        (tmp / "empty").mkdir()
        (tmp / "garbage.log").write_bytes(os.urandom(3000))
        (tmp / "00000000000000000000.log").write_bytes(b"\x00" * 61 + os.urandom(200))
        (tmp / "lines.txt").write_bytes(b"a\nb\n\xff\xfe\n")
        (tmp / "records.json").write_bytes(b'{"value": "x"}\n{"value": 1}\n')
        (tmp / "bad.toml").write_text("= = =")
        (tmp / "unknown.toml").write_text("nonsense = 1\n")
        self.paths = [str(tmp / n) for n in ("empty", "garbage.log", "00000000000000000000.log",
                                             "lines.txt", "records.json", "missing", "bad.toml")]
        self.data_paths = self.paths + [broker.data_dir, os.path.join(broker.data_dir, "fz-0")]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("cli-fuzz") / "data").start()
    try:
        for args in (("topics", "create", "fz", "--partitions", "2"),
                     ("produce", "fz", "a", "b", "c", "d"),
                     ("consume", "fz", "-g", "fzg")):
            assert invoke_cli(args, bootstrap=b.bootstrap).exit_code == 0
        yield World(b, tmp_path_factory.mktemp("cli-fuzz-files"))
    finally:
        b.kill()
        print(f"\nCLI fuzz: {STATS['runs']} runs, exit codes {STATS['by_exit']}, "
              f"slowest {STATS['slowest']:.2f} s, 0 tracebacks, 0 hangs; errors {STATS['errors']}")


# -- values ------------------------------------------------------------------------------------
# Each option has (sane values, any values): an example is "sane" three times in four, so most
# reach the broker; the rest mix in empty, huge, negative, unicode and malformed values.
TEXT = st.text(max_size=30)
WEIRD = st.sampled_from(["", " ", "-", "--", "@", "@-", "\x00", "é", "名前", "\udcff", "a" * 300,
                         "nan", "inf", "-0", "1e9", "0x10", "٣"])
SMALL = st.integers(0, 5).map(str)
INT = st.one_of(st.integers(-3, 5), st.integers(-(2 ** 70), 2 ** 70),
                st.sampled_from([2 ** 31 - 1, 2 ** 31, 2 ** 63 - 1, 2 ** 63, 2 ** 64])).map(str)
ANY = st.one_of(INT, WEIRD, TEXT)
TOPIC = (st.sampled_from(TOPICS), st.one_of(st.sampled_from(
    ["", ".", "..", "bad/name", "x" * 250, "no-such-topic"]), TEXT))
GROUP = (st.sampled_from(["fzg", "g1", "no-such-group", "名前"]), st.one_of(WEIRD, TEXT))
OFFSET = (st.one_of(st.sampled_from(["earliest", "latest", "@-1h", "@-0s", "@-99999d"]), SMALL,
                    st.integers(0, 2 ** 41).map(lambda n: f"@{n}")),
          st.one_of(st.sampled_from(["@", "@-1", "@-", "-1"]), INT, INT.map(lambda i: "@" + i),
                    st.integers(0, 10 ** 12).map(lambda n: f"@-{n}{'smhd'[n % 4]}"), TEXT))
ISO = (st.one_of(st.datetimes().map(lambda d: d.isoformat()), st.sampled_from(
    ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-12:00", "2026-01-01", "2026-01-01Z",
     "1970-01-01T00:00:00Z"])), st.one_of(st.just("yesterday"), TEXT))
PARTS = (st.sampled_from(["1", "2", "3"]), st.sampled_from(["0", "-1", "10001", str(2 ** 40), "x", ""]))
NUM = (SMALL, INT)
JSONISH = st.recursive(st.none() | st.booleans() | st.integers(-(2 ** 70), 2 ** 70)
                       | st.floats(allow_nan=False) | TEXT,
                       lambda inner: st.lists(inner, max_size=3)
                       | st.dictionaries(TEXT, inner, max_size=3), max_leaves=8)
RECORD_KEYS = ["value", "key", "headers", "timestamp", "partition", "topic", "value_base64",
               "key_base64"]
JSON_RECORD = st.dictionaries(st.sampled_from(RECORD_KEYS), st.one_of(
    JSONISH, TEXT, st.integers(0, 3), st.integers(0, 2 ** 41),
    st.lists(st.fixed_dictionaries({"key": TEXT}, optional={"value": JSONISH}), max_size=2)),
    max_size=5)
JSON_LINE = st.one_of(JSON_RECORD.map(json.dumps), JSONISH.map(json.dumps), TEXT,
                      st.just("[" * 5000))
STDIN = st.one_of(
    st.none(),
    st.lists(st.binary(max_size=40), max_size=6).map(b"\n".join),
    st.lists(JSON_LINE, max_size=6).map(lambda ls: "\n".join(ls).encode("utf-8", "surrogatepass")),
)


def _pick(draw, sane: bool, pair) -> str:
    return draw(pair[0] if sane else st.one_of(pair[0], pair[1]))


def _options(draw, sane: bool, table: dict) -> list[str]:
    """A random subset of ``table``'s options in random order (flags: None)."""
    chosen = draw(st.lists(st.sampled_from(sorted(table)), max_size=len(table) + 1,
                           unique=sane))
    out = []
    for opt in chosen:
        out.append(opt)
        if table[opt] is not None:
            out.append(_pick(draw, sane, table[opt]))
    return out


@st.composite
def connection(draw, world: World, sane: bool) -> list[str]:
    """-b/--timeout: the broker with a short timeout, a closed port, or bad values."""
    kind = "ok" if sane else draw(st.sampled_from(["ok", "closed", "bad-b", "bad-timeout"]))
    if kind == "ok":
        return ["-b", world.broker.bootstrap, "--timeout", draw(st.sampled_from(["1", "2"]))]
    if kind == "closed":
        return ["-b", world.closed, "--timeout", draw(st.sampled_from(["0.1", "0.3"]))]
    if kind == "bad-b":
        bad = draw(st.one_of(st.sampled_from(["host:notaport", ":", "", ",", "[::1", "h:0",
                                              "127.0.0.1:99999", "127.0.0.1:-1", "a b:1"]),
                             TEXT.map(lambda t: t + ":x")))
        return ["-b", bad, "--timeout", "1"]
    return ["-b", world.broker.bootstrap, "--timeout", draw(st.one_of(
        st.sampled_from(["0", "-1", "nan", "inf", "1e9", "0.05", "x", ""]), TEXT))]


SANE = st.sampled_from([True, True, True, False])


@st.composite
def produce_args(draw, world: World):
    sane = draw(SANE)
    opts = {"-k": (SMALL, ANY), "--key-separator": (st.sampled_from([":", "::"]), WEIRD),
            "-H": (st.sampled_from(["a=b", "k=", "é=ü"]),
                   st.one_of(st.sampled_from(["noeq", "=", "\udcff=1"]), TEXT)),
            "-p": (st.sampled_from(["0", "1"]), INT),
            "--acks": (st.sampled_from(["all", "1", "0"]), st.just("2")),
            "--format": (st.sampled_from(["text", "json"]), st.just("xml")),
            "-f": (st.sampled_from(world.paths[3:5]), st.sampled_from(world.paths))}
    values = draw(st.lists(st.one_of(ANY, JSON_LINE), max_size=3))
    if sane:
        values = [v for v in values if not v.startswith("-")]
    return (["produce", _pick(draw, sane, TOPIC), *values, *_options(draw, sane, opts),
             *draw(connection(world, sane))], draw(STDIN))


@st.composite
def consume_args(draw, world: World):
    sane = draw(SANE)
    opts = {"-o": OFFSET, "-p": (st.sampled_from(["0", "1"]), INT), "-g": GROUP,
            "-n": (st.sampled_from(["1", "2", "100"]), st.one_of(INT, WEIRD)),
            "--format": (st.sampled_from(["text", "json"]), st.just("csv"))}
    return ["consume", _pick(draw, sane, TOPIC), *_options(draw, sane, opts),
            *draw(connection(world, sane))], None


@st.composite
def topics_args(draw, world: World):
    sane = draw(SANE)
    sub = draw(st.sampled_from(["list", "create", "describe", "delete"] + ([] if sane else ["nope"])))
    if sub == "create":
        opts = {"--partitions": PARTS, "--retention-ms": NUM, "--retention-bytes": NUM,
                "--segment-bytes": (st.sampled_from(["128", "4096"]), INT),
                "--replication-factor": (st.just("1"), st.one_of(INT, WEIRD)),
                "--min-insync-replicas": (st.just("1"), st.one_of(INT, WEIRD)),
                "--unclean-leader-election": None,
                "--config": (st.sampled_from(["flush=lazy", "segment_ms=1", "max_batch_bytes=64",
                                              "retention_ms=-1"]),
                             st.one_of(st.sampled_from(["flush=x", "noeq", "nonsense=1",
                                                        "segment_bytes=" + str(2 ** 70)]),
                                       TEXT.map(lambda t: "flush=" + t)))}
        args = [_pick(draw, sane, TOPIC), *_options(draw, sane, opts)]
    elif sub in ("describe", "delete"):
        args = [*draw(st.lists(TOPIC[0] if sane else st.one_of(*TOPIC), max_size=2)),
                *_options(draw, sane, {"--json": None})]
        if sub == "delete":
            args = [a for a in args if a != "fz"]  # keep the seeded topic
    else:
        args = _options(draw, sane, {"--json": None})
    return ["topics", sub, *args, *draw(connection(world, sane))], None


@st.composite
def cluster_args(draw, world: World):
    sane = draw(SANE)
    sub = draw(st.sampled_from(["status", "rebalance"] + ([] if sane else ["nope"])))
    args = [*draw(st.lists(TOPIC[0] if sane else st.one_of(*TOPIC), max_size=2)),
            *_options(draw, sane, {"--json": None})]
    return ["cluster", sub, *args, *draw(connection(world, sane))], None


@st.composite
def groups_args(draw, world: World):
    sane = draw(SANE)
    sub = draw(st.sampled_from(["list", "describe", "delete", "reset-offsets", "reset-offsets"]))
    if sub == "reset-offsets":
        target = draw(st.sampled_from(["--to-earliest", "--to-latest", "--to-offset",
                                       "--to-datetime"]))
        opts = {"-t": TOPIC, "--all-topics": None, "-p": (st.sampled_from(["0", "1"]), INT),
                "--execute": None, "--json": None}
        if not sane:
            opts.update({"--to-earliest": None, "--to-latest": None, "--to-offset": NUM,
                         "--to-datetime": ISO})
        args = [_pick(draw, sane, GROUP), *_options(draw, sane, opts), target]
        if target == "--to-offset":
            args.append(_pick(draw, sane, NUM))
        elif target == "--to-datetime":
            args.append(_pick(draw, sane, ISO))
    elif sub in ("describe", "delete"):
        args = [*draw(st.lists(GROUP[0] if sane else st.one_of(*GROUP), max_size=2)),
                *(_options(draw, sane, {"--json": None}) if sub == "describe" else [])]
    else:
        args = _options(draw, sane, {"--json": None})
    return ["groups", sub, *args, *draw(connection(world, sane))], None


@st.composite
def inspect_args(draw, world: World):
    sane = draw(SANE)
    opts = {"--records": None, "--json": None, "--verify": None,
            "--max-value-bytes": (SMALL, st.one_of(INT, WEIRD)), "--progress": None,
            "--no-progress": None}
    paths = draw(st.lists(st.sampled_from(world.data_paths), min_size=1 if sane else 0, max_size=3))
    return ["inspect", *paths, *_options(draw, sane, opts)], None


@st.composite
def serve_args(draw, world: World):
    """Always one option serve refuses before it starts (never a running server)."""
    refused = draw(st.sampled_from([
        ["--port", draw(st.sampled_from(["-1", "65536", "x", str(2 ** 70), ""]))],
        ["--log-level", draw(st.sampled_from(["loud", "", "DEBUG!"]))],
        ["--flush", draw(st.sampled_from(["never", ""]))],
        ["--config", draw(st.sampled_from([str(world.tmp / "missing.toml"),
                                           str(world.tmp / "bad.toml"),
                                           str(world.tmp / "unknown.toml")]))]]))
    opts = {"--host": (st.sampled_from(["127.0.0.1", "::1"]), st.nothing()),
            "--data-dir": (st.sampled_from([str(world.tmp / "serve-data"), world.paths[1]]),
                           st.nothing())}
    return ["serve", *_options(draw, True, opts), *refused], None


def any_args(world: World):
    return st.one_of(produce_args(world), consume_args(world), topics_args(world),
                     groups_args(world), cluster_args(world), inspect_args(world),
                     serve_args(world),
                     st.lists(st.one_of(ANY, st.sampled_from(["-h", "--version", "topics",
                                                              "groups", "cluster"])), max_size=3)
                     .map(lambda a: (a, None)))


# -- the property --------------------------------------------------------------------------------
def check(args, exit_code: int, out: str, err: str, exception, took: float) -> None:
    where = f"{args!r}: exit {exit_code}, {took:.2f} s\nstderr: {err[:2000]}"
    assert exception is None or isinstance(exception, SystemExit), f"{where}\n{exception!r}"
    assert exit_code in (0, 1, 2), where
    assert "Traceback" not in err and "Traceback" not in out, where
    assert "error: INTERNAL" not in err and not EXCEPTION_NAME.search(err), where
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith("note: ")]
    if exit_code == 1 and not lines and args[:1] == ["inspect"]:
        assert "PROBLEM" in out or '"type":"problem"' in out, where  # damage found: exit 1
    elif exit_code != 0 and "Usage:" not in err:  # a bare command group prints its help
        assert len(lines) == 1 and lines[0].startswith("error: "), where
    assert took < BOUND_S, where
    STATS["runs"] += 1
    STATS["by_exit"][exit_code] += 1
    STATS["slowest"] = max(STATS["slowest"], took)
    name = err.split(":", 2)[1].strip() if err.startswith("error: ") else None
    if name:
        STATS["errors"][name] = STATS["errors"].get(name, 0) + 1


def run_in_process(world: World, args, stdin) -> None:
    """Defaults for what the args leave out: a closed port, a short timeout."""
    t = time.monotonic()
    r = invoke_cli(args, stdin=stdin, bootstrap=world.closed, timeout=0.3)
    check(args, r.exit_code, r.stdout, r.stderr, r.exception, time.monotonic() - t)


def fuzz(world: World, examples: int) -> None:
    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(case=any_args(world))
    def run(case):
        run_in_process(world, *case)

    run()


def test_cli_fuzz_in_process(world):
    fuzz(world, 200)


@pytest.mark.slow
def test_cli_fuzz_in_process_long(world):
    fuzz(world, 10_000)


def test_cli_fuzz_real_executable(world):
    @settings(max_examples=4, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(case=st.one_of(produce_args(world), consume_args(world), groups_args(world)))
    def run(case):
        args, stdin = case
        assume(not any("\x00" in a for a in args))  # argv cannot carry NUL
        t = time.monotonic()
        r = run_cli(*args, stdin=stdin or b"", timeout=BOUND_S + 10)
        check(args, r.returncode, r.stdout.decode(errors="replace"),
              r.stderr.decode(errors="replace"), None, time.monotonic() - t)

    run()


def test_consume_follow_stops_cleanly_on_sigterm(world):
    """--follow runs until interrupted: SIGTERM ends it with status 0 and the
    count line, no traceback."""
    proc = subprocess.Popen([LOGBROKER, "consume", "fz", "--follow", "--offset", "earliest",
                             "-b", world.broker.bootstrap], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        first = proc.stdout.readline()  # a record printed: it is following now
        assert first.strip() in (b"a", b"b", b"c", b"d")
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 0, err
    assert err.decode().strip().startswith("consumed ") and b"Traceback" not in err
