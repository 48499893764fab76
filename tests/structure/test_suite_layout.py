"""The suite's own layout: every file with Spark tests is in the one unit of
work conftest's scheduler gives a single worker (one SparkSession a run)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import SPARK_FILES

TESTS = Path(__file__).resolve().parents[1]
MARKED = re.compile(r"^(@pytest\.mark\.spark\b|pytestmark = .*pytest\.mark\.spark\b)", re.M)


def test_every_file_with_spark_tests_runs_on_the_spark_worker():
    found = {p.relative_to(TESTS.parent).as_posix() for p in TESTS.rglob("test_*.py")
             if MARKED.search(p.read_text(encoding="utf-8"))}
    assert {f for f in found if not f.startswith(("tests/spark/", "tests/bench/"))} \
        == set(SPARK_FILES)
