from django.core.management.base import BaseCommand, CommandError

from runs.verification import receipt_verify_chain
from runs.witness import witness_catch_up
from warrant_verify.chain import default_workers


class Command(BaseCommand):
    help = ("Verify every receipt (signatures, chain), each run's row, trace and approvals against its receipt, "
            "that every finished run has one, and the chain against the witness's checkpoints. Prints one line "
            "per failure (check: record: reason) and exits 1 if there is any.")

    def add_arguments(self, parser):
        parser.add_argument("--workers", type=int, default=default_workers(),
                            help="Processes that share the signature checks of a long chain (default: the cores, "
                                 "at most 4).")
        parser.add_argument("--catch-up", action="store_true",
                            help="First bring the witness sinks up to the chain's head (as the reconciler does).")

    def handle(self, *args, catch_up=False, workers=1, **options):
        if catch_up:
            for name, outcome in witness_catch_up().items():
                self.stdout.write(f"witness {name}: {outcome}")
        result = receipt_verify_chain(workers=max(1, workers))
        if not result.valid:
            for problem in result.failures:
                self.stderr.write(str(problem))
            raise CommandError(f"evidence BROKEN: {len(result.failures)} failure(s); {result.checked} receipt(s) read",
                               returncode=1)
        self.stdout.write(self.style.SUCCESS(f"evidence intact: {result.reason}"))
