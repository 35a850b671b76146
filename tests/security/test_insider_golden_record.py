"""`manage.py run_evals --record --by USERNAME` proposes in the name of whoever --by names.

The command cannot tell who typed it: anyone with a shell on the server may name another governance
admin as the proposer, then approve the proposal as themselves in the workbench, and the case's
version would read as two admins' work. A shell already holds the database, so the command cannot
stop that; what it can do is say where the proposal came from. The proposal and the version written
when it is approved name the command and the operating-system user who ran it, as `issue_token`
does for the tokens it issues.
"""

import os
import pwd

import pytest

from evals import proposals
from evals.demo import golden_load
from evals.models import GoldenCase, GoldenCaseProposal, GoldenCaseVersion
from tests import factories
from tests.evals.cli import run_evals_cli

pytestmark = pytest.mark.django_db(transaction=True)  # the command closes the connection, as a shell's would


def test_a_recording_proposed_from_the_shell_names_the_os_user_who_ran_it(demo, monkeypatch):
    # The name comes from the process's uid, not from the environment the shell's user sets.
    monkeypatch.setenv("USER", "someone-else")
    monkeypatch.setenv("LOGNAME", "someone-else")
    golden_load()
    GoldenCase.objects.filter(name="list-accounts").update(recordings=[])
    named = factories.governance_admin()
    assert run_evals_cli("--record", "--agent", "crm-assistant", "--case", "list-accounts", "--by",
                         named.username) == 0
    proposal = GoldenCaseProposal.objects.get(case_name="list-accounts")
    said = f"manage.py run_evals --record (OS user {pwd.getpwuid(os.getuid()).pw_name})"
    assert proposal.proposed_by == named and proposal.note == said

    proposals.approve(proposal, user=factories.governance_admin())
    version = GoldenCaseVersion.objects.filter(case_name="list-accounts").order_by("-version").first()
    assert version.proposed_by == named and said in version.note
