"""`manage.py warrant_bootstrap`: a fresh database gets the platform's roles, permissions and default
policies and a first governance admin, nothing of the demo; a second run changes nothing and says so.

The test database holds the demo, which bootstrap finds complete; the fresh database of a real
deployment is a SQLite file of the test's own, migrated and bootstrapped by manage.py processes."""

import io
import os
import pty
import select
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management import CommandError, call_command

from governance.bootstrap import DEFAULT_POLICIES, GOVERNANCE_ADMIN_PERMISSIONS, bootstrap, role_permissions
from governance.management.commands.warrant_bootstrap import NOTHING
from governance.models import Policy
from runs.demo import POLICIES

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]
MANAGE = [sys.executable, str(ROOT / "manage.py")]
PASSWORD = "correct horse battery staple"
ADMIN_VARIABLES = ("WARRANT_ADMIN_USERNAME", "WARRANT_ADMIN_EMAIL", "WARRANT_ADMIN_PASSWORD", "WARRANT_ADMIN_PASSWORD_FILE")


@pytest.fixture
def admin_env(monkeypatch, tmp_path):
    secret = tmp_path / "admin-password"
    secret.write_text(PASSWORD + "\n")
    for name in ADMIN_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WARRANT_ADMIN_USERNAME", "ada")
    monkeypatch.setenv("WARRANT_ADMIN_EMAIL", "ada@example.org")
    monkeypatch.setenv("WARRANT_ADMIN_PASSWORD_FILE", str(secret))
    return monkeypatch


