"""Running the offline verifier (python -m warrant_verify) in-process, and the keys it is handed, for
the tests/evidence/test_verify_*.py modules. Their `ledger` fixture is in conftest.py."""

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from warrant_verify.__main__ import main
from warrant_verify.keys import key_id


def verify(capsys, path, *args) -> tuple[int, list[str]]:
    code = main([str(path), *map(str, args)])
    return code, capsys.readouterr().out.splitlines()


def pem(tmp_path, key: Ed25519PrivateKey, name="public.pem"):
    path = tmp_path / name
    path.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                   serialization.PublicFormat.SubjectPublicKeyInfo))
    return path


def chain_key(private_key):
    return key_id(private_key.public_key())
