"""Runs through the real run services (run_start / run_advance, embedded default) on a given profile."""

from django.contrib.auth.models import User

from agents.models import Agent, ModelProfile
from agents.services import agent_publish
from runs import services
from runs.models import ApprovalRequest, Receipt, Run


def use_profile(name: str, *, backend: str, base_url: str = "", fallbacks=(), **fields) -> ModelProfile:
    """Point the demo agent at a new profile and publish it, as an admin would."""
    for fallback in fallbacks:
        ModelProfile.objects.get_or_create(name=fallback, defaults={"backend": "scripted", "model": "scripted-1"})
    profile = ModelProfile.objects.create(
        name=name, backend=backend, base_url=base_url, model=fields.pop("model", "test-model"),
        connect_timeout=2.0, read_timeout=fields.pop("read_timeout", 5.0), max_retries=fields.pop("max_retries", 1),
        fallbacks=list(fallbacks), **fields)
    agent = Agent.objects.get(slug="crm-assistant")
    agent.model_profile = profile
    agent.save()
    agent_publish(agent=agent)
    return profile


def advance(run: Run) -> Run:
    """What the queue does: advance until the run parks or ends."""
    for _ in range(50):
        services.run_advance(run_id=run.id)
        run.refresh_from_db()
        if run.status not in ("queued", "running"):
            return run
    raise AssertionError(f"run {run.id} did not settle: {run.status}")


def ask(text: str, *, caller: str = "operator") -> Run:
    run, _ = services.run_start(agent_slug="crm-assistant", input_text=text, caller=User.objects.get(username=caller))
    return advance(run)


def decide(run: Run, *, approve: bool) -> Run:
    approval = ApprovalRequest.objects.get(run=run, status="pending")
    services.approval_decide(via="session", approval_id=approval.id, user=User.objects.get(username="approver"), approve=approve,
                             reason="" if approve else "not this one")
    return advance(run)


def receipt_body(run: Run) -> dict:
    import json

    return json.loads(Receipt.objects.get(run=run).body)


def kinds(run: Run, kind: str) -> list[dict]:
    return [e.data for e in run.events.filter(kind=kind).order_by("seq")]
