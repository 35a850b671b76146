"""Timing, alternation and the record every measurement becomes (one JSON line each)."""

import os
import statistics
import time


def rotations(names: list[str], reps: int):
    """(rep, order): each rep runs every variant once, the order rotating so none always goes first."""
    for rep in range(reps):
        shift = rep % len(names)
        order = names[shift:] + names[:shift]
        yield rep, (order if rep % 2 == 0 else list(reversed(order)))


def rate(fn, n: int) -> float:
    """Calls of fn per second over n sequential calls."""
    started = time.perf_counter()
    for i in range(n):
        fn(i)
    return n / (time.perf_counter() - started)


def record(scenario: str, variant: str, rep: int, metric: str, value: float, unit: str, **extra) -> dict:
    return {"scenario": scenario, "variant": variant, "rep": rep, "metric": metric, "value": value, "unit": unit,
            **extra}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def load_snapshot() -> dict:
    """What else the machine was doing: load average and cores, at the time of a measurement."""
    one, five, fifteen = os.getloadavg()
    return {"load1": round(one, 2), "load5": round(five, 2), "load15": round(fifteen, 2), "cpus": os.cpu_count()}
