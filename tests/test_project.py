"""pyproject.toml is where the project's metadata and its tools' configuration live.

pytest reads pytest.ini before pyproject.toml, and ruff reads ruff.toml or .ruff.toml before it:
such a file coming back would silently replace the configuration here.
"""

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_pytest_and_ruff_read_pyproject_and_no_file_shadows_it(pytestconfig):
    assert Path(pytestconfig.inipath) == ROOT / "pyproject.toml"
    for shadow in ["pytest.ini", ".pytest.ini", "tox.ini", "setup.cfg", "ruff.toml", ".ruff.toml"]:
        assert not (ROOT / shadow).exists(), f"{shadow} would take precedence over pyproject.toml"
    tools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]
    assert tools["pytest"]["ini_options"]["DJANGO_SETTINGS_MODULE"] == "warrant.settings"
    assert "tests.pytest_env" in pytestconfig.getini("addopts")
    assert {m.split(":")[0] for m in pytestconfig.getini("markers")} >= {"slow", "browser"}
    assert tools["ruff"]["lint"]["select"] == ["F", "E9"]


def test_the_project_is_apache_2_licensed():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == "warrant" and project["license"] == "Apache-2.0"
    text = (ROOT / "LICENSE").read_text()
    assert text.lstrip().startswith("Apache License\n                           Version 2.0, January 2004")
    assert "END OF TERMS AND CONDITIONS" in text and "Copyright 2026 The Warrant authors" in text
