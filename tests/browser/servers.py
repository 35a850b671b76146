"""Waiting for a server process the browser tests started."""

import time
from pathlib import Path

import httpx


def wait_until_healthy(process, base: str, log: Path, *, attempts: int = 300) -> None:
    """Return once `base`/healthz answers 200; fail with the server's log if it exits or never does."""
    for _ in range(attempts):
        if process.poll() is not None:
            raise RuntimeError(f"the server exited: {log.read_text()}")
        try:
            if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.1)
    raise RuntimeError(f"the server did not answer /healthz: {log.read_text()}")
