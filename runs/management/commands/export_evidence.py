from pathlib import Path
from urllib.parse import urlencode

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from core.shell import os_user
from runs.evidence import (
    EvidenceAccessDenied,
    EvidencePeriodError,
    EvidenceTargetError,
    evidence_bundle_write,
    evidence_period_bound,
)


class Command(BaseCommand):
    help = ("Write the evidence bundle of a period: the receipts of the runs that finished in it (a gap-free piece "
            "of the chain), their trace events, approvals and runs, the signed checkpoints, the policy versions in "
            "force, the public keys, a summary page and a signed manifest. Check it with `python -m warrant_verify`.")

    def add_arguments(self, parser):
        parser.add_argument("--out", required=True,
                            help="a new or empty directory; a path ending in .zip is written as a zip file instead")
        parser.add_argument("--from", dest="period_from", metavar="DATE",
                            help="runs finished at or after this ISO 8601 date or date and time (UTC unless it says)")
        parser.add_argument("--to", dest="period_to", metavar="DATE",
                            help="runs finished before this date or date and time (the end is excluded)")
        parser.add_argument("--user", default=None,
                            help="who the export is recorded under in the receipt access log: a compliance member "
                                 "or superuser (default: the user named like your login)")

    def handle(self, *args, out, period_from, period_to, user, **options):
        try:
            after = evidence_period_bound(text=period_from, name="--from") if period_from is not None else None
            before = evidence_period_bound(text=period_to, name="--to") if period_to is not None else None
        except EvidencePeriodError as exc:
            raise CommandError(str(exc)) from exc
        requested_by = self._user(user)
        # --user is the caller's word: the login that ran the command is recorded beside it.
        note = urlencode({"os_user": os_user()})
        target = Path(out)
        try:
            if target.suffix == ".zip":
                if target.exists():
                    raise EvidenceTargetError(f"{target} exists: a bundle is never written over another file")
                try:
                    with target.open("xb") as handle:
                        plan = evidence_bundle_write(zip_target=handle, created_after=after, created_before=before,
                                                     requested_by=requested_by, note=note)
                except BaseException:
                    target.unlink(missing_ok=True)  # half a zip is no bundle
                    raise
            else:
                plan = evidence_bundle_write(out_dir=target, created_after=after, created_before=before,
                                             requested_by=requested_by, note=note)
        except (EvidencePeriodError, EvidenceTargetError, EvidenceAccessDenied) as exc:
            raise CommandError(str(exc)) from exc
        piece = f"receipts #{plan.first_seq} to #{plan.last_seq}" if plan.receipts else "no receipt"
        self.stdout.write(self.style.SUCCESS(
            f"evidence bundle written to {target}: {piece} (the chain's head is #{plan.head_seq}); "
            f"verify it with: python -m warrant_verify {target}"))

    def _user(self, username: str | None):
        name = username if username is not None else os_user()
        found = get_user_model().objects.filter(**{get_user_model().USERNAME_FIELD: name}, is_active=True).first()
        if found is None:
            raise CommandError(f"no active user {name!r}: name the user this export is recorded under with "
                               "--user (a compliance member or a superuser)")
        return found
