"""A golden case's recordings: what each read-only tool answered, keyed by the call.

A recording is {tool, arguments, result}: the tool's name, the arguments as the model sent them and
the envelope the tool answered. A call matches a recording when the tool and its arguments, in
canonical JSON (keys sorted), are the same; the first recording of a call wins, since a read's
answer within one case does not change (its side effects went to the sandbox). Pure.
"""

import json

from governance import redaction

# Answers that say what the platform was going through, not what the data was: a fixture made of
# them would keep a passing outage (or a tool switched off for a day) as the case's truth.
TRANSIENT = ("timeout", "tool_unavailable", "tool_held", "tool_changed", "tool_error", "result_too_large")


def recording_key(tool: str, arguments) -> str:
    return json.dumps([tool, arguments], sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def replay_index(recordings: list[dict]) -> dict[str, dict]:
    index: dict[str, dict] = {}
    for recording in recordings or []:
        index.setdefault(recording_key(recording["tool"], recording["arguments"]), recording["result"])
    return index


def kept(reads: list[dict]) -> tuple[list[dict], list[dict]]:
    """The recordings made of a case's live reads, and the reads that cannot be kept (each with why):
    a transient failure, or an answer carrying a secret (the golden set is read by more people than
    the tool's owner)."""
    recordings, refused, seen = [], [], set()
    secrets = redaction.env_secrets()
    for read in reads:
        key = recording_key(read["tool"], read["arguments"])
        if key in seen:
            continue
        seen.add(key)
        result = read["result"]
        call = {"tool": read["tool"], "arguments": read["arguments"]}
        if not result.get("ok") and result.get("code") in TRANSIENT:
            refused.append(call | {"why": f"the tool answered {result['code']}: {result.get('error', '')}"})
        elif found := redaction.leaks(result, secrets=secrets):
            refused.append(call | {"why": f"the answer carries {', '.join(found)}"})
        else:
            recordings.append(call | {"result": result})
    return recordings, refused
