"""manage.py review_check: the review chain verified, and every run the sampling rules sample in
the queue. Exit status 1 when either fails (for a scheduled job that pages someone)."""

from django.core.management.base import BaseCommand, CommandError

from review.completeness import fill_gaps, sampling_gaps
from review.verification import review_verify_chain
from runs.witness import witness_status


class Command(BaseCommand):
    help = "Verify the review chain and find sealed runs the sampling rules sample that have no review item."

    def add_arguments(self, parser):
        parser.add_argument("--fill", action="store_true", help="Sample the runs found missing now.")

    def handle(self, *args, fill=False, **options):
        chain = review_verify_chain()
        self.stdout.write(f"review chain: {'VALID' if chain.valid else 'INVALID'}: {chain.reason}")
        for problem in chain.failures:
            self.stdout.write(f"  {problem}")
        # Where each witness sink stands on the review chain (the reconciler catches them up).
        review = witness_status().get("review") or {"sinks": {}}
        for name, sink in review["sinks"].items():
            state = "current" if sink["ok"] and not sink["behind_records"] else (sink["error"] or "behind")
            self.stdout.write(f"review witness {name}: #{sink['delivered_seq']} of #{review['head_seq']} ({state})")
        gaps = sampling_gaps()
        for gap in gaps:
            why = "; ".join(f"{r['rule']}: {r['reason']}" for r in gap.reasons)
            self.stdout.write(f"not in the queue: run {gap.run_id} (receipt #{gap.receipt_seq}): {why}")
        if gaps and fill:
            self.stdout.write(f"sampled {fill_gaps(gaps)} of them now")
        elif not gaps:
            self.stdout.write("sampling: every run the rules sample is in the queue")
        if not chain.valid or (gaps and not fill):
            raise CommandError("the review chain does not verify" if not chain.valid else
                               f"{len(gaps)} sampled run(s) missing from the review queue")
