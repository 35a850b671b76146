"""The one tool `make prod-smoke` registers, as a governance admin registers a Python function
(a `python` tool source at this dotted path, allowed by WARRANT_PYTHON_TOOL_MODULES). It changes
nothing outside; the smoke marks it side-effecting, so a policy can hold its calls for approval."""

__all__ = ["send_notice"]


def send_notice(to: str, topic: str) -> dict:
    """Send a notice by email to one address, about one topic."""
    return {"sent": True, "to": to, "topic": topic}
