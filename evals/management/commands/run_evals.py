"""Run the golden set: exit 0 when the pass rate reaches the threshold, 1 below it, 2 for bad arguments.
With --record --by USERNAME, record the cases instead, each a proposal of that governance admin which
another approves (evals.proposals): exit 0 when every one was proposed, 1 when one was refused. The
command cannot authenticate --by, so each proposal also names the OS user who ran it."""


from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from core.api_errors import DomainError
from core.permissions import is_governance_admin
from core.shell import os_user
from evals.proposals import propose_record
from evals.runner import InvalidEvalRequest, cases_for, check_request, run_evals


class Command(BaseCommand):
    help = ("Run the enabled golden cases in isolation; exit 0 at or above the threshold, 1 below it, 2 on bad "
            "arguments. --record --by USERNAME: run them against the live data and propose what the read-only "
            "tools answered, for another governance admin to approve.")

    def add_arguments(self, parser):
        parser.add_argument("--agent", default=None, help="An agent's slug (default: every agent's cases).")
        parser.add_argument("--threshold", default="1.0", help="Share of cases that must pass, 0 to 1 (default 1.0).")
        parser.add_argument("--profile", default="", help="A model profile to run every case on (default: each agent's).")
        parser.add_argument("--record", action="store_true",
                            help="Record the enabled cases (of --agent, or --case) against the live data: each a "
                                 "proposal (the case passes with it), kept once another governance admin approves it.")
        parser.add_argument("--by", default="", metavar="USERNAME",
                            help="With --record: the governance admin who proposes the recordings.")
        parser.add_argument("--case", action="append", default=[], metavar="NAME",
                            help="With --record: only this case (repeatable).")

    def handle(self, *args, agent, threshold, profile, record, case, by, **options):
        try:
            check_request(agent_slug=agent, threshold=threshold, profile=profile)
        except InvalidEvalRequest as exc:
            raise CommandError(exc.message, returncode=2) from None
        if case and not (record and agent):
            raise CommandError("--case goes with --record and --agent (a case's name is unique for its agent)",
                               returncode=2)
        if record and profile:
            raise CommandError("--profile does not go with --record: a case is recorded on its agent's own model",
                               returncode=2)
        if record:
            return self._record(agent, case, self._proposer(by))
        eval_run = run_evals(agent_slug=agent, threshold=threshold, profile=profile)
        for result in eval_run.results.order_by("agent_slug", "case_name"):
            mark = "pass" if result.passed else "FAIL"
            self.stdout.write(f"{mark}  {result.agent_slug}/{result.case_name}: {result.status}")
            for failure in result.failures:
                self.stdout.write(f"        {failure['expectation']}: expected {failure['expected']!r}, "
                                  f"got {failure['actual']!r}")
            for call in result.actual.get("unrecorded", []):
                self.stdout.write(f"        unrecorded: {call['tool']} {call['arguments']!r} answered live")
        rate = f"{eval_run.pass_rate:.0%}" if eval_run.total else "no cases"
        self.stdout.write(f"eval run {eval_run.id}: {eval_run.passed}/{eval_run.total} passed ({rate}), "
                          f"threshold {eval_run.threshold:g}: {eval_run.status}")
        if eval_run.status != eval_run.Status.PASSED:
            raise CommandError(f"the golden set is below the threshold ({rate} < {eval_run.threshold:g})", returncode=1)

    @staticmethod
    def _proposer(username: str):
        user = get_user_model().objects.filter(username=username, is_active=True).first() if username else None
        if not is_governance_admin(user):
            raise CommandError("--record needs --by USERNAME, a governance admin: a recording is that admin's proposal, "
                               "which another approves", returncode=2)
        return user

    def _record(self, agent, names, user):
        cases = cases_for(agent)
        if names:
            if missing := sorted(set(names) - {c.name for c in cases}):
                raise CommandError(f"no enabled case named {missing[0]!r} for {agent}", returncode=2)
            cases = [c for c in cases if c.name in names]
        # --by names a governance admin the command cannot authenticate (a shell may name anyone), so
        # the proposal and its version also say who ran it on the server.
        failed, via = 0, f"manage.py run_evals --record (OS user {os_user()})"
        for one in cases:
            try:
                proposal = propose_record(one, user=user, via=via)
            except DomainError as exc:
                failed += 1
                self.stdout.write(f"REFUSED   {one.agent.slug}/{one.name}: {exc.message}")
                continue
            self.stdout.write(f"proposed  {one.agent.slug}/{one.name}: {len(proposal.changes['recordings'])} call(s), "
                              f"proposal {proposal.pk} (another governance admin approves it)")
        self.stdout.write(f"{len(cases) - failed} of {len(cases)} recording(s) proposed")
        if failed or not cases:
            raise CommandError(f"{failed} case(s) not recorded" if cases else "no case to record", returncode=1)
