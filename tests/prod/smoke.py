"""`make prod-smoke`: Warrant as the README's "Production" section deploys it, tested end to end.

It runs the commands of that section's block, parsed from README.md (so the two cannot drift): with
DJANGO_DEBUG off and a generated secret key, against a PostgreSQL database of its own (dropped and
made again) and a redis-server of its own, it makes a receipt signing key, migrates, bootstraps
(twice: the second changes nothing), collects the static files, and starts gunicorn on loopback,
two Celery workers and beat. Then tests/prod/smoke_walk.py works it as its people would. Every
phase is timed and the timings are printed at the end.

    python tests/prod/smoke.py --pg-url postgres://postgres@127.0.0.1:5432/warrant \\
        --database warrant_prod_smoke --redis-port 6398 --port 8098
"""

import argparse
import contextlib
import os
import re
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a script
    sys.path.insert(0, str(ROOT))

from tests.browser.servers import wait_until_healthy  # noqa: E402
from tests.prod import smoke_walk  # noqa: E402
from tests.services.processes import RedisServer, wait_for  # noqa: E402

README = ROOT / "README.md"
SERVICES = {"gunicorn", "celery"}  # programs that keep running; every other line runs to its end
# What the smoke sets besides the variables the README exports, and why.
SMOKE_ONLY = {
    "DJANGO_SECURE_SSL_REDIRECT": "plain HTTP on loopback; in production a TLS proxy sits in front",
    "WARRANT_PYTHON_TOOL_MODULES": "the smoke's own tool (tests/prod/smoke_tools.py), registered as a python source",
}
OPERATOR, APPROVER = "olive", "arjun"  # the people the admin sets up
SHOTS = ROOT / "var" / "prod-smoke"


def production_block(readme: str) -> tuple[list[str], list[str]]:
    """The variables the README's production block exports and the commands it runs, in order."""
    start = readme.index("\n## Production\n")
    end = readme.find("\n## ", start + 1)
    block = re.search(r"```sh\n(.*?)```", readme[start:end if end != -1 else None], re.S)
    if block is None:
        raise ValueError("README.md's Production section has no ```sh block")
    variables, commands = [], []
    for line in block.group(1).splitlines():
        if line.startswith("export "):
            variables += [word.split("=", 1)[0] for word in shlex.split(line, comments=True)[1:]]
        elif line.strip():
            commands.append(line.strip())
    return variables, commands


def is_service(command: str) -> bool:
    return shlex.split(command)[0] in SERVICES


class Phases:
    def __init__(self):
        self.timings: list[tuple[str, float]] = []

    @contextlib.contextmanager
    def __call__(self, name: str):
        started = time.monotonic()
        print(f"[prod-smoke] {name} ...", flush=True)
        yield
        self.timings.append((name, time.monotonic() - started))
        print(f"[prod-smoke] {name}: {self.timings[-1][1]:.1f} s", flush=True)

    def report(self) -> str:
        width = max(len(name) for name, _ in self.timings)
        lines = [f"  {name:<{width}}  {seconds:6.1f} s" for name, seconds in self.timings]
        return "\n".join(["prod-smoke timings:", *lines, f"  {'total':<{width}}  {sum(s for _, s in self.timings):6.1f} s"])


