"""`logbroker inspect` of transactions: each batch's transactional flag and
producer epoch, markers (commit / abort, coordinator epoch), and per
partition the LSO and open transactions (table and --json)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from logbroker.cli.main import main
from logbroker.records import build_batch
from logbroker.storage.config import LogConfig, StorageConfig
from logbroker.storage.store import Store


def test_inspect_shows_markers_flags_and_open_transactions(tmp_path):
    path = tmp_path / "data"
    store = Store.open(str(path), StorageConfig(log=LogConfig(segment_bytes=2048), map_size=64 << 20))
    store.create_topic("t")
    lg = store.get_log("t", 0)
    lg.append([build_batch([b"plain"])])                                          # 0
    lg.append([build_batch([b"a", b"b"], producer_id=7, producer_epoch=2, base_sequence=0,
                           transactional=True)])                                  # 1-2
    lg.append_marker(7, 2, False, 5, 0)                                           # 3
    lg.append([build_batch([b"c"], producer_id=8, producer_epoch=1, base_sequence=0,
                           transactional=True)])                                  # 4 open
    store.close()
    text = CliRunner().invoke(main, ["inspect", str(path)])
    assert text.exit_code == 0, text.output
    lines = [ln for ln in text.output.splitlines() if " position=" in ln]
    assert lines[0].endswith("crc=ok") and "producer_epoch=-1" in lines[0]
    assert "producer_id=7 producer_epoch=2" in lines[1] and lines[1].endswith(" transactional")
    assert lines[2].endswith("control=abort coordinator_epoch=5") and "magic=2" in lines[2]
    table = text.output.split("transactions")[-1]
    assert "t-0" in table and "8:1@4" in table
    out = CliRunner().invoke(main, ["inspect", str(path), "--json", "--verify"])
    assert out.exit_code == 0, out.output
    objs = [json.loads(ln) for ln in out.output.splitlines()]
    batches = [o for o in objs if o["type"] == "batch"]
    assert [b["transactional"] for b in batches] == [False, True, True, True]
    assert batches[2]["control"] == {"type": "abort", "coordinator_epoch": 5}
    assert batches[0]["control"] is None
    [txns] = [o for o in objs if o["type"] == "transactions"]
    assert txns == {"type": "transactions", "partition": "t-0", "last_stable_offset": 4,
                    "high_watermark": 5, "aborted": 1, "markers": 1,
                    "open": [{"producer_id": 8, "producer_epoch": 1, "first_offset": 4}]}
