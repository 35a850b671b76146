"""WARRANT_WITNESS_INTERVAL_SECONDS > 0 (the default, 1 s): seals within the interval share the
next checkpoint instead of each sending one, and the reconciler's catch-up witnesses a head no later
seal did. Every receipt still ends up vouched for by a signed checkpoint in the witness file."""

import json

from django.conf import settings as django_settings
from django.contrib.auth.models import User
from django.core.management import call_command

from runs import services, witness
from runs.models import Receipt, ReceiptCheckpoint
from runs.witness import witness_catch_up, witness_status


def _seal(operator, text: str, capture) -> None:
    with capture(execute=True):  # the run's task, then the seal's witness hook, as after a real commit
        run, _ = services.run_start(agent_slug="crm-assistant", input_text=text, caller=operator)
    if not django_settings.CELERY_TASK_ALWAYS_EAGER:
        services.run_advance(run_id=run.id)


def _receipt_seqs(path) -> list[int]:
    """The receipts' checkpoints in the witness file (other chains' heads go there too)."""
    return [line["seq"] for line in map(json.loads, path.read_text().splitlines()) if line["kind"] == "warrant.checkpoint"]


def test_seals_within_the_interval_share_a_checkpoint_and_the_catch_up_witnesses_the_head(
        demo, settings, tmp_path, django_capture_on_commit_callbacks):
    witness_file = tmp_path / "witness.jsonl"
    settings.WARRANT_WITNESS_FILE = str(witness_file)
    settings.WARRANT_WITNESS_INTERVAL_SECONDS = 3600  # nothing after the first seal is sent before the catch-up
    operator = User.objects.get(username="operator")
    first_seq = (Receipt.objects.order_by("-seq").values_list("seq", flat=True).first() or 0) + 1
    checkpoints_before = ReceiptCheckpoint.objects.count()

    for i in range(3):
        _seal(operator, f"List all accounts. ({i})", django_capture_on_commit_callbacks)

    head = first_seq + 2
    assert Receipt.objects.order_by("-seq").values_list("seq", flat=True).first() == head
    # Only the first seal of the interval made (and sent) a checkpoint; the next two wait.
    assert ReceiptCheckpoint.objects.count() == checkpoints_before + 1
    assert _receipt_seqs(witness_file) == [first_seq]
    assert witness_status()["sinks"]["file"]["behind_receipts"] == 2

    assert witness_catch_up()["file"] == f"delivered #{head}"  # (and the demo's trust chain: "trust-file")
    assert _receipt_seqs(witness_file) == [first_seq, head]
    assert witness_status()["sinks"]["file"]["behind_receipts"] == 0
    call_command("verify_receipts")  # the head's checkpoint vouches for the receipts between


def test_a_seal_within_the_interval_of_a_checkpoint_this_process_made_asks_the_database_nothing(
        demo, settings, tmp_path, django_capture_on_commit_callbacks, django_assert_num_queries):
    settings.WARRANT_WITNESS_FILE = str(tmp_path / "witness.jsonl")
    settings.WARRANT_WITNESS_INTERVAL_SECONDS = 3600
    _seal(User.objects.get(username="operator"), "List all accounts.", django_capture_on_commit_callbacks)
    head = Receipt.objects.order_by("-seq").values_list("seq", "hash").first()
    with django_assert_num_queries(0):
        assert witness.after_seal(*head) is None
    assert witness.witness_publish(head=head) == {"file": "later"}
