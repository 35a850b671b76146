from django.core.management.base import BaseCommand, CommandError

from runs.receipts import receipt_verify_chain


class Command(BaseCommand):
    help = "Recompute the whole receipt hash chain; name the first broken receipt and exit 1 if any."

    def handle(self, *args, **options):
        result = receipt_verify_chain()
        if not result.valid:
            raise CommandError(
                f"receipt chain BROKEN at #{result.seq} (receipt {result.receipt}): {result.reason}; "
                f"{result.checked} receipts before it verified", returncode=1)
        self.stdout.write(self.style.SUCCESS(f"receipt chain intact: {result.checked} receipts verified"))
