"""The guessing throttle's arithmetic (security/auth_throttle.py, pure, a
clock passed in): the burst then the rate per address, IPv6 counted per
/64, the per-user limit and its exemption for the user's own addresses,
and memory bounded whatever the number of addresses and names."""

from __future__ import annotations

from logbroker.security.auth_throttle import BURST, AuthThrottle


def fail_until_held(t: AuthThrottle, ip: str, user: str, now: float) -> int:
    """Failures counted at ``now`` before ``wait`` holds the next one back."""
    n = 0
    while not t.wait(ip, user, now)[0]:
        t.failed(ip, user, now)
        n += 1
        assert n < 1000
    return n


def test_an_address_gets_its_burst_then_its_rate():
    t = AuthThrottle(per_ip=10, per_user=0)
    assert fail_until_held(t, "10.0.0.1", "alice", 100.0) == BURST
    wait, which = t.wait("10.0.0.1", "alice", 100.0)
    assert which == "address" and abs(wait - 0.1) < 1e-9
    assert t.wait("10.0.0.2", "alice", 100.0) == (0.0, "address")  # another address: free
    assert fail_until_held(t, "10.0.0.1", "alice", 101.0) == BURST  # idle: the burst again
    for k in range(50):  # then, one every 1/rate seconds, for ever
        now = 102.0 + k / 10
        assert t.wait("10.0.0.1", "alice", now)[0] == 0
        t.failed("10.0.0.1", "alice", now)
    assert fail_until_held(t, "10.0.0.1", "alice", now) == BURST - 1  # no burst saved up
    # an IPv6 host counts per /64: rotating addresses inside it does not help
    for i in range(BURST):
        t.failed(f"2001:db8::{i + 1}", "alice", 100.0)
    assert t.wait("2001:db8::ffff", "alice", 100.0)[0] > 0
    assert t.wait("2001:db8:0:1::1", "alice", 100.0)[0] == 0


def test_a_user_limit_spares_the_users_own_addresses():
    t = AuthThrottle(per_ip=10, per_user=30)
    t.succeeded("10.0.0.1", "bob", 50.0)  # bob's own address
    attackers = [f"10.1.0.{i}" for i in range(20)]
    held = 0
    for i in range(200):  # 200 guesses at once over 20 addresses
        ip = attackers[i % len(attackers)]
        if t.wait(ip, "bob", 100.0)[0]:
            held += 1
        else:
            t.failed(ip, "bob", 100.0)
    assert held == 200 - BURST  # the user's burst, then every one held back
    assert t.wait("10.2.0.1", "bob", 100.0)[1] == "user"  # a new address: held too
    assert t.wait("10.0.0.1", "bob", 100.0) == (0.0, "address")  # bob's own: free
    assert t.wait("10.2.0.1", "bob", 102.0)[0] == 0  # and the limit ends once they stop


def test_memory_is_bounded():
    t = AuthThrottle(per_ip=10, per_user=30, capacity=100)
    for i in range(5_000):
        t.failed(f"10.{i // 65536}.{i // 256 % 256}.{i % 256}", f"user{i}", 100.0)
        t.succeeded(f"10.9.{i // 256 % 256}.{i % 256}", f"user{i}", 100.0)
    assert len(t.per_ip) <= 100 and len(t.per_user) <= 100 and len(t._known) <= 100
