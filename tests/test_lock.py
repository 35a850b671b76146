"""requirements.lock (pip-compile, with hashes) stays in step with requirements.txt.

requirements.txt names the runtime's direct dependencies, pinned, for people to read; the lock pins
every package they pull in, with hashes, and the Dockerfile and `make run` install from it with
--require-hashes. A line added to or changed in requirements.txt without compiling the lock again
fails here, without the network: `.venv/bin/pip-compile requirements.txt` (its options are in
pyproject.toml's [tool.pip-tools]) brings the lock back in step.
"""

import re
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
RECOMPILE = "compile it again: .venv/bin/pip-compile requirements.txt"


def requirement_lines(text):
    """The requirement lines of a requirements file: comments, blank lines and options dropped."""
    for line in text.splitlines():
        line = re.sub(r"(^|\s)#.*", "", line).strip()
        if line and not line.startswith("-"):
            yield line


def read_requirements(path):
    """Requirement objects of a requirements file, following its `-r` includes."""
    reqs = []
    for line in path.read_text().splitlines():
        match = re.match(r"\s*(?:-r|--requirement)\s*(\S+)", line)
        if match:
            reqs += read_requirements(path.parent / match.group(1))
    reqs += [Requirement(line) for line in requirement_lines(path.read_text())]
    return reqs


def parse_lock(text):
    """{name: (Requirement, [hashes], [via])} of a pip-compile output, and its option lines."""
    entries, options, current = {}, [], None
    for line in re.sub(r"\\\n", " ", text).splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if not line[0].isspace() and not stripped.startswith("#"):
            if stripped.startswith("-"):
                options.append(stripped)
                current = None
                continue
            spec, *hashes = stripped.split("--hash=")
            req = Requirement(spec.strip())
            current = entries[canonicalize_name(req.name)] = (req, [h.strip() for h in hashes], [])
        elif current is not None and re.match(r"#\s+(via\b)?", stripped):
            via = re.sub(r"^#\s*(via\b)?\s*", "", stripped)
            if via:
                current[2].append(via)
    return entries, options


def lock_mismatches(requirements, lock_text):
    """What the lock lacks or holds wrongly for these requirements (empty: in step)."""
    entries, options = parse_lock(lock_text)
    problems = [f"the lock names an index or a local path: {o}" for o in options
                if o.startswith(("--index-url", "--extra-index-url", "--find-links", "-f", "-i"))]
    wanted = set()
    for req in requirements:
        if req.marker is not None and not req.marker.evaluate():
            continue
        name = canonicalize_name(req.name)
        wanted.add(name)
        if name not in entries:
            problems.append(f"{req} is not in the lock")
            continue
        locked = entries[name][0]
        version = next(iter(locked.specifier)).version
        if not req.specifier.contains(version, prereleases=True):
            problems.append(f"{req} but the lock pins {locked}")
        if set(map(canonicalize_name, req.extras)) != set(map(canonicalize_name, locked.extras)):
            problems.append(f"{req} but the lock has {locked} (extras differ)")
    for name, (locked, hashes, via) in entries.items():
        pins = list(locked.specifier)
        if len(pins) != 1 or pins[0].operator != "==":
            problems.append(f"{locked} is not pinned with ==")
        if not hashes or not all(h.startswith("sha256:") for h in hashes):
            problems.append(f"{locked} has no sha256 hash")
        if name not in wanted and any(v.startswith("-r ") for v in via) and not any(
                not v.startswith("-r ") for v in via):
            problems.append(f"{locked} is locked for requirements.txt, which no longer names it")
    return problems


def test_the_lock_has_every_requirement_at_its_pin_with_hashes():
    problems = lock_mismatches(read_requirements(ROOT / "requirements.txt"), (ROOT / "requirements.lock").read_text())
    assert not problems, f"requirements.lock is out of step with requirements.txt ({RECOMPILE}): " + "; ".join(problems)


def test_the_lock_holds_what_requirements_txt_pulls_in():
    entries, _ = parse_lock((ROOT / "requirements.lock").read_text())
    # Transitive packages are there too, each saying what pulls it in.
    assert {"kombu", "asgiref", "sqlparse", "psycopg-binary"} <= set(entries)
    assert "celery" in entries["kombu"][2]
    assert all(via for _, _, via in entries.values())


def test_a_changed_pin_an_added_package_a_dropped_extra_and_a_dropped_line_are_found():
    lock = (ROOT / "requirements.lock").read_text()
    reqs = read_requirements(ROOT / "requirements.txt")
    by_name = {canonicalize_name(r.name): r for r in reqs}

    bumped = [Requirement("Django==0.0.1") if canonicalize_name(r.name) == "django" else r for r in reqs]
    assert any(p.startswith("Django==0.0.1 but the lock pins django==") for p in lock_mismatches(bumped, lock))

    added = reqs + [Requirement("not-a-package-warrant-uses==1.0")]
    assert lock_mismatches(added, lock) == ["not-a-package-warrant-uses==1.0 is not in the lock"]

    no_extra = [Requirement("psycopg==" + next(iter(r.specifier)).version) if canonicalize_name(r.name) == "psycopg"
                else r for r in reqs]
    assert any("extras differ" in p for p in lock_mismatches(no_extra, lock))

    dropped = [r for r in reqs if canonicalize_name(r.name) != "whitenoise"]
    assert "whitenoise" in by_name
    assert any(p.startswith("whitenoise==") and "no longer names it" in p for p in lock_mismatches(dropped, lock))

    assert any("names an index" in p for p in lock_mismatches(reqs, "--find-links /opt/wheels\n" + lock))
    unhashed = re.sub(r"(?m)^(amqp==\S+) \\\n(\s+--hash=\S+ \\\n)*\s+--hash=\S+", r"\1", lock)
    assert any(p.startswith("amqp==") and "no sha256 hash" in p for p in lock_mismatches(reqs, unhashed))
