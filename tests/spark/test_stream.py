"""The streaming source in real Spark: a query in the shared session, and a
driver process killed mid-stream whose query resumes on its checkpoint (in
the shared session: another driver, as a restarted one is)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys

import pytest

pytest.importorskip("pyspark")

from tests.support.fixtures import fill, open_store, wait_until  # noqa: E402
from logbroker.records.builder import build_batch  # noqa: E402

pytestmark = [pytest.mark.spark,
              pytest.mark.skipif(not (shutil.which("java") or os.environ.get("JAVA_HOME")),
                                 reason="Spark needs Java 17+ (no java on PATH, no JAVA_HOME)")]
DRIVER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "support",
                      "spark_stream_driver.py")


def _topic(data) -> list[tuple]:
    """Every (partition, offset, value) of topic "orders", read by the batch source's reader."""
    from logbroker.spark.plan import Planner, parse_options
    from logbroker.spark.scan import read_split

    planner = Planner(parse_options({"path": str(data), "subscribe": "orders"}))
    try:
        splits = planner.plan()
    finally:
        planner.close()
    out = []
    for split in splits:
        for rb in read_split(split):
            d = rb.to_pydict()
            out += zip(d["partition"], d["offset"], d["value"])
    return sorted(out)


def test_available_now_reads_everything_in_capped_batches(spark, tmp_path):
    fill(tmp_path / "data", batches=5, per=10).close()
    df = (spark.readStream.format("logbroker").option("path", str(tmp_path / "data"))
          .option("subscribe", "orders").option("startingOffsets", "earliest")
          .option("maxOffsetsPerTrigger", "30").load())
    query = (df.writeStream.format("memory").queryName("stream_all").trigger(availableNow=True)
             .option("checkpointLocation", str(tmp_path / "ck")).start())
    try:
        assert query.awaitTermination(120), "the AvailableNow query did not end within 120 s"
        rows = spark.sql("select partition, offset, value from stream_all").collect()
        inputs = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    finally:
        query.stop()
    assert sorted((r.partition, r.offset, bytes(r.value)) for r in rows) == _topic(tmp_path / "data")
    assert len(rows) == 100 and max(inputs) <= 30 and len(inputs) >= 4


def _run(args: list[str], log) -> subprocess.Popen:
    """The driver in a new process group, its output into ``log`` (a path)."""
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    with open(log, "ab") as fh:
        return subprocess.Popen([sys.executable, DRIVER, *args], env=env, start_new_session=True,
                                stdout=fh, stderr=fh, stdin=subprocess.DEVNULL)


def _tail(log) -> str:
    with open(log, errors="replace") as fh:
        return fh.read()[-3000:]


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the driver and its JVM (the process group started for it)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(30)


@pytest.mark.slow  # a fault run (kill -9 of a spark-submit driver, ~25 s): make test-slow
def test_killed_driver_resumes_on_its_checkpoint_each_record_once(spark, tmp_path):
    data, ck, out = tmp_path / "data", tmp_path / "ck", tmp_path / "out"
    fill(data, batches=10, per=10).close()  # 200 records: 8 triggers of 25
    commits = ck / "commits"
    log = tmp_path / "driver.log"
    driver = _run([str(data), str(ck), str(out)], log)
    try:
        wait_until(lambda: commits.is_dir() and len([n for n in os.listdir(commits)
                                                      if n.isdigit()]) >= 2 or driver.poll() is not None,
                   timeout=180, what="two committed micro-batches")
        assert driver.poll() is None, _tail(log)
    finally:
        _kill_group(driver)  # kill -9 mid-stream: a batch may be half written
    done_first = len([n for n in os.listdir(commits) if n.isdigit()])
    assert 2 <= done_first < 8  # killed mid-stream, not after the end

    s = open_store(data, segment_bytes=4096, index_interval_bytes=512)  # more while it was down
    lg = s.get_log("orders", 0)
    lg.append([build_batch([(b"late-%d" % i, b"k", (), 1) for i in range(30)])])
    lg.set_high_watermark(lg.log_end_offset)
    s.close()

    # The same query on the same checkpoint in another driver: this session's (a second
    # driver process cost ~20 s of JVM start for the same path). A batch the kill
    # interrupted is run again as the offset log recorded it, the rest is read in one
    # batch (capped batches are the test above's; 25 offsets a batch here cost ~7 s more).
    from tests.support.spark_stream_driver import writer

    again = (writer(spark, str(data), str(ck), str(out), per_trigger=1000)
             .trigger(availableNow=True).start())
    try:
        assert again.awaitTermination(240), "the resumed AvailableNow query did not end within 240 s"
        assert again.exception() is None, again.exception()
    finally:
        again.stop()
    got = [(r.partition, r.offset, bytes(r.value)) for r in spark.read.parquet(str(out)).collect()]
    assert sorted(got) == _topic(data)  # every record, each once
    assert len(got) == 230
