"""Profiles for the broker benchmark (``--profile DIR``).

During each phase's timed section ``py-spy record`` samples the broker and
the client process (all threads, ``--nonblocking`` so the targets are not
paused; samples of threads the OS shows as running only), writing collapsed
stacks to ``DIR/<flush>-<phase>-<broker|client>-r<run>.txt``. With ``--profile-tool cprofile``
the client's timed section runs under cProfile instead (main thread only:
the client's I/O thread is invisible to it) and the broker is still sampled
by py-spy. ``summarize`` turns the files into top-N tables: *self* = samples
whose innermost frame is the function, *total* = samples with the function
anywhere on the stack (event-loop, thread and CLI plumbing left out), as %
of the process's samples, summed over the runs.
"""

from __future__ import annotations

import os
import pstats
import re
import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

from bench.common.procs import spawn

_LINE = re.compile(r" \(([^()]*?):\d+\)$")
_RUN = re.compile(r"-r\d+$")
# frames on every stack of a thread: left out of the "total" ranking
_PLUMBING = {"base_events.py", "events.py", "runners.py", "core.py", "main.py", "serve.py",
             "threading.py", "loop_thread.py", "logbroker", "worker.py", "runpy.py"}


def find_py_spy() -> "str | None":
    near = os.path.join(os.path.dirname(sys.executable), "py-spy")
    return near if os.path.exists(near) else shutil.which("py-spy")


class Profiler:
    def __init__(self, out_dir: str, tool: str = "py-spy", rate: int = 1000) -> None:
        self.dir, self.rate = out_dir, rate
        self.run = 0  # set by the caller before each run
        self.py_spy = find_py_spy()
        self.cprofile = tool == "cprofile"
        if self.py_spy is None and not self.cprofile:
            raise RuntimeError("py-spy not found (pip install py-spy), or use --profile-tool cprofile")
        os.makedirs(out_dir, exist_ok=True)

    def path(self, flush: str, phase: str, who: str, ext: str) -> str:
        return os.path.join(self.dir, f"{flush}-{phase}-{who}-r{self.run}.{ext}")

    def start(self, flush: str, phase: str, broker_pid: int, client_pid: int) -> list:
        if self.py_spy is None:
            return []
        targets = [("broker", broker_pid)] + ([] if self.cprofile else [("client", client_pid)])
        spies = []
        for who, pid in targets:
            spies.append(spawn([self.py_spy, "record", "--pid", str(pid), "--rate", str(self.rate),
                                "--format", "raw", "--nonblocking", "--threads",
                                "--output", self.path(flush, phase, who, "txt")],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        return spies

    @staticmethod
    def stop(spies: list) -> None:
        for spy in spies:
            if spy.poll() is None:
                spy.send_signal(signal.SIGINT)  # py-spy writes its output on Ctrl-C
        for spy in spies:
            try:
                spy.wait(timeout=30)
            except subprocess.TimeoutExpired:
                spy.kill()
                spy.wait(timeout=10)


def _frame(frame: str) -> str:
    """``func (path/to/file.py:123)`` -> ``func (file.py)``."""
    match = _LINE.search(frame)
    if not match:
        return frame
    return f"{frame[:match.start()]} ({os.path.basename(match.group(1))})"


def _frame_file(frame: str) -> str:
    return frame[frame.rfind("(") + 1:-1] if frame.endswith(")") else frame


def collapsed_top(paths: list[str], top: int = 15) -> dict:
    self_c: Counter = Counter()
    total_c: Counter = Counter()
    threads: Counter = Counter()
    samples = 0
    for path in paths:
        for line in Path(path).read_text(errors="replace").splitlines():
            stack, _, count = line.rpartition(" ")
            if not count.isdigit():
                continue
            n = int(count)
            frames = stack.split(";")
            if frames and frames[0].startswith("thread ("):
                threads[frames[0].split(":", 1)[-1].strip()] += n
                frames = frames[1:]
            frames = [_frame(f) for f in frames if not f.startswith("process ")]
            if not frames:
                continue
            samples += n
            self_c[frames[-1]] += n
            for f in set(frames):
                if _frame_file(f) not in _PLUMBING:
                    total_c[f] += n

    def pct(c: Counter) -> list:
        return [[name, round(100 * v / max(samples, 1), 1)] for name, v in c.most_common(top)]

    return {"samples": samples, "files": len(paths), "threads": pct(threads), "self": pct(self_c),
            "total": pct(total_c)}


def cprofile_top(paths: list[str], top: int = 15) -> dict:
    stats = pstats.Stats(*paths)
    total = stats.total_tt or 1e-9
    rows = sorted(stats.stats.items(), key=lambda kv: kv[1][2], reverse=True)[:top]
    return {"total_s": round(total, 3), "files": len(paths),
            "self": [[f"{fn} ({os.path.basename(file)}:{line})", round(100 * tt / total, 1), calls]
                     for (file, line, fn), (_cc, calls, tt, _ct, _callers) in rows]}


def summarize(out_dir: str, top: int = 15) -> dict:
    """Top functions per flush-phase-process (runs summed) of the profile
    files in ``out_dir``; also written as ``summary.txt`` there."""
    groups: dict[tuple[str, str], list[str]] = {}
    for f in sorted(Path(out_dir).iterdir()):
        if f.suffix in (".txt", ".prof") and f.name != "summary.txt":
            groups.setdefault((_RUN.sub("", f.stem), f.suffix), []).append(str(f))
    out: dict = {}
    lines: list[str] = []
    for (stem, suffix), paths in sorted(groups.items()):
        rep = collapsed_top(paths, top) if suffix == ".txt" else cprofile_top(paths, top)
        key = stem if suffix == ".txt" else stem + ".cprofile"
        out[key] = rep
        size = f"{rep['samples']} samples" if "samples" in rep else f"{rep['total_s']} s profiled"
        lines.append(f"== {key} ({size}, {rep['files']} run(s))")
        for part in ("threads", "self", "total"):
            if rep.get(part):
                lines.append(f"  -- {part} %")
                lines += [f"  {row[1]:6.1f}  {row[0]}" + (f"  [{row[2]} calls]" if len(row) > 2 else "")
                          for row in rep[part]]
    Path(out_dir, "summary.txt").write_text("\n".join(lines) + "\n")
    return out