def _database(pg_url: str, name: str) -> str:
    """A fresh database `name` on pg_url's server (dropped first if there); its URL."""
    import psycopg

    if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", name):
        raise smoke_walk.SmokeFailure(f"{name!r} is not a plain database name (lower case letters, digits, _)")
    parts = urlsplit(pg_url)
    server = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(server, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        connection.execute(f'CREATE DATABASE "{name}"')
    return urlunsplit(parts._replace(path=f"/{name}"))


def _drop_database(pg_url: str, name: str) -> None:
    import psycopg

    with psycopg.connect(urlunsplit(urlsplit(pg_url)._replace(path="/postgres")), autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _fingerprint(database_url: str) -> dict[str, str]:
    """Every table of the database, by name: an md5 of all its rows (their text, in order)."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(database_url) as connection:
        tables = [row[0] for row in connection.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename")]
        return {table: connection.execute(sql.SQL("SELECT count(*) || ':' || coalesce(md5(string_agg(t::text, '|' "
                                                  "ORDER BY t::text)), '') FROM {} t").format(sql.Identifier(table))
                                          ).fetchone()[0] for table in tables}


def _port_free(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) != 0


class Service:
    """One long-running line of the block, started by bash as the README writes it."""

    def __init__(self, command: str, env: dict, log: Path):
        self.command, self.log = command, log
        self.handle = open(log, "wb")
        self.process = subprocess.Popen(["bash", "-c", "exec " + command], cwd=ROOT, env=env, stdout=self.handle,
                                        stderr=subprocess.STDOUT, start_new_session=True)

    def wait_log(self, marker: bytes, timeout: float = 120) -> None:
        def started():
            if self.process.poll() is not None:
                raise smoke_walk.SmokeFailure(f"{self.command!r} exited: {self.log.read_text()[-3000:]}")
            return marker in self.log.read_bytes()
        wait_for(started, timeout=timeout, interval=0.2, what=f"{self.command!r} ({self.log})")

    def terminate(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)

    def stop(self) -> None:
        """SIGTERM (a warm shutdown), then SIGKILL to what is left after 30 s."""
        if self.process.poll() is None:
            self.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)
        self.handle.close()


def _run(command: str, env: dict) -> str:
    done = subprocess.run(["bash", "-c", command], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise smoke_walk.SmokeFailure(f"{command!r} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    return done.stdout


def environment(variables: list[str], *, data: Path, database_url: str, redis_port: int, port: int,
                admin: tuple[str, str]) -> dict:
    """The processes' environment: the machine's, without any Warrant, Django, database or Celery
    setting of its own, then a value for each variable the README exports and for SMOKE_ONLY's."""
    (data / "keys").mkdir(parents=True)
    (data / "admin-password").write_text(admin[1] + "\n")
    values = {
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50), "DJANGO_ALLOWED_HOSTS": "127.0.0.1", "PORT": str(port),
        "DATABASE_URL": database_url, "CELERY_BROKER_URL": f"redis://127.0.0.1:{redis_port}/0",
        "WARRANT_DATA_DIR": str(data), "WARRANT_RECEIPT_SIGNING_KEY_FILE": str(data / "keys" / "receipt-key.pem"),
        "WARRANT_ADMIN_USERNAME": admin[0], "WARRANT_ADMIN_EMAIL": f"{admin[0]}@example.org",
        "WARRANT_ADMIN_PASSWORD_FILE": str(data / "admin-password"), "WARRANT_METRICS_TOKEN": secrets.token_urlsafe(32),
        "DJANGO_SECURE_SSL_REDIRECT": "0", "WARRANT_PYTHON_TOOL_MODULES": "tests.prod.smoke_tools",
    }
    unset = sorted(set(variables) - set(values))
    extra = sorted(set(values) - set(variables) - set(SMOKE_ONLY))
    if unset or extra:
        raise smoke_walk.SmokeFailure(f"README.md's production block and the smoke disagree: the README exports "
                                      f"{unset} that the smoke sets no value for; the smoke sets {extra} unexplained")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "WARRANT_", "DATABASE_", "CELERY_"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # the venv's programs first
    return {**env, **values}


def smoke(args) -> Phases:
    phase = Phases()
    variables, commands = production_block(README.read_text())
    data = Path(tempfile.mkdtemp(prefix="warrant-prod-smoke-"))
    admin = ("root-admin", secrets.token_urlsafe(18))
    people = {OPERATOR: (secrets.token_urlsafe(18), "operators"), APPROVER: (secrets.token_urlsafe(18), "secops")}
    for port in (args.port, args.redis_port):
        if not _port_free(port):
            raise smoke_walk.SmokeFailure(f"port {port} is in use on 127.0.0.1: pick another (see the Makefile)")
    services: list[Service] = []
    redis = RedisServer(args.redis_port, data)
    try:
        with phase("a fresh database, a redis-server"):
            database_url = _database(args.pg_url, args.database)
            redis.start()
        env = environment(variables, data=data, database_url=database_url, redis_port=args.redis_port,
                          port=args.port, admin=admin)
        for command in commands:
            if is_service(command):
                continue
            with phase(" ".join(w for w in shlex.split(command)[2:] if "$" not in w and w != "--out")):
                out = _run(command, env)
            if "warrant_bootstrap" in command:
                smoke_walk.check(f"governance admin {admin[0]} created" in out, f"bootstrap made no admin: {out}")
                with phase("warrant_bootstrap again"):
                    before = _fingerprint(database_url)
                    again = _run(command, env)
                    changed = sorted(t for t, rows in _fingerprint(database_url).items() if before.get(t) != rows)
                smoke_walk.check(again.startswith("Nothing to change") and not changed,
                                 f"a second bootstrap changed tables {changed}: {again}")
        with phase("start: gunicorn, two Celery workers, beat"):
            for number, command in enumerate(c for c in commands if is_service(c)):
                name = shlex.split(command)[0] + (f"-{number}" if number else "")
                services.append(Service(command, env, data / f"{name}.log"))
            base = f"http://127.0.0.1:{args.port}"
            web = [s for s in services if s.command.startswith("gunicorn ")]
            workers = [s for s in services if " worker" in s.command]
            smoke_walk.check(len(web) == 1, f"the block starts {len(web)} gunicorn, not one")
            wait_until_healthy(web[0].process, base, web[0].log, attempts=600)
            for service in services:
                if service not in web:
                    service.wait_log(b"beat: Starting" if " beat" in service.command else b" ready.")
            smoke_walk.check(len(workers) == 2, f"the block starts {len(workers)} workers, not two")
        tokens = smoke_walk.browser_walk(base, admin, people, SHOTS, phase)
        run = smoke_walk.governed_run(base, tokens, admin=admin[0], operator=OPERATOR, approver=APPROVER, phase=phase)
        health = smoke_walk.read_health(base, env["WARRANT_METRICS_TOKEN"], smoke_walk.AGENT, phase)
        print(f"[prod-smoke] run {run['id']} succeeded, receipt {run['receipt_id']} verified; "
              f"/readyz {health['readyz']}; /metrics: {health['metrics']}")
        print(f"[prod-smoke] screenshots: {SHOTS / 'admin.png'} (the styled admin under gunicorn), {SHOTS / 'api-docs.png'}")
        with phase("stop"):
            for service in services:  # all at once: each waits for its warm shutdown
                service.terminate()
            for service in services:
                service.stop()
            redis.kill()
            _drop_database(args.pg_url, args.database)
        shutil.rmtree(data, ignore_errors=True)
    except BaseException:
        for service in services:
            print(f"\n--- {service.log.name} (last lines)\n{service.log.read_text(errors='replace')[-2500:]}", file=sys.stderr)
        print(f"[prod-smoke] logs and data kept in {data}; database {args.database} kept", file=sys.stderr)
        raise
    finally:
        for service in services:
            service.stop()
        redis.kill()
    return phase


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pg-url", default=os.environ.get("PG_URL", "postgres://postgres@127.0.0.1:5432/warrant"),
                        help="a PostgreSQL server the smoke may create and drop a database on")
    parser.add_argument("--database", default="warrant_prod_smoke", help="the database's name (dropped and made again)")
    parser.add_argument("--redis-port", type=int, default=6398, help="the port of the smoke's own redis-server")
    parser.add_argument("--port", type=int, default=8098, help="gunicorn's port on 127.0.0.1")
    args = parser.parse_args(argv)
    started = time.monotonic()
    try:
        phases = smoke(args)
    except smoke_walk.SmokeFailure as failure:
        print(f"[prod-smoke] FAILED after {time.monotonic() - started:.0f} s: {failure}", file=sys.stderr)
        return 1
    print(phases.report())
    return 0


if __name__ == "__main__":
    sys.exit(main())
