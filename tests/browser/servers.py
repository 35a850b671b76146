"""Servers the live tests start (manage.py commands, runserver on loopback until it answers, the
demo loaded with an API token per user), and how a browser signs in to one."""

import os
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "warrant-demo"  # every demo user's, in every live server these helpers start


def live_env(data_dir: Path) -> dict:
    """This process's environment for a live server of its own: DEBUG, its own data directory (so
    its own SQLite file), the demo's password and the fast hasher; the test session's database and
    broker left out."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env.update(DJANGO_DEBUG="1", WARRANT_DATA_DIR=str(data_dir), DEMO_PASSWORD=PASSWORD, WARRANT_TEST_FAST_HASHER="1",
               PYTHONUNBUFFERED="1")
    return env


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
def serving(command: list[str], env: dict, port: int, log_path: Path):
    """`command`, a web server listening on 127.0.0.1:`port`, its output in `log_path`: its base URL
    once it is healthy; stopped (killed if it will not stop) on the way out."""
    log = open(log_path, "w")
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
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


def runserver(env: dict, port: int, log_path: Path):
    """`manage.py runserver` on 127.0.0.1:`port` (see serving)."""
    return serving([sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"], env, port, log_path)


def demo_with_tokens(env: dict, users: list[str], *, setup: str = "") -> dict[str, str]:
    """Migrate, load the demo, run `setup` (Python statements, e.g. another user), and issue an API
    token to each of `users`: {user: token}. One interpreter for all of it, since each manage.py
    start costs seconds."""
    manage(env, "migrate", "--noinput")
    out = manage(env, "shell", "-c", (
        "from django.contrib.auth import get_user_model; from governance.tokens import token_issue; "
        f"from runs.demo import demo_load; demo_load(); {setup}"
        "print('TOKENS', *(n + '=' + token_issue(user=get_user_model().objects.get(username=n), via='command', "
        f"issued_by='test')[1] for n in {users!r}))"))
    line = next(line for line in out.splitlines() if line.startswith("TOKENS "))
    return dict(pair.split("=") for pair in line.split()[1:])


def api_client(base: str, token: str) -> httpx.Client:
    """The live server's API as the user whose token this is (a run waits for its whole agent loop)."""
    return httpx.Client(base_url=f"{base}/api/v1", timeout=60, headers={"Authorization": f"Token {token}"})


def free_port(ports: range | None = None) -> int:
    """The first port of `ports` free on loopback; without `ports`, one the system picks."""
    for port in ports or [0]:
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return probe.getsockname()[1]
    raise RuntimeError(f"no free port in {ports}")


def login(page, base: str, user: str, password: str = PASSWORD) -> None:
    """Sign `page` in to the admin of the server at `base` (the caller waits for what it expects next)."""
    page.goto(f"{base}/admin/login/?next=/admin/")
    page.fill("#id_username", user)
    page.fill("#id_password", password)
    page.click("input[type=submit]")
