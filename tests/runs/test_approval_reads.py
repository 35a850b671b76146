"""What a decision and a receipt read of an approval: the run's first event once a process, a
run's requests with their decisions in one statement, and the same answers as before."""

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext

from core.api_errors import Forbidden
from runs import approvals, services
from runs.models import ApprovalRequest
from runs.receipts import approvals_of

pytestmark = pytest.mark.django_db


def _user(name):
    return get_user_model().objects.get(username=name)


def _parked(capture) -> ApprovalRequest:
    with capture(execute=True):  # the park's notice asks who may decide, as a decision does
        run, _ = services.run_start(agent_slug="crm-assistant", input_text="Delete the account Initech.",
                                    caller=_user("operator"))
        services.run_advance(run_id=run.id)
    return ApprovalRequest.objects.get(run=run)


def _event_reads(queries) -> int:
    return sum(1 for q in queries if '"runs_runevent"' in q["sql"] and q["sql"].lstrip().startswith("SELECT"))


def test_the_decision_asks_the_run_created_event_no_second_time(demo, django_capture_on_commit_callbacks):
    approval = _parked(django_capture_on_commit_callbacks)
    assert str(approval.run_id) in approvals._FIRST_EVENT_NAMES  # run_start kept them as it wrote them
    with CaptureQueriesContext(connection) as seen, django_capture_on_commit_callbacks(execute=False):
        approvals.approval_decide(approval_id=approval.id, user=_user("approver"), approve=True, reason="ok",
                                  via="session")
    assert _event_reads(seen.captured_queries) == 0


def test_the_caller_the_first_event_names_is_refused_from_what_was_kept(demo, django_capture_on_commit_callbacks):
    approval = _parked(django_capture_on_commit_callbacks)
    # What the first event named, as kept: the check refuses from it, without reading the event.
    approvals._FIRST_EVENT_NAMES[str(approval.run_id)] = frozenset({"approver"})
    approval.run.snapshot_caller = "operator"
    with pytest.raises(Forbidden, match="own run"):
        approvals.check_approval_decide(approval=approval, user=_user("approver"))
    approvals._FIRST_EVENT_NAMES.pop(str(approval.run_id))
    with CaptureQueriesContext(connection) as seen:
        assert "operator" in approvals._callers_recorded(approval.run)
    assert _event_reads(seen.captured_queries) == 1  # read again once it is not kept


def test_a_runs_requests_and_their_decisions_come_in_one_statement(demo, django_capture_on_commit_callbacks):
    approval = _parked(django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=False):
        approvals.approval_decide(approval_id=approval.id, user=_user("approver"), approve=False,
                                  reason="not this quarter", via="session")
    with CaptureQueriesContext(connection) as seen:
        [bound] = approvals_of(approval.run_id)
    assert len(seen.captured_queries) == 1
    assert bound["id"] == str(approval.id) and bound["decision"] == "denied" and bound["decided_by"] == "approver"
    assert bound["reason"] == "not this quarter" and bound["arguments_sha256"] == approval.arguments_sha256
    assert [(d["by"], d["decision"]) for d in bound["decisions"]] == [("approver", "denied")]
