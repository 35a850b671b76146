"""`make run`'s shape, no broker and no beat: a schedule trigger fires from the web process's own
ticker. Two web processes (gunicorn -w 2, a ticker each) on one SQLite database fire a tick once."""

import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.browser.servers import ROOT, free_port, live_env, manage

# An hourly trigger made 90 minutes ago that never fired (its tick is 30 minutes late: run once),
# and one every two seconds.
SETUP = """
from datetime import timedelta
from django.utils import timezone
from runs.demo import demo_load
from triggers import services
from triggers.models import Trigger
demo_load()
bot = services.service_account_create(username="scheduler-bot", roles=["operators"])
for name, seconds in (("hourly", 3600), ("often", 2)):
    services.trigger_create(name=name, kind="schedule", agent="crm-assistant", input_template="List all accounts.",
                            service_account=bot, interval_seconds=seconds, concurrency="allow")
Trigger.objects.filter(name="hourly").update(created_at=timezone.now() - timedelta(minutes=90))
"""


def _fires(database: Path) -> list[tuple]:
    with sqlite3.connect(database, timeout=20) as db:
        return db.execute(
            "SELECT t.name, f.outcome, f.scheduled_for, r.status FROM triggers_triggerfire f"
            " JOIN triggers_trigger t ON t.id = f.trigger_id LEFT JOIN runs_run r ON r.id = f.run_id").fetchall()


@pytest.mark.slow
def test_the_web_processes_fire_schedules_once_each_tick(tmp_path):
    env = live_env(tmp_path) | {"WARRANT_EMBEDDED_RECONCILE_SECONDS": "0.3"}
    manage(env, "migrate", "-v0")
    manage(env, "shell", "-c", SETUP)
    database = tmp_path / "warrant.sqlite3"
    assert _fires(database) == []

    log_path = tmp_path / "gunicorn.log"
    log = open(log_path, "w")
    server = subprocess.Popen([sys.executable, "-m", "gunicorn", "warrant.wsgi", "-w", "2", "-b",
                               f"127.0.0.1:{free_port()}"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            assert server.poll() is None, log_path.read_text()
            fires = _fires(database)
            if sum(1 for f in fires if f[0] == "often" and f[3] == "succeeded") >= 3:
                break
            time.sleep(0.2)
        else:
            raise AssertionError(f"schedules did not fire: {_fires(database)}\n{log_path.read_text()[-3000:]}")
        time.sleep(1)  # a double fire of the hourly tick would have landed by now
    finally:
        server.terminate()
        server.wait(timeout=20)
        log.close()
    fires = _fires(database)
    hourly = [f for f in fires if f[0] == "hourly"]
    assert [(outcome, status) for _, outcome, _, status in hourly] == [("started", "succeeded")], fires
    often = [f[2] for f in fires if f[0] == "often"]
    assert len(often) == len(set(often)), f"a tick fired twice: {fires}"
    assert "embedded jobs" in log_path.read_text()
