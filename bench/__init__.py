"""logbroker's benchmarks, each a package run from the checkout root:

    python -m bench.storage   # the storage engine (issue 2)
    python -m bench.broker    # a single-node broker with the Python clients (issue 3)
    python -m bench.spark     # the Spark data source beside Parquet and JSON (issue 4)
    python -m bench.peers     # beside Redis Streams, NATS JetStream, RabbitMQ Streams (issue 5)

Shared by all: ``bench.harness`` (command line, work dir, output),
``bench.stats`` (bounded loops, medians, percentiles) and
``bench.environment`` (what a run ran on).
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the checkout
