"""The approver's card says what happens to the call if a worker dies during it (runs.outbox): sent
again under its idempotency key for a tool that honours one, never sent again otherwise."""

import sys

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from agents.models import Tool, ToolSource
from runs.models import ApprovalRequest
from runs.outbox import delivery_note, resend_safe
from tests.runs.helpers import start

pytestmark = pytest.mark.django_db(transaction=True)  # runs advance on commit
QUEUE = "/admin/runs/approvalrequest/queue/"


def _queue_page() -> str:
    client = Client()
    client.force_login(get_user_model().objects.get(username="approver"))
    return client.get(QUEUE).content.decode()


def test_each_card_says_whether_its_call_is_sent_again_after_a_worker_dies(operator):
    email = start(operator, "Send an email to dana.whitfield@example.com about the Acme renewal.")
    deletion = start(operator, "Delete the account Initech.")
    page = _queue_page()
    for run, sentence in ((email, "sent again under the same idempotency key, which send_email honours"),
                          (deletion, "Warrant does not send it again (delete_account cannot be told to act at most once)")):
        approval = ApprovalRequest.objects.get(run_id=run["id"], status="pending")
        card = page[page.index(f'id="delivery-{approval.id}"'):]
        assert sentence in card[:card.index("</div>")], card[:600]


def test_a_python_tool_outside_the_allowed_modules_is_not_imported_to_write_the_card(demo, settings):
    settings.WARRANT = {**settings.WARRANT, "PYTHON_TOOL_MODULES": ["tests.tools.pyfuncs"]}
    source = ToolSource.objects.create(name="elsewhere", kind=ToolSource.Kind.PYTHON)
    # A row the allow-list would refuse on write (a DBA's edit): the card must not import its module.
    Tool.objects.create(name="mystery_send", source=Tool.Source.PYTHON, tool_source=source,
                        handler="tests.admin.never_imported.send", side_effect=True, description="sends")
    assert resend_safe("mystery_send") is False
    assert "cannot be told to act at most once" in delivery_note("mystery_send")
    assert "tests.admin.never_imported" not in sys.modules
