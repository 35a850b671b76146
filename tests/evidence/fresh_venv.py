"""An auditor's machine: a new venv with nothing but `cryptography` at requirements.txt's pin, and
a directory holding only warrant_verify/, so the verifier cannot lean on anything of Warrant's."""

import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def cryptography_pin() -> str:
    return re.search(r"^cryptography==\S+", (ROOT / "requirements.txt").read_text(), re.MULTILINE).group(0)


def fresh_verifier(where: Path) -> Callable[..., subprocess.CompletedProcess]:
    """A function running `python -m warrant_verify ARGS...` in that venv; it asserts Django is absent."""
    venv = where / "venv"
    # Without pip inside (bootstrapping it is most of the time); the test's pip installs into it.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q",
                    "--disable-pip-version-check", cryptography_pin()], check=True, timeout=240)
    auditor = where / "auditor"
    shutil.copytree(ROOT / "warrant_verify", auditor / "warrant_verify")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(where)}
    isolated = subprocess.run([str(python), "-c", "import django"], cwd=auditor, env=env, capture_output=True)
    assert isolated.returncode != 0, "Django is importable in the fresh venv"

    def run(*args) -> subprocess.CompletedProcess:
        return subprocess.run([str(python), "-m", "warrant_verify", *map(str, args)], cwd=auditor, env=env,
                              capture_output=True, text=True, timeout=300)

    return run
