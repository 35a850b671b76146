"""A PostgreSQL server of a scenario's own, for the faults that take the whole server down.

The machine's PostgreSQL serves every test and every helper at once: restarting it would fail
them all, so a scenario that restarts PostgreSQL initdb's a throwaway cluster in a temporary
directory instead (trust auth, loopback only, a port picked free at run time) and restarts
that. Its settings are written into the cluster's postgresql.conf, not passed on the command
line: a `pg_ctl start` or `restart` then never falls back to the default port, which is the
shared server's.

fsync is off: the faults played here kill the server's processes, never the machine, so what
the server wrote reached the kernel and survives them; only a power cut would need fsync.

PostgreSQL refuses to run as root. Run as root (a container), the server runs as the
`postgres` account, which owns the temporary directory.
"""

import glob
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.services.processes import ROOT

_TOOLS = ("initdb", "pg_ctl", "createdb")


def _bindir() -> Path | None:
    """Where initdb and pg_ctl are: on PATH, or in the newest /usr/lib/postgresql/N/bin."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(found).resolve().parent
    for candidate in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name),
                            reverse=True):
        if all(Path(candidate, tool).exists() for tool in _TOOLS):
            return Path(candidate)
    return None


def _server_account() -> pwd.struct_passwd | None:
    """The account the server runs as: None (this one) unless this one is root."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam("postgres")
    except KeyError:
        return None


def unavailable() -> str:
    """Why a server of our own cannot be started on this host ("" if it can)."""
    if _bindir() is None:
        return "initdb and pg_ctl are not installed (neither on PATH nor in /usr/lib/postgresql/*/bin)"
    if os.geteuid() == 0 and _server_account() is None:
        return "running as root, and there is no `postgres` account for the server to run as"
    return ""


def free_port() -> int:
    """TEST_PG_RESTART_PORT (+ the xdist worker's number, as the suite's other ports), or any
    free one."""
    configured = os.environ.get("TEST_PG_RESTART_PORT")
    if configured:
        from tests.services.conftest import XDIST_OFFSET

        return int(configured) + XDIST_OFFSET
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class OwnPostgres:
    """initdb, start, restart (fast or immediate), stop, and databases made on it."""

    def __init__(self, port: int | None = None):
        self.bindir = _bindir()
        self.account = _server_account()
        self.port = port or free_port()
        self.root = Path(tempfile.mkdtemp(prefix="warrant-pg-"))  # short: it holds the Unix socket too
        self.data, self.log = self.root / "data", self.root / "server.log"

    def _run(self, tool: str, *args: str, as_server: bool = True, timeout: float = 120) -> str:
        account = self.account if as_server else None
        done = subprocess.run(
            [str(self.bindir / tool), *args], capture_output=True, text=True, timeout=timeout,
            user=account.pw_uid if account else None, group=account.pw_gid if account else None,
            extra_groups=[] if account else None, cwd=self.root)
        if done.returncode:
            raise RuntimeError(f"{tool} {' '.join(args)} failed ({done.returncode}): {done.stderr or done.stdout}\n"
                               f"{self.log.read_text(errors='replace')[-3000:] if self.log.exists() else ''}")
        return done.stdout

    def init(self) -> "OwnPostgres":
        if self.account:
            os.chown(self.root, self.account.pw_uid, self.account.pw_gid)
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync")
        with open(self.data / "postgresql.conf", "a") as conf:
            conf.write(f"\nport = {self.port}\nlisten_addresses = '127.0.0.1'\n"
                       f"unix_socket_directories = '{self.root}'\nfsync = off\nmax_connections = 50\n")
        return self

    def start(self) -> "OwnPostgres":
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "start")
        return self

    def restart(self, mode: str) -> None:
        """`pg_ctl restart -m fast` (every session ended, a clean shutdown) or `-m immediate` (the
        server's processes killed: a crash, and crash recovery on start)."""
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "-m", mode, "restart")

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self._run("pg_ctl", "-D", str(self.data), "-w", "-m", "immediate", "stop")

    def destroy(self) -> None:
        try:
            self.stop()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def url(self, database: str) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def createdb(self, name: str, *, template: str | None = None) -> str:
        self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres",
                  *(["-T", template] if template else []), name, as_server=False)
        return self.url(name)

    def manage(self, database: str, *args: str) -> None:
        """`manage.py <args>` against one of this server's databases, in a process of its own."""
        env = {**os.environ, "DJANGO_DEBUG": "1", "DATABASE_URL": self.url(database)}
        done = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=600)
        if done.returncode:
            raise RuntimeError(f"manage.py {' '.join(args)} failed: {done.stderr[-3000:]}")
