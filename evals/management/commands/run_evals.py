"""Run the golden set: exit 0 when the pass rate reaches the threshold, 1 below it, 2 for bad arguments."""

from django.core.management.base import BaseCommand, CommandError

from evals.runner import InvalidEvalRequest, check_request, run_evals


class Command(BaseCommand):
    help = "Run the enabled golden cases in isolation; exit 0 at or above the threshold, 1 below it, 2 on bad arguments."

    def add_arguments(self, parser):
        parser.add_argument("--agent", default=None, help="An agent's slug (default: every agent's cases).")
        parser.add_argument("--threshold", default="1.0", help="Share of cases that must pass, 0 to 1 (default 1.0).")
        parser.add_argument("--profile", default="", help="A model profile to run every case on (default: each agent's).")

    def handle(self, *args, agent, threshold, profile, **options):
        try:
            check_request(agent_slug=agent, threshold=threshold, profile=profile)
        except InvalidEvalRequest as exc:
            raise CommandError(exc.message, returncode=2) from None
        eval_run = run_evals(agent_slug=agent, threshold=threshold, profile=profile)
        for result in eval_run.results.order_by("agent_slug", "case_name"):
            mark = "pass" if result.passed else "FAIL"
            self.stdout.write(f"{mark}  {result.agent_slug}/{result.case_name}: {result.status}")
            for failure in result.failures:
                self.stdout.write(f"        {failure['expectation']}: expected {failure['expected']!r}, "
                                  f"got {failure['actual']!r}")
        rate = f"{eval_run.pass_rate:.0%}" if eval_run.total else "no cases"
        self.stdout.write(f"eval run {eval_run.id}: {eval_run.passed}/{eval_run.total} passed ({rate}), "
                          f"threshold {eval_run.threshold:g}: {eval_run.status}")
        if eval_run.status != eval_run.Status.PASSED:
            raise CommandError(f"the golden set is below the threshold ({rate} < {eval_run.threshold:g})", returncode=1)
