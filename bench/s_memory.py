"""Scenario 8: a worker's resident memory after 200 runs and after 5,000 runs (growth under 10%).

One process on the embedded default executes the runs itself (Celery eager: the run_advance
task runs in this process, as in a worker), sequentially; RSS is read with psutil after a
garbage collection at each mark. The target is on the process's anonymous memory (its heap:
what a leak would grow); RSS is recorded beside it, and on SQLite it also counts the pages of the
database file that Warrant reads through a memory map (PRAGMA mmap_size), which grow with the
file, are the OS's page cache and are reclaimed under memory pressure.
"""

import gc
from pathlib import Path

from bench import djangoenv
from bench.common import record


def run(*, workdir: Path, marks=(200, 5_000)) -> list[dict]:
    import psutil

    djangoenv.setup(workdir / "memory")
    djangoenv.prepare()
    from django.contrib.auth import get_user_model

    from bench.script import PROMPT
    from runs.services import run_start

    operator = get_user_model().objects.get(username="operator")
    process = psutil.Process()
    records, done = [], 0
    for mark in marks:
        while done < mark:
            run_start(agent_slug=djangoenv.AGENT, input_text=PROMPT, caller=operator)
            done += 1
        gc.collect()
        records.append(record("memory", f"after {mark} runs", 0, "rss_mib", process.memory_info().rss / 2**20, "MiB",
                              runs=mark))
        records.append(record("memory", f"after {mark} runs", 0, "anon_mib", _anonymous_kib() / 2**10, "MiB",
                              runs=mark))
    return records


def _anonymous_kib() -> float:
    """RssAnon of /proc/self/status (Linux): resident memory not backed by a file."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("RssAnon:"):
                return float(line.split()[1])
    raise RuntimeError("no RssAnon in /proc/self/status")
