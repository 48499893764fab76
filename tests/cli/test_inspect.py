"""`logbroker inspect` (src/logbroker/dump/, cli/inspect.py) over real data dirs.

Data is written by the real Store (tiny segments force rolls), then damaged
on disk where a test needs it; the CLI runs through click's CliRunner for
the fast cases and as a real subprocess for the end-to-end ones.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import lmdb
import pytest
from click.testing import CliRunner

from logbroker.dump import report as insp
from logbroker.dump import reader as inspect_reader
from logbroker.cli.main import main
from logbroker.storage.config import LogConfig, StorageConfig
from logbroker.records import HEADER_SIZE, build_batch, scan_batches
from logbroker.storage.store import Store

T0 = 1_700_000_000_000
LONG = b"x" * 200
LOGBROKER = shutil.which("logbroker", path=os.path.dirname(sys.executable)) or shutil.which("logbroker")


def make_store(path: Path) -> Store:
    return Store.open(str(path), StorageConfig(log=LogConfig(segment_bytes=2048, index_interval_bytes=256),
                                               map_size=64 << 20))


def fill(store: Store, batches: int = 20) -> None:
    store.create_topic("t", 2)
    lg = store.get_log("t", 0)
    for i in range(batches):
        lg.append([build_batch([(f"value-{i}".encode(), b"k%d" % i, [("trace", b"abc")], T0 + i),
                                (b"\xff\xfe", None, [], T0 + i + 1),
                                (LONG, b"", [("n", None)], T0 + i + 2)])])
    store.get_log("t", 1).append([build_batch([b"only"])])


@pytest.fixture
def data(tmp_path) -> Path:
    path = tmp_path / "data"
    store = make_store(path)
    fill(store)
    store.close()
    return path


def segments(data: Path, part: str = "t-0") -> list[Path]:
    return sorted((data / part).glob("*.log"))


def batches_of(seg: Path) -> list[tuple[int, int, int]]:
    """(position, base offset, size) of each batch, straight from the codec."""
    return [(pos, h.base_offset, h.size) for pos, h in scan_batches(seg.read_bytes(), verify=False)]


def run(*args: str):
    return CliRunner().invoke(main, ["inspect", *map(str, args)])


def run_process(*args: str, check_rc: "int | None" = None) -> subprocess.CompletedProcess:
    assert LOGBROKER, "the logbroker console script is not installed next to this interpreter"
    proc = subprocess.run([LOGBROKER, "inspect", *map(str, args)], capture_output=True, text=True,
                          timeout=120)
    if check_rc is not None:
        assert proc.returncode == check_rc, (proc.stdout[-2000:], proc.stderr)
    return proc


def batch_lines(stdout: str) -> list[str]:
    return [ln for ln in stdout.splitlines() if " position=" in ln and ln.endswith(("crc=ok", "crc=BAD"))]


def problems(stdout: str) -> list[str]:
    return [ln for ln in stdout.splitlines() if ln.startswith("PROBLEM ")]


def json_lines(stdout: str) -> list[dict]:
    return [json.loads(ln) for ln in stdout.splitlines()]


def flip(path: Path, pos: int) -> None:
    raw = bytearray(path.read_bytes())
    raw[pos] ^= 0xFF
    path.write_bytes(bytes(raw))


# -- inputs -------------------------------------------------------------------------------
def test_segment_file_lists_every_batch(data):
    seg = segments(data)[1]
    result = run(seg)
    assert result.exit_code == 0, result.output
    lines = batch_lines(result.stdout)
    expected = batches_of(seg)
    assert len(lines) == len(expected) > 1
    for line, (pos, base, size) in zip(lines, expected):
        assert line.startswith(f"{seg} position={pos} base_offset={base} ")
        assert f" size={size} " in line and " count=3 " in line and line.endswith("crc=ok")
    assert "summary" in result.stdout and seg.name in result.stdout.split("summary")[1]


def test_partition_dir_reads_segments_in_offset_order(data):
    result = run(data / "t-0", "--verify")
    assert result.exit_code == 0, result.output
    segs = segments(data)
    assert len(segs) >= 3
    lines = batch_lines(result.stdout)
    assert len(lines) == 20
    bases = [int(ln.split("base_offset=")[1].split()[0]) for ln in lines]
    assert bases == [3 * i for i in range(20)]
    table = result.stdout.split("summary")[1]
    assert all(s.name in table for s in segs) and "total" in table


def test_data_dir_end_to_end_subprocess(data):
    proc = run_process(data, "--verify", check_rc=0)
    assert proc.stderr == ""
    assert len(batch_lines(proc.stdout)) == 21
    assert f"{data / 't-1' / '00000000000000000000.log'} position=0 base_offset=0 " in proc.stdout
    assert not problems(proc.stdout)


def test_several_paths(data):
    result = run(segments(data)[0], data / "t-1", "--json")
    assert result.exit_code == 0, result.output
    files = {o["file"] for o in json_lines(result.stdout) if o["type"] == "summary"}
    assert files == {str(segments(data)[0]), str(segments(data, "t-1")[0])}


# -- records and JSON ---------------------------------------------------------------------
def test_records_previews(data):
    result = run(segments(data)[0], "--records")
    assert result.exit_code == 0, result.output
    recs = [ln for ln in result.stdout.splitlines() if ln.startswith("  record ")]
    assert len(recs) == 3 * len(batches_of(segments(data)[0]))
    assert recs[0] == (f"  record offset=0 timestamp={T0} key=b'k0' value=b'value-0' "
                       "headers=[('trace', b'abc')]")
    assert recs[1] == f"  record offset=1 timestamp={T0 + 1} key=null value=b'\\xff\\xfe' headers=[]"
    long_value = recs[2].split("value=")[1].split(" headers=")[0]
    assert long_value.startswith("b'xxx") and long_value.endswith("...") and len(long_value) <= 60
    assert recs[2].endswith("headers=[('n', null)]")
    cut = run(segments(data)[0], "--records", "--max-value-bytes", "4")
    assert "value=b'xxxx'...(+196 bytes)" in cut.stdout and "value=b'valu'...(+3 bytes)" in cut.stdout


def test_json_every_line_parses(data):
    result = run(data, "--json", "--records", "--verify")
    assert result.exit_code == 0, result.output
    objs = json_lines(result.stdout)
    assert {o["type"] for o in objs} == {"batch", "record", "summary"}
    batches = [o for o in objs if o["type"] == "batch"]
    records = [o for o in objs if o["type"] == "record"]
    summaries = [o for o in objs if o["type"] == "summary"]
    assert len(batches) == sum(s["batches"] for s in summaries) == 21
    assert len(records) == sum(s["records"] for s in summaries) == 61
    assert all(b["crc_ok"] for b in batches) and all(s["problems"] == 0 for s in summaries)
    first, binary, long_rec = records[:3]
    assert (first["offset"], first["key"], first["value"], first["value_base64"]) == (0, "k0", "value-0", False)
    assert first["headers"] == [{"key": "trace", "value": "abc", "value_base64": False, "value_size": 3}]
    assert binary["key"] is None and binary["value_base64"] is True
    assert base64.b64decode(binary["value"]) == b"\xff\xfe"
    assert long_rec["value"] == LONG.decode() and long_rec["value_size"] == 200
    b0 = batches[0]
    assert (b0["base_offset"], b0["last_offset"], b0["record_count"], b0["position"]) == (0, 2, 3, 0)
    assert b0["first_timestamp"] == T0 and b0["max_timestamp"] == T0 + 2 and b0["leader_epoch"] == 0
    assert "┃" not in result.stdout


def test_json_max_value_bytes(data):
    result = run(segments(data)[0], "--json", "--records", "--max-value-bytes", "3")
    rec = [o for o in json_lines(result.stdout) if o["type"] == "record"][2]
    assert rec["value"] == "xxx" and rec["value_size"] == 200


def test_forced_progress_never_touches_stdout(data):
    result = run(data, "--json", "--progress")
    assert result.exit_code == 0, result.output
    assert len([o for o in json_lines(result.stdout) if o["type"] == "batch"]) == 21


# -- verify -------------------------------------------------------------------------------
def test_flipped_payload_byte_is_a_crc_problem(data):
    seg = segments(data)[1]
    pos, base, _ = batches_of(seg)[1]
    flip(seg, pos + HEADER_SIZE + 5)
    proc = run_process(data, "--verify", check_rc=1)
    assert problems(proc.stdout) == [f"PROBLEM {seg} byte {pos} offset {base}: CRC mismatch: "
                                     + problems(proc.stdout)[0].split("CRC mismatch: ")[1]]
    assert f"{seg} position={pos} base_offset={base} " in proc.stdout
    assert any(ln.endswith("crc=BAD") for ln in batch_lines(proc.stdout))
    # the scan goes on past a bad CRC: every batch is still listed
    assert len(batch_lines(proc.stdout)) == 21
    assert run(seg).exit_code == 1  # a bad CRC fails even without --verify


def test_truncated_mid_batch_is_an_incomplete_tail(data):
    seg = segments(data)[-1]
    pos, base, size = batches_of(seg)[-1]
    os.truncate(seg, pos + size // 2)
    result = run(data / "t-0", "--verify")
    assert result.exit_code == 1
    tail, *rest = problems(result.stdout)
    assert tail == (f"PROBLEM {seg} byte {pos} offset {base}: incomplete batch at the end: "
                    f"{size // 2} of {size} bytes")
    # index entries pointing into the torn tail are reported too
    assert all(f"offset index entry points at byte {pos}, at or past the end of the valid data "
               f"(byte {pos})" in p for p in rest)
    objs = json_lines(run(seg, "--json").stdout)
    assert [o for o in objs if o["type"] == "problem"] == [
        {"type": "problem", "file": str(seg), "position": pos, "offset": base,
         "reason": f"incomplete batch at the end: {size // 2} of {size} bytes"}]


def test_tail_shorter_than_a_header(data):
    seg = segments(data)[0]
    end = sum(size for _, _, size in batches_of(seg))
    with open(seg, "ab") as fh:
        fh.write(b"\0" * 10)
    result = run(seg)
    assert result.exit_code == 1
    assert problems(result.stdout)[0].startswith(f"PROBLEM {seg} byte {end} offset ")
    assert "incomplete batch at the end: 10 bytes" in result.stdout


def test_invalid_header_ends_the_file_scan(data):
    seg = segments(data)[0]
    pos, base, _ = batches_of(seg)[1]
    flip(seg, pos + 16)  # magic
    result = run(seg)
    assert result.exit_code == 1
    assert problems(result.stdout) == [f"PROBLEM {seg} byte {pos} offset {base}: invalid batch "
                                       "header: unknown magic 254"]
    assert len(batch_lines(result.stdout)) == 1


def test_offset_gap_needs_verify(data):
    seg, nxt = segments(data)[1:3]
    pos, base, size = batches_of(seg)[-1]
    raw = bytearray(seg.read_bytes())
    struct.pack_into(">Q", raw, pos, base + 7)  # base offset is not covered by the CRC
    seg.write_bytes(bytes(raw))
    assert run(data / "t-0").exit_code == 0
    result = run(data / "t-0", "--verify")
    assert result.exit_code == 1
    found = problems(result.stdout)
    assert (f"PROBLEM {seg} byte {pos} offset {base + 7}: batch base offset {base + 7}, "
            f"expected {base} (gap of 7)") in found
    # the next segment no longer continues this one
    assert (f"PROBLEM {nxt} byte 0 offset {base + 3}: segment starts at offset {base + 3} but the "
            f"previous segment ends before offset {base + 10} (overlap of 7)") in found
    # any index entry for that batch now names the wrong batch
    assert all("offset index entry" in p for p in found
               if "gap of 7" not in p and "overlap of 7" not in p)


def test_missing_segment_is_a_gap(data):
    segs = segments(data)
    first_of_next = batches_of(segs[2])[0][1]
    segs[1].unlink()
    result = run(data / "t-0", "--verify")
    assert result.exit_code == 1
    found = problems(result.stdout)
    assert f"PROBLEM {segs[2]} byte 0 offset {first_of_next}: segment starts at offset" in found[0]
    assert any("points into a segment file that does not exist" in p for p in found)


def edit_index(data: Path, put: "dict | None" = None, delete: tuple = ()) -> None:
    """Write offset-index rows of t-0 (offset -> (segment, position)) behind the store's back."""
    env = lmdb.open(str(data / "meta.lmdb"), subdir=False, max_dbs=16, map_size=64 << 20)
    try:
        oidx, parts = env.open_db(b"oidx"), env.open_db(b"parts")  # not inside a write txn
        with env.begin(write=True) as txn:
            pid = struct.unpack(">I", txn.get(b"t-0", db=parts))[0]
            for offset, entry in (put or {}).items():
                txn.put(struct.pack(">IQ", pid, offset), struct.pack(">QI", *entry), db=oidx)
            for offset in delete:
                assert txn.delete(struct.pack(">IQ", pid, offset), db=oidx)
    finally:
        env.close()


