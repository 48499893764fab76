"""The README's examples run as written against a fresh broker: the tour's
shell lines (all but `serve`; `--follow` dropped) and the Python example,
which must print the record it just produced."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.fixtures import LOGBROKER

ROOT = Path(__file__).resolve().parents[2]


def _block(after: str, lang: str) -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index(f"```{lang}\n", text.index(after)) + len(lang) + 4
    return text[start:text.index("```", start)]


def _tour_lines() -> list[str]:
    lines = []
    for line in _block("## A tour", "sh").splitlines():
        cmd = re.sub(r"\s+#.*$", "", line).strip()
        if cmd.startswith(("logbroker", "printf")) and " serve " not in cmd:
            lines.append(cmd.replace(" --follow", ""))  # to the end, then commit
    return lines


def test_the_tour_runs_as_written(broker, tmp_path):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    os.symlink(broker.data_dir, cwd / "data")
    env = dict(os.environ, LOGBROKER_BOOTSTRAP=broker.bootstrap,
               PATH=os.path.dirname(LOGBROKER) + os.pathsep + os.environ["PATH"])
    lines = _tour_lines()
    assert len(lines) >= 10 and any("@-1h" in line for line in lines)
    for cmd in lines:
        result = subprocess.run(["bash", "-c", f"set -o pipefail; {cmd}"], cwd=cwd, env=env,
                                capture_output=True, timeout=60)
        err = result.stderr.decode()
        assert "Traceback" not in err, (cmd, err)
        if "describe nobody" in cmd:
            assert result.returncode == 1 and err.startswith("error: GROUP_ID_NOT_FOUND: "), err
            continue
        assert result.returncode == 0, (cmd, err)
        if "@-1h" in cmd:  # the records produced a moment ago
            assert [line for line in result.stdout.splitlines() if b'"hello"' in line], cmd


def test_the_python_example_prints_what_it_produced(broker):
    code = _block("From Python", "python").replace("127.0.0.1:9555", broker.bootstrap)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60)
    assert result.returncode == 0, result.stderr.decode()
    offset, record = result.stdout.decode().splitlines()
    assert offset == "0" and record == "0 0 b'k1' b'hello'"


@pytest.mark.parametrize("needle", ["`dev`, `spark` and `bench`", ".[dev,spark,bench]"])
def test_the_makefile_extras_are_described_as_they_are(needle):
    assert "-e '.[dev,spark,bench]'" in (ROOT / "Makefile").read_text(encoding="utf-8")
    assert needle in (ROOT / "README.md").read_text(encoding="utf-8")
