"""One client process of the broker benchmark (started by bench/broker/server.py).

    python -m bench.broker.worker '<json spec>'

Sets up (connects, creates the topic, builds the test data), prints ``READY``,
waits for a line on stdin, runs the timed section, prints one JSON line and
exits. On error it prints ``{"error": ...}``. Modes (``spec["mode"]``):

- ``produce``: ``logbroker.Producer`` (acks, linger_ms, batch_size from the
  spec; batch_size may be left out: the client's default), ``records`` sends
  cycling over 1,021 distinct values and ``distinct_keys`` keys, then
  ``flush()``; the timer stops when every record is acknowledged. With
  ``window`` (N) it does not stream: it sends N records, calls ``result()``
  on each of their N handles, then sends the next N; the result adds
  ``windows`` and the per-window time ``window_p50_ms``/``window_p99_ms``/
  ``window_max_ms`` (send of the first to ack of the last).
- ``consume``: ``logbroker.Consumer``: ``assign`` + ``seek_to_beginning``,
  ``poll`` until ``records`` records came; every record's key and value is
  touched (their lengths summed, which also checks the byte count).
- ``roundtrip``: ``send(...).result()`` ``sends`` times, each timed.
- ``roundtrip_raw``: the same over a blocking socket without the client
  library (one prebuilt non-idempotent batch re-sent): the floor.
- ``fetch_raw``: a blocking socket speaking the wire protocol: one Fetch at a
  time from offset 0 to ``end_offset`` (sealed segments), batch headers
  walked to find the next offset, nothing decoded; whole passes until
  ``min_seconds`` or ``max_passes``.
- ``fetch_consumer``: the same range through ``logbroker.Consumer.poll``.

``spec["tls"]`` (optional): the clients' TLS keywords (``tls_ca``, ...;
bench/tls/__main__.py). Every loop is bounded by a count and by ``deadline_s``. With ``profile`` set,
the timed section runs under cProfile (main thread only) and the stats are
dumped to that path.
"""

from __future__ import annotations

import json
import os
import random
import resource
import socket
import struct
import sys
import time
from itertools import cycle, islice
from operator import attrgetter

from bench.common.stats import percentile_ms
from logbroker import Admin, Consumer, Producer
from logbroker.protocol import codec
from logbroker.protocol import messages as m
from logbroker.records import build_batch

VALUES = 1021  # distinct values cycled by the producer (prime: pairs with keys vary)
_KEY, _VALUE = attrgetter("key"), attrgetter("value")
_BATCH_HEAD = struct.Struct(">QI")  # base_offset, batch_length
_LAST_DELTA = struct.Struct(">I")  # last_offset_delta at byte 23
_U32 = struct.Struct(">I")


class Deadline:
    def __init__(self, seconds: float, what: str) -> None:
        self.at, self.what, self.seconds = time.perf_counter() + seconds, what, seconds

    def check(self) -> None:
        if time.perf_counter() > self.at:
            raise TimeoutError(f"{self.what}: not done within {self.seconds:.0f} s")


def cpu_self() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def make_keys(count: int, size: int) -> list[bytes]:
    return [(b"key-%d-" % i).ljust(size, b".")[:size] for i in range(count)]


def make_values(size: int, seed: int = 1) -> list[bytes]:
    rng = random.Random(seed)
    return [rng.randbytes(size) for _ in range(VALUES)]


def ensure_topic(spec: dict) -> None:
    with Admin(spec["bootstrap"], **spec.get("tls", {})) as admin:
        admin.create_topic(spec["topic"], spec.get("partitions", 1), spec.get("configs") or None,
                           exist_ok=True)


