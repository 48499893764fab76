"""A fake cluster for the clients' routing tests, and tests of the fake itself.

``FakeCluster(n)`` runs n brokers speaking the real protocol (the project's
codec) on 127.0.0.1 in one background thread's event loop. They share one
state, as if replication were perfect and instant: topics, per partition its
leader, epoch, replicas and ISR, one log per partition (batches stamped
with offsets), the idempotent producers' sequences (duplicates answered
with their original offset, gaps refused with OUT_OF_ORDER_SEQUENCE),
committed offsets. A broker serves Produce, Fetch and ListOffsets only for
the partitions it leads (NOT_LEADER_OR_FOLLOWER otherwise), everything else
for any. The test moves leaders, kills and revives brokers, injects errors
and reads ``requests`` (broker id, request type, partitions) to see where
the clients sent what. Nothing here is a real broker's logic: it is just
enough cluster to watch a client route.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import defaultdict

from logbroker.errors import OutOfOrderSequenceError
from logbroker.protocol import messages as m
from logbroker.protocol.codec import FrameReader, decode, encode
from logbroker.records import decode_batch
from logbroker.records.walker import split_batches
from logbroker.records.format import stamp

NOT_LEADER, UNKNOWN = 6, 3


class FakeCluster:
    def __init__(self, n: int = 3) -> None:
        self.n = n
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.ports: dict[int, int] = {}
        self.live: set[int] = set()
        self._servers: dict[int, asyncio.AbstractServer] = {}
        self._conns: dict[int, set] = defaultdict(set)
        self.topics: dict[str, int] = {}
        self.configs: dict[str, dict] = {}
        self.state: dict[tuple, list] = {}  # tp -> [leader, epoch, replicas, isr]
        self.logs: dict[tuple, list] = defaultdict(list)  # tp -> [stamped batch bytes]
        self.ends: dict[tuple, int] = defaultdict(int)
        self._seqs: dict[tuple, dict] = {}  # (tp, producer id) -> {base sequence: base offset}
        self._next_seq: dict[tuple, int] = {}
        self.offsets: dict[tuple, int] = {}
        self.faults: list = []  # [broker, request type, error code, times left, written]
        self.requests: list = []  # (broker, request type name, partitions)
        self._pid = 1000

    # -- life --------------------------------------------------------------------------------------
    def __enter__(self) -> "FakeCluster":
        self._thread.start()
        for b in range(self.n):
            self.call(self._listen, b)
        return self

    def __exit__(self, *exc) -> None:
        for b in list(self.live):
            self.kill(b)
        self.call(self._cancel_all)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()

    def call(self, fn, *args):
        """Run ``fn(*args)`` (a coroutine function or plain) on the fake's loop."""
        async def run():
            out = fn(*args)
            return await out if asyncio.iscoroutine(out) else out
        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(10)

    async def _cancel_all(self) -> None:
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _listen(self, broker: int) -> None:
        server = await asyncio.start_server(lambda r, w: self._serve(broker, r, w), "127.0.0.1",
                                            self.ports.get(broker, 0))
        self.ports[broker] = server.sockets[0].getsockname()[1]
        self._servers[broker] = server
        self.live.add(broker)

    def bootstrap(self, *brokers: int) -> str:
        return ",".join(f"127.0.0.1:{self.ports[b]}" for b in (brokers or range(self.n)))

    # -- the test's controls -----------------------------------------------------------------------
    def create(self, topic: str, partitions: int, leaders=None) -> None:
        def do():
            self.topics[topic] = partitions
            for p in range(partitions):
                leader = leaders[p] if leaders else p % self.n
                replicas = [leader] + [b for b in range(self.n) if b != leader]
                self.state[(topic, p)] = [leader, 0, replicas, list(replicas)]
        self.call(do)

    def move(self, tp: tuple, leader: int) -> None:
        """New leader (-1: none) in a new epoch."""
        def do():
            st = self.state[tp]
            st[0], st[1] = leader, st[1] + 1
        self.call(do)

    def kill(self, broker: int) -> None:
        """Stop listening and cut every connection (a crash)."""
        def do():
            self.live.discard(broker)
            self._servers.pop(broker).close()
            for w in self._conns.pop(broker, ()):
                w.transport.abort()
        self.call(do)

    def revive(self, broker: int) -> None:
        self.call(self._listen, broker)

    def fail(self, broker: int, request: type, code: int, times: int = 1,
             written: bool = False) -> None:
        """The next ``times`` parts of a Produce at ``broker`` get ``code``
        (with ``written``: after appending, as NOT_ENOUGH_REPLICAS_AFTER_APPEND);
        for another ``request`` type, the next ``times`` whole answers."""
        self.call(self.faults.append, [broker, request, code, times, written])

    def values(self, topic: str, partition: int) -> list:
        data = b"".join(self.call(lambda: list(self.logs[(topic, partition)])))
        return [r.value for view, _ in split_batches(data) for r in decode_batch(view).records()]

    def sent(self, request: type) -> list:
        """(broker, partitions) of every ``request`` received so far."""
        return [(b, parts) for b, name, parts in list(self.requests) if name == request.__name__]

    # -- serving -----------------------------------------------------------------------------------
    async def _serve(self, broker: int, reader, writer) -> None:
        self._conns[broker].add(writer)
        frames = FrameReader()
        try:
            while broker in self.live:
                data = await reader.read(1 << 20)
                if not data:
                    return
                frames.receive_data(data)
                while (frame := frames.next_frame()) is not None:
                    env = decode(frame)
                    resp = await self._answer(broker, env.message)
                    if resp is not None and broker in self.live:
                        writer.writelines(encode(resp, env.cid))
        except (ConnectionError, OSError):
            pass
        finally:
            self._conns[broker].discard(writer)
            writer.close()

    def _fault(self, broker: int, msg) -> "list | None":
        for f in self.faults:
            if f[0] == broker and isinstance(msg, f[1]) and f[3] > 0:
                f[3] -= 1
                return f
        return None

    async def _answer(self, broker: int, msg):
        parts = tuple((p[0], p[1]) for p in getattr(msg, "parts", None) or ())
        self.requests.append((broker, type(msg).__name__, parts))
        fault = None if type(msg) is m.Produce else self._fault(broker, msg)
        if fault:
            return m.RESPONSES[msg.API](error=fault[2], message="fake")
        handler = getattr(self, f"_{type(msg).__name__.lower()}")
        return await handler(broker, msg) if type(msg) is m.Fetch else handler(broker, msg)

    def _leading(self, broker: int, tp) -> int:
        """0 if ``broker`` leads ``tp``, else the error code."""
        if tp not in self.state:
            return UNKNOWN
        return 0 if self.state[tp][0] == broker else NOT_LEADER

    def _handshake(self, broker, msg):
        return m.HandshakeResponse(broker_id=broker, server="fake")

    def _metadata(self, broker, msg):
        names = msg.topics if msg.topics is not None else sorted(self.topics)
        topics = tuple((t, 0, "", self.topics[t]) if t in self.topics else (t, UNKNOWN, "unknown", 0)
                       for t in names)
        parts = tuple((t, p, *self._view(t, p)) for t, err, _, n in topics if not err
                      for p in range(n))
        return m.MetadataResponse(brokers=tuple((b, "127.0.0.1", self.ports[b])
                                                for b in sorted(self.live)),
                                  topics=topics, controller=0, partitions=parts)

    def _view(self, t, p) -> tuple:
        leader, epoch, replicas, isr = self.state[(t, p)]
        return leader, epoch, tuple(replicas), tuple(isr)

    def _produce(self, broker, msg):
        out = []
        for (t, p, _), data in zip(msg.parts, msg.payload):
            tp = (t, p)
            fault = self._fault(broker, msg)
            err = fault[2] if fault and not fault[4] else self._leading(broker, tp)
            base = -1
            if not err:
                try:
                    base = self._append(tp, bytes(data))
                except OutOfOrderSequenceError:
                    err = OutOfOrderSequenceError.code
                if fault:
                    err = fault[2]  # written, not acknowledged
            out.append((t, p, err, "fake" if err else "", base if not err else -1, 0))
        return None if msg.acks == 0 else m.ProduceResponse(parts=tuple(out))

    def _append(self, tp, data: bytes) -> int:
        first = None
        for view, h in split_batches(data):
            key = (tp, h.producer_id)
            seqs = self._seqs.setdefault(key, {})
            if h.producer_id >= 0 and h.base_sequence in seqs:
                base = seqs[h.base_sequence]  # a retried duplicate: its original offset
            else:
                if h.producer_id >= 0 and h.base_sequence != self._next_seq.get(key, 0):
                    raise OutOfOrderSequenceError("gap")
                base = self.ends[tp]
                batch = bytearray(view)
                batch[:16] = stamp(batch, base, self.state[tp][1])
                self.logs[tp].append(bytes(batch))
                self.ends[tp] = base + h.record_count
                if h.producer_id >= 0:
                    seqs[h.base_sequence] = base
                    self._next_seq[key] = h.base_sequence + h.record_count
            first = base if first is None else first
        return first

    async def _fetch(self, broker, msg):
        deadline = time.monotonic() + msg.max_wait_ms / 1000
        while True:
            parts, payload = [], []
            for t, p, offset, max_bytes in msg.parts:
                err = self._leading(broker, (t, p))
                chunk = b"" if err else self._read((t, p), offset, max_bytes)
                parts.append((t, p, err, "fake" if err else "", self.ends[(t, p)], 0, len(chunk)))
                payload.append(chunk)
            if any(payload) or any(p[2] for p in parts) or time.monotonic() >= deadline \
                    or broker not in self.live:
                return m.FetchResponse(parts=tuple(parts), payload=tuple(payload))
            await asyncio.sleep(0.005)

    def _read(self, tp, offset: int, max_bytes: int) -> bytes:
        out, size = [], 0
        for batch in self.logs[tp]:
            h = split_batches(batch)[0][1]
            if h.next_offset > offset and (not out or size + len(batch) <= max_bytes):
                out.append(batch)
                size += len(batch)
        return b"".join(out)

    def _listoffsets(self, broker, msg):
        return m.ListOffsetsResponse(parts=tuple(
            (t, p, err, "fake" if err else "", -1 if err else (0 if spec == m.EARLIEST else
                                                                self.ends[(t, p)]), -1)
            for t, p, spec in msg.parts for err in [self._leading(broker, (t, p))]))

    def _initproducerid(self, broker, msg):
        self._pid += 1
        return m.InitProducerIdResponse(producer_id=self._pid, producer_epoch=0)

    def _commitoffsets(self, broker, msg):
        for t, p, off, _ in msg.offsets:
            self.offsets[(msg.group, t, p)] = off
        return m.CommitOffsetsResponse(parts=tuple((t, p, 0, "") for t, p, _, _ in msg.offsets))

    def _fetchoffsets(self, broker, msg):
        return m.FetchOffsetsResponse(parts=tuple(
            (t, p, self.offsets.get((msg.group, t, p), -1), "", 0) for t, p in msg.parts or ()))

    def _createtopics(self, broker, msg):
        for name, partitions, configs in msg.topics:
            self.configs[name] = dict(configs)
            self.topics[name] = partitions
            for p in range(partitions):
                replicas = [(p + i) % self.n for i in range(self.n)]
                self.state[(name, p)] = [replicas[0], 0, replicas, list(replicas)]
        return m.CreateTopicsResponse(topics=tuple((t[0], 0, "") for t in msg.topics))

    def _describetopics(self, broker, msg):
        """Offsets only for the partitions this broker leads (a real broker
        answers for the replicas it hosts; the leader's are authoritative)."""
        names = msg.topics if msg.topics is not None else sorted(self.topics)
        return m.DescribeTopicsResponse(topics=tuple(
            (t, 0, "", {"partitions": self.topics[t]}, tuple(
                (p, 0, self.ends[(t, p)], self.ends[(t, p)], 0, 1, 0, "") if not err
                else (p, -1, -1, -1, 0, 0, err, "not hosted here")
                for p in range(self.topics[t]) for err in [self._leading(broker, (t, p))]))
            if t in self.topics else (t, UNKNOWN, "unknown", {}, ()) for t in names))

    def _describecluster(self, broker, msg):
        names = set(msg.topics) if msg.topics is not None else set(self.topics)
        return m.DescribeClusterResponse(
            cluster="fake", controller=0,
            brokers=tuple((b, "127.0.0.1", self.ports[b], b in self.live) for b in range(self.n)),
            partitions=tuple((t, p, *self._view(t, p), self.state[(t, p)][2][0])
                             for t, p in sorted(self.state) if t in names))

    def _electleaders(self, broker, msg):
        out = []
        for (t, p), st in sorted(self.state.items()):
            if msg.topics is None or t in msg.topics:
                preferred = st[2][0]
                if st[0] != preferred and preferred in self.live and preferred in st[3]:
                    st[0], st[1] = preferred, st[1] + 1
                out.append((t, p, 0, "", st[0]))
        return m.ElectLeadersResponse(parts=tuple(out))


# -- the fake's own tests ----------------------------------------------------------------------------
def test_the_fake_refuses_produce_at_a_follower_and_dedups_retries():
    from fixtures import RawConn
    from logbroker.records import build_batch

    with FakeCluster(2) as fc:
        fc.create("t", 1, leaders=[1])
        batch = build_batch([(b"v", None, (), 0)], producer_id=7, producer_epoch=0,
                            base_sequence=0)
        produce = m.Produce(parts=(("t", 0, len(batch)),), payload=(batch,))
        assert RawConn(fc.ports[0]).call(produce).parts[0][2] == NOT_LEADER
        leader = RawConn(fc.ports[1])
        assert leader.call(produce).parts[0][4] == 0
        assert leader.call(produce).parts[0][4] == 0  # the duplicate: its original offset
        assert fc.values("t", 0) == [b"v"] and fc.sent(m.Produce)[0] == (0, (("t", 0),))
