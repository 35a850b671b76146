"""The shapes every verifier checks records against, and the failure it reports."""

import re
from dataclasses import dataclass

HEX64 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class Failure:
    file: str
    record: str
    reason: str

    def __str__(self) -> str:
        return f"{self.file}: {self.record}: {self.reason}"


def is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_hex64(value) -> bool:
    return isinstance(value, str) and HEX64.fullmatch(value) is not None