def test_corrupt_index_entry(data):
    seg = segments(data)[1]
    (_, first, _), (pos, base, _) = batches_of(seg)[:2]
    edit_index(data, put={base: (int(seg.stem), pos + 3)}, delete=(first,))
    proc = run_process(data, "--verify", check_rc=1)
    assert problems(proc.stdout) == [
        f"PROBLEM {seg} byte 0 offset {first}: offset index has no entry for the segment's first batch",
        f"PROBLEM {seg} byte {pos + 3} offset {base}: offset index entry points at byte {pos + 3} "
        "where no batch starts"]
    assert run(data).exit_code == 0  # the index is only read with --verify


def test_index_entry_naming_the_wrong_batch(data):
    seg = segments(data)[0]
    (_, b0, _), (pos1, b1, _) = batches_of(seg)[:2]
    edit_index(data, put={b0 + 1: (0, pos1)})
    result = run(seg, "--verify", "--json")
    assert result.exit_code == 1
    probs = [o for o in json_lines(result.stdout) if o["type"] == "problem"]
    assert probs == [{"type": "problem", "file": str(seg), "position": pos1, "offset": b0 + 1,
                      "reason": f"offset index entry for offset {b0 + 1} points at the batch with "
                                f"base offset {b1}"}]


def test_verify_without_meta_lmdb(data, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(data / "t-0", copy / "t-0")
    result = run(copy, "--verify")
    assert result.exit_code == 0, result.output
    assert len(batch_lines(result.stdout)) == 20


def test_without_lmdb_lock_file_the_index_is_skipped_not_created(data):
    (data / "meta.lmdb-lock").unlink()
    result = run(data, "--verify")
    assert result.exit_code == 0, result.output
    assert result.stderr.startswith("note: ") and "offset index not checked" in result.stderr
    assert not (data / "meta.lmdb-lock").exists()


def test_unreadable_meta_lmdb_is_a_problem_under_verify(data):
    (data / "meta.lmdb").write_bytes(b"not lmdb" * 1000)
    result = run(data, "--verify")
    assert result.exit_code == 1
    assert problems(result.stdout)[0].startswith(f"PROBLEM {data / 'meta.lmdb'} byte 0 offset ?: "
                                                 "cannot read the offset index")
    assert run(data).exit_code == 0  # without --verify the index is not read


def test_inspect_writes_nothing(data):
    def snapshot():
        return {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in data.rglob("*")
                if p.is_file() and p.name != "meta.lmdb-lock"}

    before = snapshot()
    assert run(data, "--verify", "--records").exit_code == 0
    assert snapshot() == before


def test_while_the_store_is_open(tmp_path):
    store = make_store(tmp_path / "live")
    try:
        fill(store)
        for lg in store.logs():
            lg.checkpoint()
        proc = run_process(tmp_path / "live", "--verify", "--json", check_rc=0)
        assert sum(1 for o in json_lines(proc.stdout) if o["type"] == "batch") == 21
        store.get_log("t", 0).append([build_batch([b"after"])])
    finally:
        store.close()


# -- chunked reading ----------------------------------------------------------------------
def test_small_chunks_and_streamed_crc_give_the_same_answer(data, monkeypatch):
    def events(kinds=(insp.BatchInfo, insp.Problem, insp.FileSummary)):
        return [e for e in insp.inspect(insp.plan([str(data)]), verify=True) if isinstance(e, kinds)]

    normal = events()
    assert not events(insp.Notice)
    monkeypatch.setattr(inspect_reader, "CHUNK", 100)
    assert events() == normal
    monkeypatch.setattr(inspect_reader, "MAX_DECODE", 64)  # every batch: CRC read piecewise, not decoded
    assert events() == normal
    assert len(events(insp.Notice)) == 21 and "not decoded" in events(insp.Notice)[0].message
    seg = segments(data)[0]
    pos, base, _ = batches_of(seg)[0]
    flip(seg, pos + HEADER_SIZE + 150)
    bad = [e for e in events() if isinstance(e, insp.Problem)]
    assert [(e.file, e.position, e.offset) for e in bad] == [(str(seg), pos, base)]


# -- errors -------------------------------------------------------------------------------
def test_nonexistent_path_is_one_line_error(tmp_path):
    proc = run_process(tmp_path / "nope")
    assert proc.returncode != 0
    assert proc.stdout == ""
    assert "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1 and "nope" in proc.stderr and "no such file" in proc.stderr


@pytest.mark.parametrize("name", ["notes.txt", "123.log"])
def test_not_a_logbroker_file(tmp_path, name):
    (tmp_path / name).write_bytes(b"hello")
    result = run(tmp_path / name)
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.startswith("error: ") and "not a logbroker segment file" in result.stderr
    assert result.stderr.count("\n") == 1


def test_directory_that_is_not_logbroker(tmp_path):
    (tmp_path / "x-1").mkdir()  # named like a partition, but no segments and no data dir
    for path in (tmp_path, tmp_path / "x-1"):
        result = run(path)
        assert result.exit_code == 1
        assert "not a logbroker data dir, partition dir or segment file" in result.stderr


def test_verify_of_a_live_dir_written_seconds_ago_has_no_false_alarms(tmp_path):
    """Appends after the last checkpoint: their index entries are not in LMDB
    yet and the tail may be mid-write; neither is damage."""
    store = make_store(tmp_path / "live")
    try:
        store.create_topic("t", 1)
        lg = store.get_log("t", 0)
        for i in range(40):  # several rolls, none of it checkpointed past the open
            lg.append([build_batch([(b"v%d" % i + LONG, None, [], T0 + i)])])
        assert len(lg.segments) > 2
        proc = run_process(tmp_path / "live", "--verify", "--json", check_rc=0)
        assert not [o for o in json_lines(proc.stdout) if o["type"] == "problem"]
        with open(lg.active.path, "ab") as fh:  # half a batch: a write in progress
            fh.write(build_batch([b"in flight" * 20])[:50])
        proc = run_process(tmp_path / "live", "--verify", "--json", check_rc=0)
        assert not [o for o in json_lines(proc.stdout) if o["type"] == "problem"]
        assert "write in progress" in proc.stderr, proc.stderr  # a note, not a problem
    finally:
        store.close()
