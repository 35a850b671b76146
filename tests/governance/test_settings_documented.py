"""Every setting the platform reads from its environment is in the README's configuration table
(a newcomer's walkthrough found seven that were not)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Read by the test suite only, never by a deployment.
INTERNAL = {"WARRANT_TEST_FAST_HASHER"}


def _read_by_settings() -> set[str]:
    text = (ROOT / "governance" / "settings.py").read_text()
    reads = r"""(?:os\.environ\.get\(|os\.environ\[|env_bool\()\s*["']((?:WARRANT|DJANGO|DATABASE|CELERY)_[A-Z0-9_]+)"""
    return set(re.findall(reads, text))


def _documented() -> set[str]:
    readme = (ROOT / "README.md").read_text()
    table = readme[readme.index("## Configuration"):]
    table = table[:table.index("\n## ")]
    return set(re.findall(r"`((?:WARRANT|DJANGO|DATABASE|CELERY)_[A-Z0-9_]+)`", table))


def test_every_setting_read_from_the_environment_is_documented():
    read = _read_by_settings()
    assert len(read) > 30  # the pattern finds what settings.py reads
    assert sorted(read - INTERNAL - _documented()) == []
    assert sorted(_documented() - read) == []  # and the table names nothing the platform no longer reads
