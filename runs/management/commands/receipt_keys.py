import json
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.utils import timezone

from runs import signing
from runs.receipts import _lock_chain, chain_head
from warrant_verify.keys import Retirement, key_id, public_key_document


class Command(BaseCommand):
    # The system checks refuse to start while the signing key file is missing (governance.E010), and
    # `generate` is what makes it: the command reads only key files and the chain's head.
    requires_system_checks = []
    help = ("Receipt signing keys. `show` (the default) prints the published key set (keys.json). "
            "`generate --out PATH` writes a new Ed25519 private key (mode 0600). `rotate --out PATH` does the same "
            "and moves the active key's public half into WARRANT_RECEIPT_PUBLIC_KEYS_FILE as retired, bounded by "
            "the chain's head and the time (retired_after_seq, retired_at): what it signed up to there still "
            "verifies, anything past it fails, and no process signs with it any more. Then point "
            "WARRANT_RECEIPT_SIGNING_KEY_FILE at PATH and restart every process.")

    def add_arguments(self, parser):
        parser.add_argument("action", nargs="?", choices=["show", "generate", "rotate"], default="show")
        parser.add_argument("--out", help="Where the new private key goes (never over an existing file).")

    def handle(self, *args, action="show", out=None, **options):
        if action == "show":
            self.stdout.write(json.dumps(signing.key_set_document(), indent=2))
            return
        demo = signing.demo_key_path()
        in_demo = signing.signing_origin().startswith("demo ") if action == "rotate" else False
        if not out and not in_demo:
            raise CommandError("give --out PATH for the new private key")
        target = Path(out) if out else demo
        new = Ed25519PrivateKey.generate()
        if action == "rotate":
            old_id, old = signing.signing_key()
        # The new key first: retiring the old one stops every process signing with it, so it must
        # not happen for a rotation that then fails.
        try:
            signing.write_private_key(target, new, replace=not out)
        except FileExistsError as exc:
            raise CommandError(f"{target} exists; choose another path") from exc
        new_id = key_id(new.public_key())
        self.stdout.write(f"new signing key {new_id} written to {target} (mode 0600)")
        if action == "rotate":
            bound = self._retire(old.public_key())
            self.stdout.write(f"key {old_id} retired after receipt #{bound.after_seq} at {bound.at}: its public key "
                              f"is in {signing.public_keys_path()}; receipts it signed up to there still verify, and "
                              "no process signs with it any more")
        if out:
            self.stdout.write(f"now set WARRANT_RECEIPT_SIGNING_KEY_FILE={target} in every process's environment "
                              "(web, workers, beat) and restart them (until then they seal nothing); publish the "
                              "key set (manage.py receipt_keys) to your auditors")
        else:
            self.stdout.write("the demo key was replaced; running processes pick it up at their next signature")
        signing.reload()

    def _retire(self, public) -> Retirement:
        """Add the key to the public key set file, bounded by the chain's head, keeping every key there.

        Under the sealer's chain lock: a seal in progress commits first and is inside the bound; one
        after reads the file, finds its key retired and refuses (runs.signing.sign)."""
        path = signing.public_keys_path()
        with transaction.atomic():
            _lock_chain()  # on SQLite the IMMEDIATE transaction itself holds off every seal
            seq, _hash = chain_head()
            now = timezone.now().isoformat().replace("+00:00", "Z")
            retired = signing.retired_keys()
            kid = key_id(public)
            # Rotated again while still configured: the earlier bound stands (a bound only ever narrows).
            bound = Retirement(after_seq=seq, at=now).tighter(retired[kid][1] if kid in retired else None)
            retired[kid] = (retired[kid][0] if kid in retired else public, bound)
            path.parent.mkdir(parents=True, exist_ok=True)
            staging = path.with_name(f".{path.name}.new")
            document = public_key_document([(key, "retired", b) for key, b in retired.values()])
            staging.write_text(json.dumps(document, indent=2) + "\n")
            staging.replace(path)
        return bound
