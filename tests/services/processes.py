"""Real service processes for the durability suite: a Redis server, Celery workers, beat.

Nothing here is a fake. Redis is a real redis-server on its own port (so killing it never
touches the machine's shared one); workers and beat are real `celery -A warrant` processes
against the test PostgreSQL database.
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parents[2]
CELERY = str(Path(sys.executable).with_name("celery"))


def wait_for(predicate, *, timeout: float, interval: float = 0.1, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout}s waiting for {what}")


def _children(pid: int) -> list[int]:
    found = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    return [int(p) for p in found]


class RedisServer:
    def __init__(self, port: int, logdir: Path):
        self.port = port
        self.log = logdir / f"redis-{port}.log"
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=2)

    def start(self) -> None:
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--logfile", str(self.log)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        wait_for(self._pings, timeout=10, what=f"redis on {self.port}")

    def _pings(self) -> bool:
        try:
            return bool(self.client().ping())
        except redis.RedisError:
            return False

    def kill(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)

    def flushall(self) -> None:
        self.client().flushall()


class CeleryProcess:
    """One `celery -A warrant worker` (or beat) process with its log file."""

    def __init__(self, args: list[str], env: dict, log: Path):
        self.args, self.env, self.log = args, env, log
        self.process: subprocess.Popen | None = None

    def start(self) -> "CeleryProcess":
        handle = open(self.log, "wb")  # a fresh log: readiness must not be read off an earlier process
        self.process = subprocess.Popen([CELERY, "-A", "warrant", *self.args], cwd=ROOT, env=self.env,
                                        stdout=handle, stderr=subprocess.STDOUT, start_new_session=True)
        return self

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def pool_children(self) -> list[int]:
        return _children(self.process.pid) if self.alive else []

    # A bound on start-up, not a figure: Django and Celery setting up take a few seconds on a quiet
    # machine but over 30 s at load average 13 (measured), and a slow start is not what the suite tests.
    def wait_ready(self, timeout: float = 120) -> None:
        wait_for(lambda: b"ready." in self.log.read_bytes() or b"beat: Starting" in self.log.read_bytes(),
                 timeout=timeout, what=f"{self.args[0]} to start ({self.log})")

    def kill_pool_child(self) -> int:
        child = wait_for(self.pool_children, timeout=10, what="a pool child")[0]
        os.kill(child, signal.SIGKILL)
        return child

    def kill(self) -> None:
        """kill -9 of the whole process group: main process and pool children together."""
        if self.alive:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def stop(self) -> None:
        if self.alive:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()
