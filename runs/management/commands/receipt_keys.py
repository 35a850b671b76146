import json
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.core.management.base import BaseCommand, CommandError

from runs import signing
from warrant_verify.keys import key_id, public_key_document


class Command(BaseCommand):
    help = ("Receipt signing keys. `show` (the default) prints the published key set (keys.json). "
            "`generate --out PATH` writes a new Ed25519 private key (mode 0600). `rotate --out PATH` does the same "
            "and moves the active key's public half into WARRANT_RECEIPT_PUBLIC_KEYS_FILE as retired, so what it "
            "signed still verifies; then point WARRANT_RECEIPT_SIGNING_KEY_FILE at PATH and restart every process.")

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
            self._retire(old.public_key())
        try:
            signing.write_private_key(target, new, replace=not out)
        except FileExistsError as exc:
            raise CommandError(f"{target} exists; choose another path") from exc
        new_id = key_id(new.public_key())
        self.stdout.write(f"new signing key {new_id} written to {target} (mode 0600)")
        if action == "rotate":
            self.stdout.write(f"key {old_id} retired: its public key is in {signing.public_keys_path()}; receipts it "
                              "signed still verify")
        if out:
            self.stdout.write(f"now set WARRANT_RECEIPT_SIGNING_KEY_FILE={target} in every process's environment "
                              "(web, workers, beat) and restart them; publish the key set (manage.py receipt_keys) "
                              "to your auditors")
        else:
            self.stdout.write("the demo key was replaced; restart `make run` to sign with it")
        signing.reload()

    def _retire(self, public) -> None:
        """Add the key to the public key set file, keeping every key already there."""
        path = signing.public_keys_path()
        keys = signing.retired_public_keys()
        if key_id(public) not in {key_id(k) for k in keys}:
            keys.append(public)
        path.parent.mkdir(parents=True, exist_ok=True)
        staging = path.with_name(f".{path.name}.new")
        staging.write_text(json.dumps(public_key_document([(k, "retired") for k in keys]), indent=2) + "\n")
        staging.replace(path)
