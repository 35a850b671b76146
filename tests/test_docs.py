"""The documentation is held to the code and to itself: the configuration table names exactly the
settings the platform reads from its environment, every relative link in README.md and docs/
leads to a file (and a heading) that exists, and no file in the repository cites a document or
path outside it."""

import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Directories that are not the project's own text: environments, data, caches, git's store.
SKIPPED_DIRS = {".venv", ".venv-bench", "var", ".git", "__pycache__", ".pytest_cache", ".ruff_cache", "node_modules"}
# Read by the test suite only, never by a deployment (docs/testing.md names it).
INTERNAL = {"WARRANT_TEST_FAST_HASHER"}
SETTING = r"(?:WARRANT|DJANGO|DATABASE|CELERY)_[A-Z0-9_]+"


def _section(text: str, heading: str) -> str:
    """The text under a `## heading`, up to the next heading of that level (or the end)."""
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start:] if end == -1 else text[start:end]


def _read_by_settings() -> set[str]:
    # settings.py, the modules it star-imports, and warrant/logs.py, which builds its LOGGING.
    text = "\n".join((ROOT / "warrant" / name).read_text()
                     for name in ("settings.py", "celery_config.py", "mail_config.py", "logs.py"))
    reads = rf"""(?:os\.environ\.get\(|os\.environ\[|env_bool\()\s*["']({SETTING})"""
    return set(re.findall(reads, text))


def _documented() -> set[str]:
    table = _section((ROOT / "docs" / "operations.md").read_text(), "Configuration")
    return set(re.findall(rf"`({SETTING})`", table))


def test_every_setting_read_from_the_environment_is_documented():
    read = _read_by_settings()
    assert len(read) > 30  # the pattern finds what settings.py reads
    assert sorted(read - INTERNAL - _documented()) == []
    assert sorted(_documented() - read) == []  # and the table names nothing the platform no longer reads


def _printed_by_make_run() -> list[str]:
    """The lines `make run` echoes before it starts the server, as a shell prints them (PORT 8000)."""
    makefile = (ROOT / "Makefile").read_text()
    recipe = makefile[makefile.index("\nrun:"):]
    recipe = recipe[:recipe.index("\n\n")]
    printed = []
    for quoted in re.findall(r"""echo (?:"([^"]*)"|'([^']*)')""", recipe):
        line = quoted[0] or quoted[1]
        printed.append(line.replace("$(PORT)", "8000").replace("$$", "$"))
    return printed


def test_the_readme_shows_what_make_run_prints():
    printed = _printed_by_make_run()
    assert len(printed) >= 4 and "Warrant on http://127.0.0.1:8000/" in printed
    readme = (ROOT / "README.md").read_text()
    assert [line for line in printed if line not in readme.splitlines()] == []


def test_the_quick_start_is_two_commands():
    quick_start = _section((ROOT / "README.md").read_text(), "Quick start")
    first_block = re.search(r"```sh\n(.*?)```", quick_start, re.S).group(1)
    commands = [line.split("#")[0].strip() for line in first_block.splitlines() if line.split("#")[0].strip()]
    assert commands == ["make run", "make test"]


# --- links ---------------------------------------------------------------------------------------

def _documents() -> list[Path]:
    return [ROOT / "README.md", ROOT / "SECURITY.md", *sorted((ROOT / "docs").glob("*.md"))]


