"""The broker's open-file budget: it raises its soft RLIMIT_NOFILE and sizes
the segment descriptor cache from it unless the config sets
``[storage] max_open_files``."""

from __future__ import annotations

import resource
import subprocess
import sys

from logbroker.broker.config import BrokerConfig
from logbroker.broker.fdlimit import CEILING, FLOOR, RESERVE, segment_file_budget


def test_the_budget_is_what_connections_and_the_reserve_leave_within_bounds():
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = max(FLOOR, min(CEILING, soft - 100 - RESERVE))
    assert segment_file_budget(100) == want
    assert segment_file_budget(10**9) == FLOOR


def test_the_config_takes_the_budget_unless_it_sets_max_open_files(tmp_path):
    assert BrokerConfig.load().storage.max_open_files == segment_file_budget(1024)
    path = tmp_path / "b.toml"
    path.write_text("max_connections = 10\n")
    assert BrokerConfig.load(str(path)).storage.max_open_files == segment_file_budget(10)
    path.write_text("[storage]\nmax_open_files = 64\n")
    assert BrokerConfig.load(str(path)).storage.max_open_files == 64


def test_a_low_soft_limit_is_raised_to_the_hard_one():
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    code = ("import resource; from logbroker.broker.fdlimit import raise_open_file_limit as r; "
            "n = r(); print(n, resource.getrlimit(resource.RLIMIT_NOFILE)[0])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard)))
    assert out.returncode == 0, out.stderr
    got, now = map(int, out.stdout.split())
    expect = min(hard, 1 << 20) if hard != resource.RLIM_INFINITY else 1 << 20
    assert got == now == expect > 256
