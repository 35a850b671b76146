"""Django for a benchmark process: production settings (DEBUG off), a database of its own, the demo."""

import base64
import os
from pathlib import Path

AGENT, APPROVAL_AGENT = "bench-agent", "bench-approval"
TOOLS = ["get_account", "list_open_tickets", "compute_health_score"]


def configure(workdir: Path, *, database_url: str = "", broker_url: str = "", settings: str = "warrant.settings") -> None:
    """Environment only: call before anything imports Django settings (also inherited by children)."""
    workdir.mkdir(parents=True, exist_ok=True)
    os.environ.update({
        "DJANGO_SETTINGS_MODULE": settings,
        "DJANGO_DEBUG": "0",  # DEBUG keeps every SQL query in memory: not what production runs
        "DJANGO_SECRET_KEY": "bench-only-not-a-secret",
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
        "DJANGO_SECURE_SSL_REDIRECT": "0",  # plain HTTP on loopback; production redirects to TLS
        "WARRANT_DATA_DIR": str(workdir),
        "WARRANT_LOG_LEVEL": "WARNING",
        # A deployment has a mail server: approval notices are built and handed to a backend that keeps
        # them in memory, instead of each failing to reach localhost:25 and being queued for a retry.
        "DJANGO_EMAIL_BACKEND": "django.core.mail.backends.locmem.EmailBackend",
        "WARRANT_TEST_FAST_HASHER": "1",
        "WARRANT_THROTTLE_RUN_CREATE": "100000000/min",
        "WARRANT_THROTTLE_APPROVAL_DECIDE": "100000000/min",
        # A profile names its backend; the deployment (here, the bench) registers its own by name.
        "WARRANT_MODEL_BACKENDS": "bench-script=bench.script.WarrantScriptedModel",
    })
    # Production mode needs a receipt signing key; children inherit the parent's (one chain, one key).
    os.environ.setdefault("WARRANT_RECEIPT_SIGNING_KEY", base64.b64encode(os.urandom(32)).decode())
    for name, value in (("DATABASE_URL", database_url), ("CELERY_BROKER_URL", broker_url)):
        if value:
            os.environ[name] = value
        else:
            os.environ.pop(name, None)


def setup(workdir: Path, **kwargs) -> None:
    configure(workdir, **kwargs)
    import django

    django.setup()


def prepare() -> None:
    """Migrate, load the demo, add the bench agents and the approval policy of scenario 2.

    On SQLite, a database prepared once by the runner (BENCH_SQLITE_TEMPLATE) is copied instead."""
    import shutil

    from django.conf import settings
    from django.core.management import call_command

    template, database = os.environ.get("BENCH_SQLITE_TEMPLATE"), settings.DATABASES["default"]
    if template and database["ENGINE"].endswith("sqlite3") and Path(template).exists():
        shutil.copyfile(template, database["NAME"])
        return
    call_command("migrate", verbosity=0, interactive=False)
    from agents.models import Agent, ModelProfile, Tool
    from agents.services import agent_publish
    from governance.models import Policy
    from governance.services import policy_create
    from runs.demo import INSTRUCTIONS, demo_load

    demo_load()
    profile, _ = ModelProfile.objects.get_or_create(
        name="bench-script", defaults={"backend": "bench-script", "model": "bench-script-1"})
    for slug in (AGENT, APPROVAL_AGENT):
        agent, _ = Agent.objects.get_or_create(slug=slug, defaults={
            "name": slug, "instructions": INSTRUCTIONS, "model_profile": profile})
        agent.tools.set(Tool.objects.filter(name__in=TOOLS))
        agent_publish(agent=agent)
    if not Policy.objects.filter(name="bench-health-score-approval").exists():
        policy_create(values={
            "name": "bench-health-score-approval", "type": "tool_approval", "priority": 10,
            "target_tools": ["compute_health_score"], "approver_role": "secops", "agents": [APPROVAL_AGENT],
        })