def _bootstrap(*args: str) -> str:
    out = io.StringIO()
    call_command("warrant_bootstrap", "--noinput", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def _database() -> str:
    """Every row of every table Django knows, as dumpdata writes them."""
    out = io.StringIO()
    call_command("dumpdata", "--indent", "1", stdout=out)
    return out.getvalue()


def _permissions(role: str) -> set[str]:
    return {f"{app}.{code}" for app, code in
            Group.objects.get(name=role).permissions.values_list("content_type__app_label", "codename")}


def test_the_demo_and_the_bootstrap_share_one_definition_so_on_the_demo_there_is_nothing_to_do():
    assert {name: _permissions(name) for name in role_permissions()} == {
        name: set(dotted) for name, dotted in role_permissions().items()}
    assert [p["name"] for p in POLICIES[:len(DEFAULT_POLICIES)]] == [p["name"] for p in DEFAULT_POLICIES]
    before = _database()
    assert bootstrap() == []
    assert _bootstrap().strip() == NOTHING  # the demo's admin is a governance admin: none to make
    assert _database() == before


def test_a_role_missing_a_permission_gets_it_back():
    role = Group.objects.get(name="governance-admins")
    role.permissions.remove(*role.permissions.filter(codename="add_policy"))
    assert bootstrap() == ["role governance-admins given governance.add_policy"]
    assert _permissions("governance-admins") == set(GOVERNANCE_ADMIN_PERMISSIONS)


def test_a_policy_a_governance_admin_changed_or_deleted_is_left_as_they_left_it():
    Policy.objects.filter(name="no-compensation-questions").update(enabled=False, priority=99)
    assert bootstrap() == []
    assert Policy.objects.filter(name="no-compensation-questions", enabled=False, priority=99).exists()
    Policy.objects.filter(name="no-compensation-questions").delete()
    assert bootstrap() == ["policy no-compensation-questions created"]  # a default that is gone comes back


def test_the_roles_follow_the_role_settings(settings):
    settings.WARRANT = {**settings.WARRANT, "COMPLIANCE_ROLE": "audit", "GOVERNANCE_ADMIN_ROLE": "platform-team",
                        "TAINT_APPROVER_ROLE": "security"}
    changes = bootstrap()
    assert {"role security created", "role audit created", "role platform-team created"} <= set(changes)
    assert _permissions("platform-team") == set(GOVERNANCE_ADMIN_PERMISSIONS)


def test_a_role_setting_left_empty_makes_no_nameless_role(settings):
    settings.WARRANT = {**settings.WARRANT, "TAINT_APPROVER_ROLE": ""}
    assert bootstrap() == []
    assert not Group.objects.filter(name="").exists()


def test_the_first_admin_from_the_environment_is_a_superuser_in_the_governance_admin_role(admin_env):
    assert _bootstrap().splitlines() == ["governance admin ada created", "1 change(s) made."]
    ada = get_user_model().objects.get(username="ada")
    assert (ada.email, ada.is_staff, ada.is_superuser, ada.is_active) == ("ada@example.org", True, True, True)
    assert ada.check_password(PASSWORD)  # the file's trailing line break is not part of it
    assert list(ada.groups.values_list("name", flat=True)) == ["governance-admins"]


def test_the_password_may_come_from_the_environment_itself(admin_env):
    admin_env.delenv("WARRANT_ADMIN_PASSWORD_FILE")
    admin_env.setenv("WARRANT_ADMIN_PASSWORD", PASSWORD)
    _bootstrap()
    assert get_user_model().objects.get(username="ada").check_password(PASSWORD)


def test_a_named_admin_without_a_password_is_refused_and_nothing_is_written(admin_env):
    admin_env.delenv("WARRANT_ADMIN_PASSWORD_FILE")
    Group.objects.get(name="compliance").delete()
    with pytest.raises(CommandError, match="no password for the new governance admin 'ada'"):
        _bootstrap()
    assert not Group.objects.filter(name="compliance").exists()
    assert not get_user_model().objects.filter(username="ada").exists()


def test_a_password_the_validators_refuse_is_refused_and_nothing_is_written(admin_env, tmp_path):
    (tmp_path / "short").write_text("abc")
    Group.objects.get(name="compliance").delete()
    with pytest.raises(CommandError, match="the password is refused: This password is too short"):
        _bootstrap("--password-file", str(tmp_path / "short"))
    assert not Group.objects.filter(name="compliance").exists()  # the roles made first were rolled back
    assert not get_user_model().objects.filter(username="ada").exists()


def test_an_unreadable_password_file_is_named(admin_env, tmp_path):
    with pytest.raises(CommandError, match="cannot read the password file .*missing"):
        _bootstrap("--password-file", str(tmp_path / "missing"))


def test_an_account_that_exists_is_never_changed(admin_env):
    ada = get_user_model().objects.create_user("ada", password="an older password of hers")
    get_user_model().objects.filter(is_superuser=True).update(is_active=False)  # the demo's admin gone
    err = io.StringIO()
    call_command("warrant_bootstrap", "--noinput", stdout=io.StringIO(), stderr=err)
    ada.refresh_from_db()
    assert ada.check_password("an older password of hers") and not ada.is_superuser and not ada.groups.exists()
    assert "'ada' exists but is neither a superuser nor in the governance admin role" in err.getvalue()


def test_with_no_governance_admin_and_none_named_it_fails(admin_env):
    for name in ADMIN_VARIABLES:
        admin_env.delenv(name, raising=False)
    get_user_model().objects.update(is_active=False)
    with pytest.raises(CommandError, match="there is no governance admin yet: set WARRANT_ADMIN_USERNAME"):
        _bootstrap()


# --- a fresh database, as a deployment has it: manage.py processes on a SQLite file --------------

def _env(data_dir: Path, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WARRANT_ADMIN_", "DATABASE_URL", "CELERY_"))}
    return {**env, "DJANGO_DEBUG": "1", "WARRANT_DATA_DIR": str(data_dir), "WARRANT_TEST_FAST_HASHER": "1", **extra}


@pytest.fixture(scope="module")
def migrated(tmp_path_factory) -> Path:
    """A SQLite file with every migration applied and nothing else."""
    data = tmp_path_factory.mktemp("migrated")
    subprocess.run([*MANAGE, "migrate", "--noinput"], env=_env(data), cwd=ROOT, check=True, capture_output=True,
                   timeout=300)
    return data / "warrant.sqlite3"


@pytest.fixture
def fresh(migrated, tmp_path) -> Path:
    shutil.copy(migrated, tmp_path / "warrant.sqlite3")
    return tmp_path


def _rows(data_dir: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(data_dir / "warrant.sqlite3") as db:
        return db.execute(sql).fetchall()


def _dump(data_dir: Path) -> list[str]:
    with sqlite3.connect(data_dir / "warrant.sqlite3") as db:
        return list(db.iterdump())


@pytest.mark.slow
def test_on_a_fresh_database_it_makes_everything_once_and_a_second_run_changes_nothing(fresh):
    (fresh / "secret").write_text(PASSWORD + "\n")
    env = _env(fresh, WARRANT_ADMIN_USERNAME="ada", WARRANT_ADMIN_EMAIL="ada@example.org",
               WARRANT_ADMIN_PASSWORD_FILE=str(fresh / "secret"))
    first = subprocess.run([*MANAGE, "warrant_bootstrap", "--noinput"], env=env, cwd=ROOT, capture_output=True,
                           text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    assert "governance admin ada created" in first.stdout and "policy no-compensation-questions created" in first.stdout
    assert sorted(_rows(fresh, "SELECT name FROM auth_group")) == [
        ("compliance",), ("governance-admins",), ("operators",), ("secops",)]
    assert _rows(fresh, "SELECT g.name, t.app_label || '.' || p.codename FROM auth_group_permissions gp "
                        "JOIN auth_group g ON g.id = gp.group_id JOIN auth_permission p ON p.id = gp.permission_id "
                        "JOIN django_content_type t ON t.id = p.content_type_id WHERE g.name = 'operators'") == [
        ("operators", "runs.add_run")]
    assert _rows(fresh, "SELECT name, enabled FROM governance_policy") == [("no-compensation-questions", 1)]
    assert _rows(fresh, "SELECT username, is_superuser, is_staff FROM auth_user") == [("ada", 1, 1)]
    # Nothing of the demo: no demo users, tools, agents, model profiles, skills or CRM rows.
    for table in ("agents_tool", "agents_agent", "agents_modelprofile", "skills_skill", "agents_crmaccount"):
        assert _rows(fresh, f"SELECT count(*) FROM {table}") == [(0,)], table
    before = _dump(fresh)
    second = subprocess.run([*MANAGE, "warrant_bootstrap", "--noinput"], env=env, cwd=ROOT, capture_output=True,
                            text=True, timeout=120)
    assert second.returncode == 0, second.stderr
    assert second.stdout.strip() == NOTHING
    assert _dump(fresh) == before  # every table, row for row


@pytest.mark.slow
def test_on_a_terminal_it_asks_for_the_admin(fresh):
    """A real pseudo-terminal: the username and email with input(), the password twice with getpass."""
    env, manage = _env(fresh), MANAGE
    answers = {"Username": "grace", "Email": "grace@example.org", "Password": PASSWORD, "same password": PASSWORD}
    pid, fd = pty.fork()
    if pid == 0:  # the child: its controlling terminal is the pty, as a person's shell would be
        os.chdir(ROOT)
        os.execve(sys.executable, [*manage, "warrant_bootstrap"], env)
    seen, answered, deadline = "", set(), time.monotonic() + 120
    while time.monotonic() < deadline:
        if not select.select([fd], [], [], 1)[0]:
            continue
        try:
            chunk = os.read(fd, 4096).decode(errors="replace")
        except OSError:  # the child closed the terminal: it has ended
            break
        if not chunk:
            break
        seen += chunk
        for prompt, answer in answers.items():
            if prompt not in answered and prompt in seen.rsplit("\n", 1)[-1]:
                os.write(fd, (answer + "\n").encode())
                answered.add(prompt)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, seen
    assert answered == set(answers) and "governance admin grace created" in seen
    assert PASSWORD not in seen  # getpass did not echo it
    check = subprocess.run([*manage, "shell", "-c", (
        "from django.contrib.auth import get_user_model; u = get_user_model().objects.get(username='grace'); "
        f"print(u.email, u.is_superuser, u.check_password({PASSWORD!r}), *u.groups.values_list('name', flat=True))")],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert check.stdout.splitlines()[-1].split() == ["grace@example.org", "True", "True", settings.WARRANT["GOVERNANCE_ADMIN_ROLE"]]
