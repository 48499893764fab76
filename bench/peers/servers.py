"""Peer servers on 127.0.0.1, each in its own temp dir, stopped by PID."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time

from bench.common.procs import free_port, spawn, stop_process


# -- servers -------------------------------------------------------------------------------
def wait_port(port: int, proc, timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listening on 127.0.0.1:{port} after {timeout:.0f} s")


class Server:
    def __init__(self, args: list[str], port: int, log_path: str) -> None:
        self.port = port
        with open(log_path, "ab") as log:
            self.proc = spawn(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            wait_port(port, self.proc)
        except BaseException:  # also SIGTERM's SystemExit: stop what was started
            self.stop()
            raise

    def stop(self) -> None:
        stop_process(self.proc, 30)


def start_redis(d: str, fsync: str) -> Server:
    port = free_port()
    os.makedirs(d, exist_ok=True)
    return Server(["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--dir", d,
                   "--appendonly", "yes", "--appendfsync", fsync, "--save", "", "--daemonize", "no",
                   # no automatic AOF rewrite: it compacts earlier phases' data mid-phase (the
                   # disk and CPU figures of a phase would include it), and logs keep all data
                   "--auto-aof-rewrite-percentage", "0",
                   "--protected-mode", "yes"], port, d + ".log")


def start_nats(d: str) -> Server:
    port = free_port()
    os.makedirs(d, exist_ok=True)
    return Server(["nats-server", "-js", "-a", "127.0.0.1", "-p", str(port), "-sd", d], port, d + ".log")


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            return [int(x) for x in fh.read().split()]
    except OSError:
        return []


class RabbitServer:
    """rabbitmq-server with the rabbitmq_stream plugin, everything in ``d``:
    our own epmd (127.0.0.1, its own port), Erlang distribution, AMQP and
    stream listeners on 127.0.0.1. Stopped by PID: beam.smp (SIGTERM is a
    clean shutdown), then the start script, then epmd."""

    def __init__(self, d: str) -> None:
        os.makedirs(d, exist_ok=True)
        amqp, self.port, dist, epmd = free_port(), free_port(), free_port(), free_port()
        with open(os.path.join(d, "rabbitmq.conf"), "w") as fh:
            fh.write(f"listeners.tcp.1 = 127.0.0.1:{amqp}\nstream.listeners.tcp.1 = 127.0.0.1:{self.port}\n"
                     f"stream.advertised_host = 127.0.0.1\nstream.advertised_port = {self.port}\n"
                     "loopback_users = none\n")
        with open(os.path.join(d, "enabled_plugins"), "w") as fh:
            fh.write("[rabbitmq_stream].\n")
        env = {**os.environ, "RABBITMQ_CONFIG_FILE": os.path.join(d, "rabbitmq"),
               "RABBITMQ_ENABLED_PLUGINS_FILE": os.path.join(d, "enabled_plugins"),
               "RABBITMQ_MNESIA_BASE": os.path.join(d, "mnesia"), "RABBITMQ_LOG_BASE": os.path.join(d, "log"),
               "RABBITMQ_NODENAME": f"peers{self.port}@localhost", "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
               "ERL_EPMD_ADDRESS": "127.0.0.1", "ERL_EPMD_PORT": str(epmd), "RABBITMQ_DIST_PORT": str(dist),
               "HOME": d, "RABBITMQ_PID_FILE": os.path.join(d, "pid"),
               "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": "-kernel inet_dist_use_interface {127,0,0,1}"}
        self.epmd = self.proc = None
        try:
            with open(d + ".log", "ab") as log:
                self.epmd = spawn(["epmd", "-address", "127.0.0.1", "-port", str(epmd)], stdout=log,
                                  stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
                wait_port(epmd, self.epmd, 10)  # else rabbitmq would start a detached epmd of its own
                self.proc = spawn(["/usr/lib/rabbitmq/bin/rabbitmq-server"], stdout=log,
                                  stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
            wait_port(self.port, self.proc, 90)
        except BaseException:  # also SIGTERM's SystemExit: stop what was started
            self.stop()
            raise

    def stop(self) -> None:
        if self.proc is not None:
            for pid in _children(self.proc.pid):  # beam.smp
                try:
                    os.kill(pid, signal.SIGTERM)
                except OSError:
                    pass
            stop_process(self.proc, 60)
        stop_process(self.epmd, 10)


# -- the run -------------------------------------------------------------------------------
