"""Small helpers for run tests: start a run (through the API, or of the replayer's script), change
the demo's agent, and read what a run did."""

import json

from django.contrib.auth.models import User

from runs import services
from runs.models import Run


def start(client, text: str, *, agent: str = "crm-assistant", **extra):
    response = client.post("/api/v1/runs/", {"agent": agent, "input": text, **extra}, format="json")
    assert response.status_code in (200, 201), response.content
    return response.json()


def run_script(script: dict, *, user: str = "operator") -> Run:
    """A run of the agent "replayer" (the replay_agent fixture), whose model follows `script`,
    advanced until it finishes or parks."""
    run, _ = services.run_start(agent_slug="replayer", input_text=json.dumps(script),
                                caller=User.objects.get(username=user))
    return advance(run)


def advance(run: Run) -> Run:
    """Advance the run as workers would: one whose time slice ran out (a slow server start on a busy
    machine) is queued again and picked up by the next delivery."""
    for _ in range(20):
        services.run_advance(run_id=run.id)
        run.refresh_from_db()
        if run.status not in ("queued", "running"):
            break
    return run


def parked(text: str = "Delete the account Initech.", *, user: str = "operator"):
    """A run of the demo's crm-assistant on `text` that parks for approval: (run, its pending request)."""
    run, _ = services.run_start(agent_slug="crm-assistant", input_text=text, caller=User.objects.get(username=user))
    run = advance(run)
    assert run.status == "awaiting_approval", run.status
    return run, run.approvals.get(status="pending")


def republish(slug: str = "crm-assistant", **changes):
    """Change the agent's draft and publish it (new runs use the new version): the version."""
    from agents.models import Agent
    from agents.services import agent_publish

    agent = Agent.objects.get(slug=slug)
    for name, value in changes.items():
        setattr(agent, name, value)
    agent.save()
    return agent_publish(agent=agent)[0]


def events(run_id, kind: str | None = None) -> list[dict]:
    run = Run.objects.get(id=run_id)
    rows = run.events.order_by("seq")
    if kind:
        rows = rows.filter(kind=kind)
    return [{"kind": e.kind, **e.data} for e in rows]


def tools_called(run_id) -> list[str]:
    """Tool calls that actually ran (ok or failed inside the tool), in order."""
    return [e["name"] for e in events(run_id, "tool_call") if e["result"].get("code") not in
            ("not_permitted", "unknown_tool", "invalid_arguments", "denied", "expired")]
