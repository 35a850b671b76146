"""Small helpers for run tests: start a run through the API and read what it did."""

from runs.models import Run


def start(client, text: str, *, agent: str = "crm-assistant", **extra):
    response = client.post("/api/v1/runs/", {"agent": agent, "input": text, **extra}, format="json")
    assert response.status_code in (200, 201), response.content
    return response.json()


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
