"""What the workbench's tests share: a signed-in browser by demo username, the messages a page shows, and
a decision posted on an approval request."""

from django.contrib.auth import get_user_model
from django.test import Client

from tests import factories

QUEUE = "/admin/runs/approvalrequest/queue/"


def browser_as(username: str) -> Client:
    """A test-client session signed in as the demo's user of that name."""
    return factories.browser(get_user_model().objects.get(username=username))


def messages_of(response) -> str:
    return " ".join(str(m) for m in response.context["messages"]) if response.context else ""


def decide(client, approval_id, decision: str, reason: str = ""):
    return client.post(f"/admin/runs/approvalrequest/{approval_id}/decide/", {"decision": decision, "reason": reason},
                       follow=True)
