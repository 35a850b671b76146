"""The workbench's receipts: no bulk delete, every look recorded, exports that match the API's, and
tampering shown on the list and by the verify button."""

import csv
import io

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import IntegrityError, connection
from rest_framework.test import APIClient

from runs.models import Receipt, ReceiptAccess
from tests.admin.workbench import browser_as, messages_of
from tests.runs.helpers import start

pytestmark = pytest.mark.django_db(transaction=True)  # runs advance on commit


def test_receipts_offer_no_bulk_delete_even_to_a_superuser(operator):
    start(operator, "List all accounts.")
    client = browser_as("admin")
    response = client.get("/admin/runs/receipt/")
    actions = [name for name, _ in response.context["action_form"].fields["action"].choices]
    assert "delete_selected" not in actions and {"verify_chain", "export_jsonl", "export_csv"} <= set(actions)
    receipt = Receipt.objects.get()
    assert client.post(f"/admin/runs/receipt/{receipt.pk}/change/", {"body": "{}"}).status_code in (200, 403)
    assert Receipt.objects.get(pk=receipt.pk).body == receipt.body
    assert client.get("/admin/runs/receipt/add/").status_code == 403


def test_every_look_at_a_receipt_is_recorded(operator):
    run = start(operator, "List all accounts.")
    client = browser_as("compliance")
    receipt_id = run["receipt_id"]
    client.get("/admin/runs/receipt/")
    client.get(f"/admin/runs/receipt/{receipt_id}/change/")
    verified = client.get(f"/admin/runs/receipt/{receipt_id}/verify/")
    assert "VALID" in verified.content.decode()
    client.get("/admin/runs/receipt/export/?format=jsonl")
    client.post("/admin/runs/receipt/", {"action": "export_csv", "_selected_action": [receipt_id]})
    client.post("/admin/runs/receipt/verify-chain/")
    rows = list(ReceiptAccess.objects.order_by("id").values_list("username", "action", "channel", "format", "receipt_ids"))
    assert rows == [
        ("compliance", "list", "admin", "", [receipt_id]),
        ("compliance", "view", "admin", "", [receipt_id]),
        ("compliance", "verify", "admin", "", [receipt_id]),
        ("compliance", "export", "admin", "jsonl", [receipt_id]),
        ("compliance", "export", "admin", "csv", [receipt_id]),
        ("compliance", "verify_chain", "admin", "", []),
    ]
    with pytest.raises(Exception):
        ReceiptAccess.objects.first().delete()


def test_reading_receipts_over_the_api_is_recorded_too(operator, compliance):
    run = start(operator, "List all accounts.")
    compliance.get(f"/api/v1/receipts/{run['receipt_id']}/")
    compliance.get("/api/v1/receipts/export/?format=csv")
    assert list(ReceiptAccess.objects.order_by("id").values_list("action", "channel", "format")) == [
        ("view", "api", ""), ("export", "api", "csv")]


def test_an_admin_export_larger_than_a_file_is_refused_not_cut_short(demo, operator, monkeypatch):
    monkeypatch.setattr("runs.receipts_export.EXPORT_LIMIT", 1)
    start(operator, "List all accounts.")
    start(operator, "List all accounts.")
    client = browser_as("compliance")
    response = client.get("/admin/runs/receipt/export/?format=csv", follow=True)
    assert response["Content-Type"].startswith("text/html")
    assert "2 receipts are selected; an export file holds at most" in messages_of(response)
    assert not ReceiptAccess.objects.filter(action="export").exists()  # nothing went out, nothing to log
    ids = list(Receipt.objects.order_by("seq").values_list("pk", flat=True))
    response = client.post("/admin/runs/receipt/", {"action": "export_jsonl", "_selected_action": ids[:1]})
    assert response.status_code == 200 and len(response.content.decode().splitlines()) == 1  # one fits


def test_the_admin_export_is_the_api_export_with_formulas_neutralised(demo, compliance):
    user = get_user_model().objects.create_user("=HYPERLINK(evil)", password="x")
    user.groups.add(Group.objects.get(name="operators"))
    api = APIClient()
    api.force_authenticate(user)
    start(api, "List all accounts.")
    client = browser_as("compliance")
    csv_text = client.get("/admin/runs/receipt/export/?format=csv").content.decode()
    assert csv_text == compliance.get("/api/v1/receipts/export/?format=csv").content.decode()
    assert list(csv.DictReader(io.StringIO(csv_text)))[0]["caller"] == "'=HYPERLINK(evil)"
    jsonl = client.get("/admin/runs/receipt/export/?format=jsonl").content.decode()
    assert jsonl == compliance.get("/api/v1/receipts/export/?format=jsonl").content.decode()
    assert client.get("/admin/runs/receipt/export/?format=xlsx").status_code == 302


def _attack(sql: str, params: list) -> None:
    """What an attacker with the database file does: drop the append-only triggers, write, restore them."""
    from runs import append_only

    with connection.cursor() as cursor:
        append_only.sqlite_drop(cursor)
        cursor.execute(sql, params)
        append_only.sqlite_create(cursor)


def test_a_tampered_receipt_is_marked_broken_and_the_button_lists_every_failure(operator):
    for _ in range(3):
        start(operator, "List all accounts.")
    second = Receipt.objects.get(seq=2)
    with pytest.raises(IntegrityError), connection.cursor() as cursor:  # the database itself refuses
        cursor.execute("UPDATE runs_receipt SET body = '{}' WHERE id = %s", [second.id.hex])
    _attack("UPDATE runs_receipt SET body = %s WHERE id = %s", [second.body.replace("operator", "intruder"),
                                                                 second.id.hex])
    client = browser_as("compliance")
    page = client.get("/admin/runs/receipt/").content.decode()
    assert "BROKEN: hash is not sha256(prev_hash + body): the body or a hash was edited" in page
    response = client.post("/admin/runs/receipt/verify-chain/", follow=True)
    shown = messages_of(response)
    assert "Evidence BROKEN" in shown and f"chain: receipt #2 ({second.id})" in shown


def test_the_receipt_list_checks_after_the_newest_signed_checkpoint_and_the_button_everything(operator, settings):
    settings.WARRANT_WITNESS_INTERVAL_SECONDS = 0
    for _ in range(2):
        start(operator, "List all accounts.")  # each seal is witnessed: checkpoints at #1 and #2
    client = browser_as("compliance")
    assert "Chain verified: 2 receipt(s) signed and linked (#1 to #2 vouched for by a signed checkpoint)" in (
        client.get("/admin/runs/receipt/").content.decode())
    first = Receipt.objects.get(seq=1)
    _attack("UPDATE runs_run SET output = 'nothing' WHERE id = %s", [first.run_id.hex])
    assert "Chain verified" in client.get("/admin/runs/receipt/").content.decode()  # rows are not the page's check
    response = client.post("/admin/runs/receipt/verify-chain/", follow=True)
    assert "the run's output differs from the one sealed" in messages_of(response)


# --- governance -------------------------------------------------------------------------