# -- modes: each returns (timed function, its deadline, cleanup) ----------------------------
def produce(spec: dict):
    ensure_topic(spec)
    n, topic = spec["records"], spec["topic"]
    keys = make_keys(spec["distinct_keys"], spec["key_bytes"])
    values = make_values(spec["value_bytes"])
    sizing = {"batch_size": spec["batch_size"]} if "batch_size" in spec else {}
    producer = Producer(spec["bootstrap"], acks=spec["acks"], linger_ms=spec["linger_ms"], **sizing,
                        **spec.get("tls", {}))
    producer.send(topic + "-warmup", b"warm-up").result(timeout=30)  # connect, producer id
    producer.partitions_for(topic)
    if spec.get("window"):
        return _windows(spec, producer, keys, values), producer.close

    def timed(deadline: Deadline) -> dict:
        """Sends in runs of ``sample_every`` (128); the last record of each run
        is timed from its send() to its ack (a callback on the I/O thread)."""
        send, handle, clock, lat = producer.send, None, time.perf_counter_ns, []
        pairs = zip(cycle(values), cycle(keys))
        left, every = n, spec.get("sample_every", 128)
        for run in range(n // every + 1):
            for value, key in islice(pairs, min(left, every)):
                handle = send(topic, value, key=key)
            if left and handle is not None:
                t = clock()
                handle.add_done_callback(lambda _, t=t: lat.append(clock() - t))
            left -= min(left, every)
            if run % 32 == 0:
                deadline.check()
        producer.flush(timeout=max(deadline.at - time.perf_counter(), 0.001))
        meta = handle.result(timeout=1)
        lat.sort()
        acks = {"ack_p50_ms": percentile_ms(lat, 0.5), "ack_p99_ms": percentile_ms(lat, 0.99),
                "ack_samples": len(lat)} if lat else {}
        return {"records": n, "last_offset": meta.offset,
                "bytes": n * (spec["value_bytes"] + spec["key_bytes"]), **acks}

    return timed, producer.close


def _windows(spec: dict, producer, keys: list[bytes], values: list[bytes]):
    """The timed section of ``produce`` with ``window``: send a window,
    wait for every one of its handles, next; each window timed."""
    n, topic, window = spec["records"], spec["topic"], spec["window"]

    def timed(deadline: Deadline) -> dict:
        send, clock, times, meta = producer.send, time.perf_counter_ns, [], None
        pairs = zip(cycle(values), cycle(keys))
        done = 0
        for _ in range(-(-n // window)):
            t = clock()
            handles = [send(topic, value, key=key) for value, key in islice(pairs, min(window, n - done))]
            for h in handles:
                meta = h.result(timeout=max(deadline.at - time.perf_counter(), 0.001))
            times.append(clock() - t)
            done += len(handles)
            deadline.check()
        times.sort()
        return {"records": done, "last_offset": meta.offset if meta else -1,
                "bytes": done * (spec["value_bytes"] + spec["key_bytes"]), "windows": len(times),
                "window_p50_ms": percentile_ms(times, 0.5), "window_p99_ms": percentile_ms(times, 0.99),
                "window_max_ms": times[-1] / 1e6}

    return timed


def consume(spec: dict):
    n, topic = spec["records"], spec["topic"]
    consumer = Consumer(spec["bootstrap"], auto_offset_reset="earliest", **spec.get("tls", {}))
    tps = [(topic, p) for p in range(spec.get("partitions", 1))]

    def timed(deadline: Deadline) -> dict:
        consumer.assign(tps)
        consumer.seek_to_beginning()
        got = nbytes = polls = 0
        last = -1
        poll = consumer.poll
        while got < n and polls < n + 1000:
            records = poll(timeout=0.5)
            polls += 1
            if records:
                got += len(records)
                nbytes += sum(map(len, map(_VALUE, records))) + sum(map(len, map(_KEY, records)))
                last = records[-1].offset
            deadline.check()
        return {"records": got, "bytes": nbytes, "polls": polls, "last_offset": last}

    return timed, consumer.close


def _latencies(one, spec: dict, deadline: Deadline, record_bytes: int) -> dict:
    """Call ``one()`` ``spec["sends"]`` times, each timed; percentiles in ms."""
    clock, lat = time.perf_counter_ns, []
    for _ in range(spec["sends"]):
        t0 = clock()
        one()
        lat.append(clock() - t0)
        if t0 > deadline.at * 1e9:
            deadline.check()
    lat.sort()
    p = {name: percentile_ms(lat, q) for name, q in (("p50_ms", .5), ("p90_ms", .9), ("p99_ms", .99),
                                                     ("p999_ms", .999))}
    return {"records": len(lat), "bytes": len(lat) * record_bytes, **p, "max_ms": lat[-1] / 1e6,
            "mean_ms": sum(lat) / len(lat) / 1e6}


def roundtrip(spec: dict):
    ensure_topic(spec)
    topic, value, key = spec["topic"], b"v" * spec["value_bytes"], make_keys(1, spec["key_bytes"])[0]
    producer = Producer(spec["bootstrap"], acks=spec["acks"], linger_ms=0)
    send = producer.send

    def one() -> None:
        send(topic, value, key=key).result(timeout=10)

    for _ in range(spec["warmup"]):
        one()
    return (lambda deadline: _latencies(one, spec, deadline, len(value) + len(key))), producer.close


def roundtrip_raw(spec: dict):
    """The floor without a client library: a blocking socket, one prebuilt
    (non-idempotent) batch re-sent each time, the response read and decoded."""
    ensure_topic(spec)
    topic, value, key = spec["topic"], b"v" * spec["value_bytes"], make_keys(1, spec["key_bytes"])[0]
    batch = build_batch([(value, key)])
    acks = -1 if spec["acks"] == "all" else int(spec["acks"])
    host, port = spec["bootstrap"].rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    reader, cid = codec.FrameReader(), 0

    def one() -> None:
        nonlocal cid
        cid += 1
        sock.sendall(codec.encode_bytes(m.Produce(acks=acks, timeout_ms=10_000, parts=((topic, 0, len(batch)),),
                                                  payload=(batch,)), cid))
        frame = reader.next_frame()
        while frame is None:
            data = sock.recv(65536)
            if not data:
                raise ConnectionError("the broker closed the connection")
            reader.receive_data(data)
            frame = reader.next_frame()
        resp = codec.decode(frame).message
        if resp.error or resp.parts[0][2]:
            raise RuntimeError(f"produce failed: {resp.message or resp.parts[0][3]}")

    for _ in range(spec["warmup"]):
        one()
    return (lambda deadline: _latencies(one, spec, deadline, len(value) + len(key))), sock.close


def _recv_exact(sock: socket.socket, view: memoryview) -> None:
    pos, end = 0, len(view)
    while pos < end:
        got = sock.recv_into(view[pos:])
        if not got:
            raise ConnectionError("the broker closed the connection")
        pos += got


def fetch_raw(spec: dict):
    host, port = spec["bootstrap"].rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=30)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf = bytearray(spec["fetch_max_bytes"] + (4 << 20))
    prefix = bytearray(4)
    topic, partition, end = spec["topic"], spec.get("partition", 0), spec["end_offset"]
    cid = 0

    def fetch(offset: int) -> tuple[int, int]:
        """One Fetch at ``offset``: (next offset, frame bytes received)."""
        nonlocal buf, cid
        cid += 1
        sock.sendall(codec.encode_bytes(m.Fetch(max_wait_ms=0, min_bytes=1, max_bytes=spec["fetch_max_bytes"],
                                                parts=((topic, partition, offset, spec["part_max_bytes"]),)),
                                        cid))
        _recv_exact(sock, memoryview(prefix))
        length = _U32.unpack(prefix)[0]
        if length > len(buf):
            buf = bytearray(length)
        frame = memoryview(buf)[:length]
        _recv_exact(sock, frame)
        resp = codec.decode(frame).message
        if resp.error or resp.parts[0][2]:
            raise RuntimeError(f"fetch at {offset}: {resp.message or resp.parts[0][3]}")
        data, pos, nxt = resp.payload[0], 0, offset
        while pos + 12 <= len(data):
            base, blen = _BATCH_HEAD.unpack_from(data, pos)
            if pos + 12 + blen > len(data):
                break  # a slice may end inside its last batch
            nxt = base + _LAST_DELTA.unpack_from(data, pos + 23)[0] + 1
            pos += 12 + blen
        if nxt <= offset:
            raise RuntimeError(f"fetch at {offset} made no progress")
        return nxt, length + 4

    def one_pass(deadline: Deadline) -> tuple[int, int]:
        offset = nbytes = fetches = 0
        while offset < end and fetches < spec["max_fetches_per_pass"]:
            offset, got = fetch(offset)
            nbytes += got
            fetches += 1
            deadline.check()
        return nbytes, fetches

    def timed(deadline: Deadline) -> dict:
        one_pass(deadline)  # warm-up pass: not counted
        passes = nbytes = fetches = 0
        start = time.perf_counter()
        while passes < spec["max_passes"]:
            got, count = one_pass(deadline)
            passes, nbytes, fetches = passes + 1, nbytes + got, fetches + count
            if time.perf_counter() - start >= spec["min_seconds"]:
                break
        seconds = time.perf_counter() - start
        return {"passes": passes, "fetches": fetches, "bytes": nbytes, "records": end * passes,
                "seconds_measured": seconds}

    return timed, sock.close


def fetch_consumer(spec: dict):
    topic, partition, end = spec["topic"], spec.get("partition", 0), spec["end_offset"]
    consumer = Consumer(spec["bootstrap"], auto_offset_reset="earliest")

    def timed(deadline: Deadline) -> dict:
        consumer.assign([(topic, partition)])
        consumer.seek(topic, partition, 0)
        got = nbytes = polls = 0
        while got < end and polls < end + 1000:
            records = consumer.poll(timeout=0.5)
            polls += 1
            if records and records[-1].offset >= end:
                records = [r for r in records if r.offset < end]
            got += len(records)
            nbytes += sum(map(len, map(_VALUE, records))) + sum(map(len, map(_KEY, records)))
            deadline.check()
        return {"records": got, "bytes": nbytes, "polls": polls}

    return timed, consumer.close


MODES = {"produce": produce, "consume": consume, "roundtrip": roundtrip, "roundtrip_raw": roundtrip_raw,
         "fetch_raw": fetch_raw, "fetch_consumer": fetch_consumer}


def main() -> int:
    spec = json.loads(sys.argv[1])
    cleanup = None
    try:
        timed, cleanup = MODES[spec["mode"]](spec)
        print("READY", flush=True)
        if sys.stdin.readline().strip() != "go":
            return 1
        profiler = None
        if spec.get("profile"):
            import cProfile
            profiler = cProfile.Profile()
        deadline = Deadline(spec["deadline_s"], spec["mode"])
        cpu0, t0 = cpu_self(), time.perf_counter()
        if profiler:
            profiler.enable()
        out = timed(deadline)
        if profiler:
            profiler.disable()
        seconds, cpu = time.perf_counter() - t0, cpu_self() - cpu0
        if profiler:
            profiler.dump_stats(spec["profile"])
        out.update(seconds=seconds, cpu_s=cpu,
                   maxrss_kib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, pid=os.getpid())
        print(json.dumps(out), flush=True)
        return 0
    except BaseException as exc:  # noqa: BLE001 - reported to the bench, which raises
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)
        return 1
    finally:
        if cleanup is not None:
            try:
                cleanup()
            except Exception:  # noqa: BLE001
                pass


if __name__ == "__main__":
    sys.exit(main())
