"""End to end: a compacted topic created with the CLI on a real broker,
compacted by its housekeeping loop, read back with the real Consumer."""

from __future__ import annotations

from tests.support.fixtures import FAST, BrokerProcess, cli_ok, consume, run_cli, wait_until

from logbroker import Consumer, Producer


def test_a_compacted_topic_serves_the_newest_value_per_key(tmp_path):
    broker = BrokerProcess(tmp_path / "data", config={"housekeeping_ms": 100})
    with broker:
        cli_ok(run_cli("topics", "create", "cc", "--config", "cleanup_policy=compact,delete",
                       "--config", "segment_bytes=1024", "--config", "segment_ms=1",
                       "--config", "min_cleanable_dirty_percent=0", "--config", "retention_ms=-1",
                       bootstrap=broker.bootstrap))
        assert "compact,delete" in cli_ok(run_cli("topics", "describe", "cc",
                                                  bootstrap=broker.bootstrap))
        expected = {}
        with Producer(broker.bootstrap, **FAST) as p:
            for i in range(400):
                key, value = b"key%d" % (i % 10), b"value%d" % i
                p.send("cc", value, key=key, partition=0)
                expected[key] = value
            p.flush()

        def compacted():
            with Consumer(broker.bootstrap, auto_offset_reset="earliest", **FAST) as c:
                c.assign([("cc", 0)])
                got = consume(c, 10, timeout=5)
                got += c.poll(0.2)
            return len(got) == 10 and {r.key: r.value for r in got} == expected and got

        got = wait_until(compacted, timeout=60, what="compaction of cc")
        offsets = [r.offset for r in got]
        assert offsets == sorted(offsets) and offsets[-1] == 399  # offsets kept: gaps before
