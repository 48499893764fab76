"""Partition choice and bootstrap parsing (pure)."""

from __future__ import annotations

from collections import Counter

import crc32c
import pytest

from logbroker.client import partition_for_key
from logbroker.client.net.link import parse_bootstrap
from logbroker.client.producer.partitioner import RoundRobin


def test_key_hash_is_crc32c_and_stable_across_releases():
    # Pinned values: changing the hash would move every key to another
    # partition, so these must never change.
    keys = (b"", b"a", b"key-1", b"user-42", b"\xff" * 10)
    assert [partition_for_key(k, 8) for k in keys] == [0, 0, 1, 6, 0]
    assert [partition_for_key(k, 3) for k in keys] == [0, 1, 2, 2, 2]
    for k in keys:
        assert partition_for_key(k, 1000) == (crc32c.crc32c(k) & 0x7FFFFFFF) % 1000


def test_keys_spread_evenly_and_always_land_in_range():
    counts = Counter(partition_for_key(b"k%d" % i, 8) for i in range(16_000))
    assert set(counts) == set(range(8))
    assert min(counts.values()) > 1700 and max(counts.values()) < 2300


def test_round_robin_cycles_over_the_partitions():
    rr = RoundRobin()
    assert [rr(3) for _ in range(7)] == [0, 1, 2, 0, 1, 2, 0]
    assert all(0 <= rr(5) < 5 for _ in range(20))


@pytest.mark.parametrize("text, expected", [
    ("127.0.0.1:9555", [("127.0.0.1", 9555)]),
    ("a:1, b:2", [("a", 1), ("b", 2)]),
    (["h1:7", "h2"], [("h1", 7), ("h2", 9555)]),
    ("[::1]:9000", [("::1", 9000)]),
    ("[::1]", [("::1", 9555)]),
])
def test_bootstrap_forms(text, expected):
    assert parse_bootstrap(text) == expected


@pytest.mark.parametrize("text", ["", " , ", "host:port"])
def test_bad_bootstrap_is_a_value_error(text):
    with pytest.raises(ValueError):
        parse_bootstrap(text)
