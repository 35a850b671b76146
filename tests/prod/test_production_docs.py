"""The README's production section, docs/operations.md's deploy block, `make prod-smoke` and the smoke
script are held to one another: the smoke runs the README's block as written (tests/prod/smoke.py
parses it), so what is checked here is that the block is the deployment the issue asks for, that
the smoke sets exactly the variables it exports, that operations.md lists the same commands, and
that `make test` runs the smoke."""

import re
import shlex
from pathlib import Path

import pytest

from tests.prod import smoke
from tests.prod.smoke_walk import SmokeFailure

ROOT = Path(__file__).resolve().parents[2]


def _block(text: str, heading: str) -> list[str]:
    start = text.index(f"\n## {heading}\n")
    return re.search(r"```sh\n(.*?)```", text[start:], re.S).group(1).splitlines()


def _commands(lines: list[str]) -> list[str]:
    """The block's command lines, their trailing comments dropped."""
    return [re.sub(r"\s+#\s.*$", "", line).strip() for line in lines if line.strip() and not line.startswith("export ")]


def test_the_readme_block_is_a_whole_production_deployment_in_order():
    variables, commands = smoke.production_block((ROOT / "README.md").read_text())
    programs = [" ".join(shlex.split(c)[:3]) for c in commands]
    assert programs == [
        "python manage.py receipt_keys", "python manage.py check", "python manage.py migrate", "python manage.py warrant_bootstrap",
        "python manage.py collectstatic", "gunicorn warrant.wsgi --workers", "celery -A warrant", "celery -A warrant",
        "celery -A warrant"]
    assert [shlex.split(c)[3] for c in commands if c.startswith("celery")] == ["worker", "worker", "beat"]
    assert [c for c in commands if not smoke.is_service(c)] == commands[:5]
    assert "DJANGO_DEBUG" not in variables  # off, the default: the smoke leaves it unset too
    assert {"DJANGO_SECRET_KEY", "DATABASE_URL", "CELERY_BROKER_URL", "WARRANT_RECEIPT_SIGNING_KEY_FILE",
            "WARRANT_ADMIN_USERNAME", "WARRANT_ADMIN_PASSWORD_FILE"} <= set(variables)


def test_the_smoke_sets_exactly_the_variables_the_readme_exports(tmp_path):
    variables, _ = smoke.production_block((ROOT / "README.md").read_text())
    env = smoke.environment(variables, data=tmp_path / "data", database_url="postgres://x@127.0.0.1/x",
                            redis_port=1, port=2, admin=("a", "b"))
    assert {name for name in env if name.startswith(("DJANGO_", "WARRANT_", "DATABASE_", "CELERY_"))} | {"PORT"} == (
        set(variables) | set(smoke.SMOKE_ONLY))


@pytest.mark.parametrize("change", ["export WARRANT_NEW_THING=…\n", "export PORT=8000\n"])
def test_a_variable_the_smoke_does_not_know_or_a_missing_one_stops_it(tmp_path, change):
    readme = (ROOT / "README.md").read_text()
    if change.startswith("export PORT"):  # the README stops exporting one the smoke sets
        readme = readme.replace(" PORT=8000", "", 1)
    else:
        readme = readme.replace("```sh\nexport DJANGO_SECRET_KEY", f"```sh\n{change}export DJANGO_SECRET_KEY", 1)
    variables, _ = smoke.production_block(readme[readme.index("\n## Production\n") - 1:])
    with pytest.raises(SmokeFailure, match="README.md's production block and the smoke disagree"):
        smoke.environment(variables, data=tmp_path / "data", database_url="postgres://x@127.0.0.1/x",
                          redis_port=1, port=2, admin=("a", "b"))


def test_operations_md_deploys_with_the_same_commands():
    readme = _commands(_block((ROOT / "README.md").read_text(), "Production"))
    operations = _commands(_block((ROOT / "docs" / "operations.md").read_text(), "Deploy"))
    assert readme == operations
    readme_exports = [line for line in _block((ROOT / "README.md").read_text(), "Production") if line.startswith("export ")]
    operations_text = "\n".join(_block((ROOT / "docs" / "operations.md").read_text(), "Deploy"))
    for line in readme_exports:  # every variable the README sets, operations.md sets too
        for word in shlex.split(line, comments=True)[1:]:
            assert word.split("=")[0] + "=" in operations_text, word


def test_make_test_runs_the_smoke_beside_the_other_live_parts():
    makefile = (ROOT / "Makefile").read_text()
    target = makefile[makefile.index("\nprod-smoke:"):]
    assert "tests/prod/smoke.py" in target[:target.index("\n\n")]
    live = makefile[makefile.index("\ntest-live:"):]
    live = live[:live.index("\n\n")]
    assert "$(MAKE) --no-print-directory prod-smoke" in live and "for part in bench-smoke test-services fuzz prod-smoke" in live
