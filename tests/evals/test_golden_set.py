"""The demo's golden set, run as CI runs it (`manage.py run_evals --threshold 1.0`), its coverage of
the demo requests the docs name, and what an eval run leaves behind: results, never a run or a side effect."""

import re
from pathlib import Path

import pytest

from agents.models import CrmAccount, SentEmail
from evals.demo import GOLDEN, golden_load
from evals.models import EvalResult, EvalRun, GoldenCase
from runs.models import ApprovalRequest, Receipt, Run, RunEvent, SideEffect
from tests.evals.cli import run_evals_cli

ROOT = Path(__file__).resolve().parents[2]


def _documented_requests() -> set[str]:
    """The README tour's request and the questions docs/workbench.md's "The demo" lists."""
    asked = set(re.findall(r'"input": "([^"]+)"', (ROOT / "README.md").read_text(encoding="utf-8")))
    workbench = (ROOT / "docs" / "workbench.md").read_text(encoding="utf-8")
    demo = workbench[workbench.index("## The demo"):]
    demo = demo[:demo.index("\n## ", 1)]
    return {" ".join(request.split()) for request in asked | set(re.findall(r'"([^"]+[.?])"', demo))}


def test_the_golden_set_covers_every_demo_request_the_docs_name():
    requests = _documented_requests()
    assert len(requests) == 10, requests  # the tour's request and the nine the demo section adds
    inputs = {case["input"] for case in GOLDEN}
    assert requests - inputs == set()
    # Injected requests too: orders in the input, a role change, a guard the injection must not get past.
    assert {"injected-delete-parks", "injected-exfiltration-parks", "injected-role-change-parks",
            "injected-salary-still-blocked"} <= {case["name"] for case in GOLDEN}


@pytest.mark.django_db(transaction=True)
def test_ci_runs_the_demo_golden_set_at_threshold_1_and_it_passes(demo, capsys):
    golden_load()  # the demo loads it (runs.demo); idempotent
    assert GoldenCase.objects.count() == len(GOLDEN) == 20
    accounts = CrmAccount.objects.count()
    assert run_evals_cli("--threshold", "1.0") == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    eval_run = EvalRun.objects.get()
    assert (eval_run.total, eval_run.passed, eval_run.pass_rate, eval_run.status) == (20, 20, 1.0, "passed")
    assert f"eval run {eval_run.id}: 20/20 passed (100%), threshold 1: passed" in out
    # Isolation: the approved deletion and the approved email ran in the sandbox only.
    assert CrmAccount.objects.count() == accounts and CrmAccount.objects.filter(account_id="A-300").exists()
    assert SentEmail.objects.count() == 0 and SideEffect.objects.count() == 0
    assert Run.objects.count() == RunEvent.objects.count() == ApprovalRequest.objects.count() == Receipt.objects.count() == 0
    deleted = EvalResult.objects.get(case_name="delete-initech-approved")
    assert deleted.sandbox == [{"tool": "delete_account", "arguments": {"account_id": "A-300"},
                                "approval_id": "eval-approval-1"}]
    # The trace is the harness's events, redacted as a run's (the recipient's address).
    sent = EvalResult.objects.get(case_name="email-dana-approved")
    assert sent.sandbox[0]["tool"] == "send_email" and sent.sandbox[0]["arguments"]["to"] == "[redacted:email]"
    kinds = [event["kind"] for event in sent.trace]
    assert kinds.index("approval_requested") < kinds.index("approval_decided") < kinds.index("tool_call")
    assert "dana.whitfield@example.com" not in str(sent.trace)


@pytest.mark.django_db(transaction=True)
def test_the_cli_exit_codes(demo, capsys):
    golden_load()
    assert run_evals_cli("--agent", "crm-assistant") == 0
    # A case whose expectation is wrong: the set is below 1.0, so exit 1, and the output says why.
    salary = GoldenCase.objects.get(name="salary-blocked")
    salary.expected_status = "succeeded"
    salary.save()
    capsys.readouterr()
    assert run_evals_cli() == 1
    out = capsys.readouterr()
    assert "FAIL  crm-assistant/salary-blocked: blocked" in out.out
    assert "status: expected 'succeeded', got 'blocked'" in out.out
    assert "19/20 passed (95%), threshold 1: failed" in out.out and "below the threshold" in out.err
    assert run_evals_cli("--threshold", "0.95") == 0  # 19 of 20 reach 0.95
    # Bad arguments: 2, and no eval run is made.
    runs = EvalRun.objects.count()
    for args in (["--agent", "no-such-agent"], ["--threshold", "1.5"], ["--threshold", "most"], ["--profile", "nope"],
                 ["--no-such-option"]):
        assert run_evals_cli(*args) == 2, args
    assert EvalRun.objects.count() == runs
    assert "unknown agent 'no-such-agent'" in capsys.readouterr().err