def _prose(markdown: str) -> str:
    """Markdown without fenced code blocks and inline code, where a bracket is not a link."""
    markdown = re.sub(r"^```.*?^```", "", markdown, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", markdown)


def _links(markdown: str) -> list[str]:
    return re.findall(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", _prose(markdown))


def _anchors(markdown: str) -> set[str]:
    """Heading ids as GitHub makes them: lower case, punctuation dropped, spaces to hyphens,
    a repeated heading numbered."""
    seen: dict[str, int] = {}
    for heading in re.findall(r"^#{1,6} +(.+?) *#*$", re.sub(r"^```.*?^```", "", markdown, flags=re.S | re.M), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        if count:
            seen[f"{slug}-{count}"] = 1
    return set(seen)


def test_the_documents_are_there():
    for name in ["index", "architecture", "design", "api", "workbench", "tool-sources", "model-backends",
                 "operations", "security", "evidence"]:
        assert (ROOT / "docs" / f"{name}.md").is_file(), name
    index = (ROOT / "docs" / "index.md").read_text()
    listed = {link.split("#")[0] for link in _links(index)}
    assert sorted(p.name for p in (ROOT / "docs").glob("*.md") if p.name != "index.md" and p.name not in listed) == []


def test_every_relative_link_in_the_docs_resolves():
    broken = []
    for document in _documents():
        for link in _links(document.read_text()):
            if re.match(r"[a-z][a-z0-9+.-]*:", link):  # http:, https:, mailto:
                continue
            path, _, anchor = link.partition("#")
            target = (document.parent / path).resolve() if path else document
            if not target.is_relative_to(ROOT) or not target.exists():
                broken.append(f"{document.relative_to(ROOT)}: {link} (no such file in the repository)")
            elif anchor and target.suffix == ".md" and anchor not in _anchors(target.read_text()):
                broken.append(f"{document.relative_to(ROOT)}: {link} (no such heading)")
    assert broken == []


def test_every_module_the_docs_name_exists():
    """A module named by its path (`runs/harness.py`) in README.md, SECURITY.md or docs/ is there:
    when code moves, the page that points at it moves with it."""
    packages = "warrant|core|governance|agents|skills|runs|warrant_verify|tests|bench|templates"
    missing = []
    for document in _documents():
        for cited in re.findall(rf"`((?:{packages})/[\w/.-]+\.(?:py|html|css|txt|json))`", document.read_text()):
            if not (ROOT / cited).exists():
                missing.append(f"{document.relative_to(ROOT)}: {cited}")
    assert missing == []


def test_the_link_checker_sees_a_broken_link_and_a_missing_heading():
    text = "See [a](docs/nowhere.md), [b](#no-such-heading) and `[c](ignored.md)`.\n\n## A heading, with `code`\n"
    assert _links(text) == ["docs/nowhere.md", "#no-such-heading"]
    assert _anchors(text) == {"a-heading-with-code"}


# --- nothing cited outside the repository -------------------------------------------------------

def _text_files():
    for directory, subdirectories, files in os.walk(ROOT):
        subdirectories[:] = [name for name in subdirectories if name not in SKIPPED_DIRS]
        for name in files:
            path = Path(directory) / name
            if path == Path(__file__).resolve():  # this file's examples are broken on purpose
                continue
            try:
                data = path.read_bytes()
            except OSError:  # removed while we walked (another process's temporary file)
                continue
            if b"\0" in data[:8192]:
                continue
            yield path, data.decode("utf-8", errors="replace")


PATH_CHARS = re.compile(r"[\w./-]*")
PATH_CHARS_BEFORE = re.compile(r"[\w./-]*$")


def _leaving(directory: Path, text: str) -> list[str]:
    """Paths written with ../ that, read from `directory`, lead out of the repository."""
    found = []
    for hit in re.finditer(r"(?<![\w./-])\.\./", text):
        cited = PATH_CHARS.match(text, hit.start()).group().rstrip(".")
        if not (directory / cited).resolve().is_relative_to(ROOT):
            found.append(cited)
    return found


def _cited_documents(text: str) -> list[str]:
    """Every name of a Markdown file the text mentions, with the path it is written with."""
    found = []
    for hit in re.finditer(r"\.md\b", text):
        before = PATH_CHARS_BEFORE.search(text, max(0, hit.start() - 300), hit.start()).group()
        if before and before[-1] not in "./":
            found.append(before + ".md")
    return found


def test_no_file_cites_a_path_outside_the_repository():
    files = list(_text_files())
    names = {path.name for path, _ in files}
    problems = []
    for path, text in files:
        where = path.relative_to(ROOT)
        problems += [f"{where}: {cited} leaves the repository" for cited in _leaving(path.parent, text)]
        problems += [f"{where}: {cited} is not a file in the repository"
                     for cited in _cited_documents(text) if Path(cited).name not in names]
    assert problems == []


def test_the_outside_citation_check_sees_what_it_is_for():
    text = "as ../shared/STYLE.md says; see DESIGN.md and docs/design.md; a zip entry ../x is refused"
    assert _leaving(ROOT, text) == ["../shared/STYLE.md", "../x"]
    assert _leaving(ROOT / "docs", text) == []  # docs/../x is in the repository: the name check catches STYLE.md
    assert _leaving(ROOT / "docs", "../../shared/x") == ["../../shared/x"]
    assert _cited_documents(text) == ["../shared/STYLE.md", "DESIGN.md", "docs/design.md"]
