"""Real `logbroker serve` subprocesses for end-to-end tests (no mocks).

Each broker listens on 127.0.0.1; with port 0 it picks a free port and the
test learns it from the one line the broker prints on stdout when ready.
Only processes started here are stopped, by their PID.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time

LOGBROKER = os.path.join(os.path.dirname(sys.executable), "logbroker")


class BrokerProcess:
    def __init__(self, data_dir, *extra: str, config: "dict | None" = None) -> None:
        self.data_dir = str(data_dir)
        self.extra = list(extra)
        self.port = 0
        self.proc: "subprocess.Popen | None" = None
        self.config_path = None
        if config:
            self.config_path = os.path.join(self.data_dir + ".toml")
            with open(self.config_path, "w") as fh:
                for key, value in config.items():
                    fh.write(f"{key} = {value!r}\n".replace("'", '"').replace("True", "true")
                             .replace("False", "false"))
        self.log_path = self.data_dir + ".log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> "BrokerProcess":
        args = [LOGBROKER, "serve", "--data-dir", self.data_dir, "--host", "127.0.0.1",
                "--port", str(self.port), *self.extra]
        if self.config_path:
            args += ["--config", self.config_path]
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=log, text=True)
        log.close()
        line = _readline(self.proc, timeout)
        if not line.startswith("logbroker listening on "):
            self.kill()
            raise RuntimeError(f"broker did not start: {line!r}; log:\n{self.log()}")
        self.port = int(line.rsplit(":", 1)[1])
        return self

    def log(self) -> str:
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as fh:
                return fh.read()
        except OSError:
            return ""

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait: the exit code (0 after a clean shutdown)."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            self._close()

    def kill(self) -> None:
        """SIGKILL: a crash, nothing flushed or checkpointed by the broker."""
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait(timeout=30)
            self._close()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _close(self) -> None:
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()
        self.proc = None

    def __enter__(self) -> "BrokerProcess":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.kill()


def _readline(proc: subprocess.Popen, timeout: float) -> str:
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if sel.select(timeout=max(0.0, deadline - time.monotonic())):
                return proc.stdout.readline()
            if proc.poll() is not None:
                return ""
        return ""
    finally:
        sel.close()
