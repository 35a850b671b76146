"""Servers the live tests start: manage.py commands, and runserver on loopback until it answers."""

import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]


def manage(env: dict, *args: str) -> str:
    """Run `manage.py args` with `env`; its output, or fail with what it wrote to stderr."""
    done = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def wait_until_healthy(process, base: str, log: Path, *, attempts: int = 300) -> None:
    """Return once `base`/healthz answers 200; fail with the server's log if it exits or never does."""
    for _ in range(attempts):
        if process.poll() is not None:
            raise RuntimeError(f"the server exited: {log.read_text()}")
        try:
            if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.1)
    raise RuntimeError(f"the server did not answer /healthz: {log.read_text()}")


@contextmanager
def runserver(env: dict, port: int, log_path: Path):
    """`manage.py runserver` on 127.0.0.1:`port`, its output in `log_path`: its base URL once it is
    healthy; stopped (killed if it will not stop) on the way out."""
    log = open(log_path, "w")
    process = subprocess.Popen([sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
                               cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_healthy(process, base, log_path)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()
