"""Answers of pure checks kept per process by a digest of what was checked, never the text itself:
tool results and tool arguments may hold personal data, which a process-wide cache must not keep."""

import hashlib
import threading


def digest(*parts: str) -> bytes:
    return hashlib.blake2b("\0".join(parts).encode("utf-8", "surrogatepass"), digest_size=16).digest()


class DigestMemo:
    """At most `limit` answers by digest; the oldest is dropped first."""

    def __init__(self, *, limit: int):
        self.limit = limit
        self._answers: dict = {}
        self._lock = threading.Lock()

    def get(self, key, default=None):
        return self._answers.get(key, default)

    def keep(self, key, answer) -> None:
        with self._lock:
            if key not in self._answers and len(self._answers) >= self.limit:
                del self._answers[next(iter(self._answers))]
            self._answers[key] = answer

    def __len__(self) -> int:
        return len(self._answers)
