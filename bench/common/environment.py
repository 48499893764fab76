"""Environment record of a benchmark run: date, command, machine, disk,
software versions and the code measured (git commit, hash of ``src/``)."""

from __future__ import annotations

import datetime
import hashlib
import os
import platform
import subprocess
import sys
from pathlib import Path

from bench import ROOT
from bench.common.stats import MiB


def _run(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=10, cwd=ROOT).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def environment(workdir: str) -> dict:
    from importlib.metadata import PackageNotFoundError, version

    import crc32c

    def ver(dist: str) -> str:
        try:
            return version(dist)
        except PackageNotFoundError:
            return "-"

    mem = next((line.split()[1] for line in Path("/proc/meminfo").read_text().splitlines()
                if line.startswith("MemTotal")), "0") if Path("/proc/meminfo").exists() else "0"
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").exists() \
        else platform.processor()
    digest = hashlib.sha256()
    for f in sorted((ROOT / "src" / "logbroker").rglob("*.py")):
        digest.update(f.read_bytes())
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join([Path(sys.executable).name, *sys.orig_argv[1:]]),
        "nproc": os.cpu_count(), "cpu": cpu, "ram_gib": round(int(mem) / MiB, 1),
        "disk": " ".join(_run(["df", "-hT", workdir]).splitlines()[-1:]),
        "kernel": platform.release(), "python": platform.python_version(),
        "versions": {**{d: ver(d) for d in ("logbroker", "pyarrow", "lmdb", "crc32c", "msgpack", "rich")},
                     "crc32c_hardware": bool(getattr(crc32c, "hardware_based", False))},
        "git_commit": _run(["git", "rev-parse", "--short", "HEAD"]),
        "src_sha256": digest.hexdigest()[:16],
        "src_dirty": bool(_run(["git", "status", "--porcelain", "src"])),
        "workdir": workdir,
    }
