"""logbroker's benchmarks, each a package run from the checkout root as
``python -m bench.<name>``; bench/README.md lists every entry point, its
command and what it measures. ``bench.common`` holds what they share (the
command line and output, statistics, the environment, the processes).
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the checkout
