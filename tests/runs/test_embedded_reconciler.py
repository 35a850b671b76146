"""Without a broker the web process reconciles on a ticker of its own (runs.ticker): an overdue
request expires and a run whose worker died is taken up with nobody looking at them."""

import os
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runs import ticker

ROOT = Path(__file__).resolve().parents[2]

# In the server's database: a run parked on a request that is overdue, and a run whose worker
# died mid-step (running, lease lapsed, its owner no process at all).
SETUP = """
from datetime import timedelta
from django.contrib.auth.models import User
from django.utils import timezone
from runs.demo import demo_load
from runs.harness import initial_state
from runs.models import ApprovalRequest, Run
from runs.services import run_start
demo_load()
operator = User.objects.get(username="operator")
parked, _ = run_start(agent_slug="crm-assistant", input_text="Delete the account Initech.", caller=operator)
assert Run.objects.get(id=parked.id).status == "awaiting_approval"
ApprovalRequest.objects.filter(run=parked).update(expires_at=timezone.now() - timedelta(seconds=1))
lost = Run.objects.create(agent=parked.agent, agent_version=parked.agent_version, caller=operator,
                          caller_roles=parked.caller_roles, input="List all accounts.",
                          snapshot=parked.snapshot, policy_snapshot_sha256=parked.policy_snapshot_sha256,
                          state=initial_state("List all accounts."),
                          status="running", lease_owner="gone", lease_expires_at=timezone.now() - timedelta(seconds=1))
print("RUNS", parked.id.hex, lost.id.hex)
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _statuses(database: Path, ids) -> dict:
    with sqlite3.connect(database, timeout=20) as db:
        return dict(db.execute(f"SELECT id, status FROM runs_run WHERE id IN ({', '.join('?' * len(ids))})", ids))


@pytest.mark.slow
def test_the_web_process_expires_overdue_requests_and_takes_up_lost_runs_on_its_own(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "WARRANT_", "DATABASE_URL", "CELERY_"))}
    env.update(DJANGO_DEBUG="1", WARRANT_DATA_DIR=str(tmp_path), WARRANT_EMBEDDED_RECONCILE_SECONDS="0.5")
    python = [sys.executable, "manage.py"]
    subprocess.run([*python, "migrate", "-v0"], cwd=ROOT, env=env, check=True, timeout=300)
    done = subprocess.run([*python, "shell", "-c", SETUP], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    parked, lost = next(line.split()[1:] for line in done.stdout.splitlines() if line.startswith("RUNS "))
    database = tmp_path / "warrant.sqlite3"
    assert _statuses(database, [parked, lost]) == {parked: "awaiting_approval", lost: "running"}

    log = open(tmp_path / "gunicorn.log", "w")
    server = subprocess.Popen([sys.executable, "-m", "gunicorn", "warrant.wsgi", "-w", "1", "-b",
                               f"127.0.0.1:{_free_port()}"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert server.poll() is None, (tmp_path / "gunicorn.log").read_text()
            seen = _statuses(database, [parked, lost])
            if seen == {parked: "succeeded", lost: "succeeded"}:
                break
            time.sleep(0.2)
        else:
            raise AssertionError(f"not reconciled: {seen}\n{(tmp_path / 'gunicorn.log').read_text()[-3000:]}")
    finally:
        server.terminate()
        server.wait(timeout=20)
        log.close()
    with sqlite3.connect(database) as db:
        [(decision,)] = db.execute("SELECT status FROM runs_approvalrequest WHERE run_id = ?", [parked])
        [(output,)] = db.execute("SELECT output FROM runs_run WHERE id = ?", [parked])
    assert decision == "expired" and "expired" in output


@pytest.mark.parametrize("eager, seconds", [(False, 5), (True, 0)])
def test_the_ticker_stays_off_with_a_broker_or_when_set_to_zero(settings, eager, seconds):
    settings.CELERY_TASK_ALWAYS_EAGER = eager
    settings.WARRANT = {**settings.WARRANT, "EMBEDDED_RECONCILE_SECONDS": seconds}
    assert ticker.start_embedded_reconciler() is None
