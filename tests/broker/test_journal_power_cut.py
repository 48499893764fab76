"""The journal under a real broker (storage/journal.py, decision 120): a
producer's acks=all records over many partitions are acknowledged through
the journal, the broker is SIGKILLed, and a power cut is simulated by
cutting every segment file back to the recovery point its checkpoint
stored (what the files had certainly synced): the restarted broker
replays the journal and every acknowledged record is back, at its offset."""

from __future__ import annotations

import os

from logbroker import Admin, Consumer, Producer
from logbroker.storage import checkpoints as ck
from logbroker.storage.metastore import FILENAME, MetaStore
from logbroker.storage.segment import parse_segment_name, segment_name
from tests.support.fixtures import BrokerProcess, wait_until

PARTITIONS = 24


def cut_to_stored_recovery_points(data_dir: str, topic: str) -> int:
    """Cut each partition's files back to its stored recovery point (a dead
    broker's data dir); the bytes cut."""
    meta = MetaStore(os.path.join(data_dir, FILENAME), map_size=64 << 20)
    cut = 0
    try:
        for p in range(PARTITIONS):
            directory = os.path.join(data_dir, f"{topic}-{p}")
            pid = meta.partition_id(f"{topic}-{p}", create=False)
            stored = ck.load_checkpoint(meta, pid)
            rp_seg, rp_pos = (stored.rp_segment, stored.rp_position) if stored else (0, 0)
            for name in os.listdir(directory):
                base = parse_segment_name(name)
                path = os.path.join(directory, name)
                if base is not None and base > rp_seg:
                    cut += os.path.getsize(path)
                    os.unlink(path)
            path = os.path.join(directory, segment_name(rp_seg))
            cut += os.path.getsize(path) - rp_pos
            os.truncate(path, rp_pos)
    finally:
        meta.close()
    return cut


def test_acknowledged_records_survive_a_power_cut_through_the_journal(tmp_path):
    data = tmp_path / "data"
    config = {"storage": {"journal_checkpoint_ms": 600_000}}  # no checkpoint meanwhile
    broker = BrokerProcess(data, config=config).start()
    try:
        with Admin(bootstrap=broker.bootstrap) as admin:
            admin.create_topic("pc", partitions=PARTITIONS)
        with Producer(bootstrap=broker.bootstrap, acks="all", linger_ms=5) as producer:
            handles = [(p, i, producer.send("pc", b"v-%d-%d" % (p, i), partition=p))
                       for i in range(40) for p in range(PARTITIONS)]
            producer.flush()
            acked = {(p, h.result(timeout=30).offset): b"v-%d-%d" % (p, i) for p, i, h in handles}
        journal = os.path.join(data, "journal")
        assert os.listdir(journal), "the acknowledgements came through the journal"
    finally:
        broker.kill()
    assert cut_to_stored_recovery_points(str(data), "pc") > 0  # the cut lost file bytes
    broker = BrokerProcess(data, config=config).start()
    try:
        got = {}
        with Consumer(bootstrap=broker.bootstrap) as consumer:
            consumer.assign([("pc", p) for p in range(PARTITIONS)])
            consumer.seek_to_beginning()

            def all_read() -> bool:
                for rec in consumer.poll(timeout=0.2):
                    got[(rec.partition, rec.offset)] = rec.value
                return len(got) >= len(acked)

            wait_until(all_read, timeout=30, what="every acknowledged record")
        assert got == acked
        assert os.listdir(journal) == []  # replayed, made durable, retired
    finally:
        broker.stop()
