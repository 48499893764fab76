"""Cluster test helpers (no tests here): ``Cluster``, real brokers joined
through a real etcd (``EtcdProcess`` of bench/common/procs.py), optionally
each behind TcpProxy fronts (tests/support/proxy.py). Every wait is bounded;
processes are stopped by PID.
"""

from __future__ import annotations

import os

from bench import ROOT as _ROOT
from bench.common.procs import BrokerProcess, EtcdProcess, free_port  # noqa: F401 (EtcdProcess re-exported)
from logbroker.protocol import messages as m
from tests.support.fixtures import RawConn, batch, require_tool, wait_until
from tests.support.proxy import TcpProxy

ROOT = str(_ROOT)  # the checkout


def require_etcd() -> str:
    """The path of ``etcd``; skips the test when it is not installed (fails
    instead with LOGBROKER_ETCD_REQUIRED=1)."""
    return require_tool("etcd", "LOGBROKER_ETCD_REQUIRED", "tools/install-etcd.sh")


# -- a cluster of real brokers (issue 10) -------------------------------------------------------
class Cluster:
    """``n`` real brokers (ids 1..n) joined through a real etcd at ``etcd_url``;
    each in ``base/broker-<id>``. Talks to them with raw protocol connections
    (RawConn); every wait is bounded."""

    def __init__(self, base, etcd_url: str, n: int = 3, config: "dict | None" = None,
                 extra: tuple = (), proxied: bool = False) -> None:
        """``proxied``: every client and peer reaches broker i only through
        ``front[i]`` (its advertised address) and broker i reaches etcd only
        through ``etcd_link[i]`` (TcpProxy), so ``isolate(i)`` can partition
        it; the harness itself talks to each broker's own port directly."""
        cfg = {"session_timeout_ms": 2000, "replica_lag_time_max_ms": 3000, **(config or {})}
        self.front: dict[int, TcpProxy] = {}
        self.etcd_link: dict[int, TcpProxy] = {}
        self.brokers: dict[int, BrokerProcess] = {}
        for i in range(1, n + 1):
            args = ["--broker-id", str(i)]
            port = 0
            if proxied:
                port = free_port()
                self.front[i] = TcpProxy(("127.0.0.1", port))
                self.etcd_link[i] = TcpProxy(etcd_url.removeprefix("http://"))
                args += ["--etcd", f"http://{self.etcd_link[i].address}",
                         "--advertised-address", self.front[i].address]
            else:
                args += ["--etcd", etcd_url]
            b = BrokerProcess(os.path.join(str(base), f"broker-{i}"), *args, *extra, config=cfg)
            b.port = port
            self.brokers[i] = b
        self._conns: dict[int, tuple[int, RawConn]] = {}

    def isolate(self, i: int, mode: str = "blackhole") -> None:
        """Cut broker i off from etcd, its peers and (proxied) clients."""
        self.front[i].cut(mode)
        self.etcd_link[i].cut(mode)

    def heal(self, i: int) -> None:
        self.front[i].heal()
        self.etcd_link[i].heal()

    def start(self) -> "Cluster":
        for b in self.brokers.values():  # side by side (as tools/cluster.py), then each waited for
            b.launch()
        for b in self.brokers.values():
            b.wait_ready()
        wait_until(lambda: len(self.metadata().brokers) == len(self.brokers), 15,
                   "every broker registered")
        return self

    def close(self) -> None:
        for b in self.brokers.values():
            b.kill()
        for proxy in (*self.front.values(), *self.etcd_link.values()):
            proxy.close()

    @property
    def bootstrap(self) -> str:
        """The brokers' advertised addresses (through the proxies when proxied)."""
        if self.front:
            return ",".join(p.address for p in self.front.values())
        return ",".join(b.bootstrap for b in self.brokers.values() if b.port)

    def live(self) -> list[int]:
        return [i for i, b in self.brokers.items() if b.alive()]

    def conn(self, i: int) -> RawConn:
        b = self.brokers[i]
        held = self._conns.get(i)
        if held is None or held[0] != b.proc.pid or held[1].sock.fileno() < 0:
            if held is not None:
                held[1].close()
            self._conns[i] = (b.proc.pid, RawConn(b.port))
        return self._conns[i][1]

    def call(self, i: int, msg, timeout: float = 10.0):
        try:
            return self.conn(i).call(msg, timeout)
        except (OSError, AssertionError, TimeoutError):
            self._conns.pop(i, None)
            raise

    def metadata(self, topics=None, via: "int | None" = None) -> m.MetadataResponse:
        for i in ([via] if via is not None else self.live()):
            try:
                resp = self.call(i, m.Metadata(topics=topics))
            except (OSError, AssertionError, TimeoutError):
                continue
            if via is not None or not resp.error:  # e.g. CLUSTER_UNAVAILABLE: ask another
                return resp
        raise AssertionError("no broker answers Metadata")

    def state(self, topic: str, partition: int = 0, via: "int | None" = None) -> tuple:
        """(leader, leader_epoch, replicas, isr) as a broker sees it."""
        for t, p, leader, epoch, replicas, isr in self.metadata([topic], via).partitions:
            if (t, p) == (topic, partition):
                return leader, epoch, replicas, isr
        raise AssertionError(f"no state for {topic}-{partition}")

    def wait_state(self, topic: str, partition: int, pred, timeout: float = 15.0,
                   what: str = "partition state", via: "int | None" = None) -> tuple:
        box = []

        def check():
            try:
                st = self.state(topic, partition, via)
            except AssertionError:
                return False
            box[:] = [st]
            return pred(*st)
        wait_until(check, timeout, what)
        return box[0]

    def create(self, topic: str, partitions: int = 1, **configs) -> None:
        resp = self.call(self.live()[0], m.CreateTopics(topics=((topic, partitions, configs),)))
        assert resp.topics[0][1] == 0, resp
        for p in range(partitions):
            self.wait_state(topic, p, lambda leader, e, r, isr: leader >= 0 and len(isr) == len(r))

    def produce(self, i: int, topic: str, partition: int, values, acks: int = -1,
                timeout_ms: int = 5000) -> tuple:
        """(error, message, base_offset) of one batch of ``values`` sent to broker ``i``."""
        data = batch(values)
        resp = self.call(i, m.Produce(acks=acks, timeout_ms=timeout_ms,
                                      parts=((topic, partition, len(data)),), payload=(data,)),
                         timeout_ms / 1000 + 10)
        _, _, code, message, base, _ = resp.parts[0]
        return code, message, base

    def read_all(self, i: int, topic: str, partition: int = 0) -> list[tuple[int, bytes]]:
        """Every (offset, value) below broker ``i``'s HW, read from it over Fetch."""
        from logbroker.records import decode_batch, scan_batches

        out, offset = [], 0
        while True:
            resp = self.call(i, m.Fetch(max_wait_ms=0, parts=((topic, partition, offset, 1 << 20),)))
            part, data = resp.parts[0], bytes(resp.payload[0])
            assert part[2] == 0, part
            if not data:
                return out
            for pos, header in scan_batches(data):
                for rec in decode_batch(data[pos:pos + header.size]).records():
                    if rec.offset >= offset:
                        out.append((rec.offset, rec.value))
                offset = header.next_offset


def segment_bytes(data_dir, topic: str, partition: int) -> dict[str, bytes]:
    """Every segment file of one partition in a data dir, by name."""
    d = os.path.join(str(data_dir), f"{topic}-{partition}")
    out = {}
    for n in sorted(os.listdir(d)):
        if n.endswith(".log"):
            with open(os.path.join(d, n), "rb") as fh:
                out[n] = fh.read()
    return out
