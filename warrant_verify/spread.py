"""Sharing a verification's work out to helper processes, with the parent taking a share too."""

from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import get_context


def spread(work, items: list, context, *, workers: int, chunk: int) -> list:
    """work(start, items[start:start + chunk], context) over every chunk, results in order.

    With workers > 1 and enough items, helper processes take a share; the parent takes one too
    (with N cores, N - 1 helpers keep them all busy). Helpers that cannot start or die (a sandbox
    without processes, a script without a main guard) leave everything to the parent: nothing is
    skipped.
    """
    if workers <= 1 or len(items) < 2 * chunk:
        return work(0, items, context)
    try:
        return _shared(work, items, context, workers=workers, chunk=chunk)
    except (BrokenProcessPool, OSError, RuntimeError):
        return work(0, items, context)


def _shared(work, items: list, context, *, workers: int, chunk: int) -> list:
    chunks = [(start, items[start:start + chunk]) for start in range(0, len(items), chunk)]
    results: list = []
    # Spawn, not fork: callers may be threaded (a web server), where fork can deadlock.
    with ProcessPoolExecutor(max_workers=workers - 1, mp_context=get_context("spawn")) as pool:
        futures = [pool.submit(work, start, part, context) for n, (start, part) in enumerate(chunks) if n % workers]
        mine = [work(start, part, context) for n, (start, part) in enumerate(chunks) if not n % workers]
        for part in mine:
            results.extend(part)
        for future in futures:
            results.extend(future.result())
    return results
