"""Where a fuzz run's reports go, and what the server's access log says about the run.

Every run gets a directory of its own under var/fuzz-results/ (the last five are kept, the newest
linked as var/fuzz-results/latest), so two runs at once never mix their logs.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def server_census(access_log: Path, credentials: dict[str, dict[str, str]]) -> tuple[Counter, list[str]]:
    """Requests per persona and every 5xx the server answered, from gunicorn's access log.

    `credentials`: persona -> the headers it authenticates with (a token, or a session's cookie)."""
    personas = {headers["Authorization"]: name for name, headers in credentials.items() if "Authorization" in headers}
    sessions = {headers["Cookie"]: name for name, headers in credentials.items() if "Cookie" in headers}
    per_persona: Counter = Counter()
    server_errors: list[str] = []
    pattern = re.compile(r'^(\S+) (\S+) (\d{3}) "(.*)" "(.*)"$')
    try:
        lines = access_log.read_text(errors="replace").splitlines()
    except OSError:
        return per_persona, server_errors
    scrubbed = []
    for line in lines:
        match = pattern.match(line)
        if not match:
            scrubbed.append(line)
            continue
        method, path, status, authorization, cookie = match.groups()
        if authorization != "-":
            who = personas.get(authorization, "invalid credentials")
        else:
            who = sessions.get(cookie, "anonymous" if cookie == "-" else "invalid credentials")
        per_persona[who] += 1
        scrubbed.append(f"{method} {path} {status} {who}")
        if status.startswith("5"):
            server_errors.append(f"{status} {method} {path}")
    # The log keeps who sent each request, not their (throwaway) tokens and sessions.
    access_log.write_text("\n".join(scrubbed) + "\n")
    return per_persona, server_errors


def results_dir(chosen: Path | str | None, names: list[str]) -> Path:
    """A directory of this run's own, so that two runs at once never mix their logs. `names`: the
    personas' and servers' subdirectories, cleared in a directory given again."""
    if chosen:
        results = Path(chosen).resolve()
        results.mkdir(parents=True, exist_ok=True)
        for persona in names:  # only what an earlier run of this script wrote (gunicorn appends)
            shutil.rmtree(results / persona, ignore_errors=True)
            (results / f"schemathesis-{persona}.log").unlink(missing_ok=True)
        return results
    root = REPO / "var" / "fuzz-results"
    results = root / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    results.mkdir(parents=True)
    runs = sorted(path for path in root.iterdir() if re.fullmatch(r"\d{8}-\d{6}-\d+", path.name))
    for old in runs[:-5]:  # keep the last five runs' reports
        shutil.rmtree(old, ignore_errors=True)
    latest = root / "latest"
    try:
        latest.unlink(missing_ok=True)
        latest.symlink_to(results.name)
    except OSError:
        pass  # a link is a convenience; the path is printed anyway
    return results
