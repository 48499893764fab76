"""Render the sample charts of tools/README.md into tools/img/ (PNG, dpi 80).

Writes three made-up data dirs into a temporary directory (timestamps set
by the producer: two topics of 20,000 records within one second; three
topics over 10 minutes; 15 topics over 3 days), runs topic_stats.py and
top_keys.py on them in one local SparkSession, and keeps (64 colours):

    records_1s.png, records_10min.png, records_3d.png   records per bucket
    bytes_10min.png                                     bytes per bucket
    top_keys_10min.png                                  top keys per topic

    .venv/bin/python tools/chart_samples.py [--img-dir tools/img]
"""

from __future__ import annotations

import argparse
import math
import os
import random
import sys
import tempfile

from logbroker.records import build_batch
from logbroker.spark.charts import save
from logbroker.spark.jobs import session
from logbroker.storage.config import StorageConfig
from logbroker.storage.store import Store

import top_keys  # tools/, this script's directory
import topic_stats

T0 = 1_767_225_600_000 + 9 * 3600_000  # 2026-01-01 09:00 UTC, in ms
HERE = os.path.dirname(os.path.abspath(__file__))


def write(path: str, records: dict[str, list[tuple[int, bytes, int]]]) -> None:
    """Per topic (one partition): records of (timestamp ms, key, value size)."""
    store = Store.open(path, StorageConfig())
    for topic, recs in records.items():
        store.create_topic(topic, 1)
        log = store.get_log(topic, 0)
        for i in range(0, len(recs), 1000):
            log.append([build_batch([(b"x" * size, key, (), ts) for ts, key, size in recs[i:i + 1000]])])
        log.set_high_watermark(log.log_end_offset)
    store.close()


def one_second(rng) -> dict:
    """The issue's case: two topics of 20,000 records produced within one second."""
    return {t: [(T0 + i * 950 // 20_000, b"user-%d" % rng.randrange(50), 100) for i in range(20_000)]
            for t in ("orders", "clicks")}


def ten_minutes(rng) -> dict:
    """Three topics over 10 minutes: one ramping up, a burst, and one that stops."""
    shapes = {"orders": lambda s: 5 + s // 25, "clicks": lambda s: 80 if 200 <= s < 260 else 10,
              "payments": lambda s: 8 if s < 420 else 0}
    out = {}
    for topic, rate in shapes.items():
        out[topic] = [(T0 + s * 1000 + j * 1000 // max(rate(s), 1), _key(rng), rng.randrange(50, 400))
                      for s in range(600) for j in range(rate(s))]
    return out


def three_days(rng) -> dict:
    """15 topics over 3 days, a daily cycle each, sizes 1x to 15x."""
    out = {}
    for t in range(15):
        out[f"topic-{t:02d}"] = [
            (T0 + m * 600_000 + j * 600_000 // n, _key(rng), 200)
            for m in range(432)
            for n in [round((t + 1) * 2 * (1.1 + math.sin(2 * math.pi * m / 144)))]
            for j in range(n)]
    return out


def _key(rng) -> bytes:
    return b"user-%d" % min(int(rng.paretovariate(1.2)), 200)


def _shrink(path: str) -> None:
    """Re-save the PNG at ``path`` with a 64-colour palette (a third of the bytes)."""
    from PIL import Image

    with Image.open(path) as img:
        small = img.convert("RGB").quantize(colors=64)
    small.save(path, optimize=True)


def render(spark, tmp: str, name: str, records: dict, img_dir: str) -> list[str]:
    """Write ``records`` as data dir ``name``, run the jobs, keep their charts."""
    job = argparse.Namespace(data_dir=os.path.join(tmp, name), out=os.path.join(tmp, f"out-{name}"),
                             topic=None, master=None, n=8)
    write(job.data_dir, records)
    figures = topic_stats.run(spark, job, sorted(records))[1]
    keep = {f"records_{name}.png": figures["records_per_bucket.png"]}
    if name == "10min":
        keep[f"bytes_{name}.png"] = figures["bytes_per_bucket.png"]
        keep[f"top_keys_{name}.png"] = top_keys.run(spark, job, sorted(records))[1]["top_keys.png"]
    save(keep, img_dir, dpi=80)
    for file in keep:
        _shrink(os.path.join(img_dir, file))
    return [os.path.join(img_dir, file) for file in keep]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--img-dir", default=os.path.join(HERE, "img"))
    args = p.parse_args(argv)
    os.makedirs(args.img_dir, exist_ok=True)
    rng = random.Random(16)
    with tempfile.TemporaryDirectory() as tmp:
        spark = session(argparse.Namespace(master="local[2]"), "logbroker-chart-samples")
        try:
            for name, make in (("1s", one_second), ("10min", ten_minutes), ("3d", three_days)):
                written = render(spark, tmp, name, make(rng), args.img_dir)
                print(f"wrote {', '.join(written)}", file=sys.stderr)
        finally:
            spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
