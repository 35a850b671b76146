"""A golden case's expectations against what its run did: each failed expectation with what was
expected and what happened. Pure."""

# Tool results that mean the tool did not run (refused by the gate, denied, malformed): a tool
# "called" is one the harness dispatched (or, for a side effect, answered from the sandbox).
NOT_RUN = ("not_permitted", "unknown_tool", "invalid_arguments", "denied", "expired")


def expected_of(case) -> dict:
    """A case's expectations as a dict (stored with each result, so a later edit leaves it readable)."""
    return {
        "status": case.expected_status, "awaiting_tool": case.awaiting_tool, "stop_reason": case.stop_reason,
        "error": case.error, "tools_called": list(case.tools_called), "tools_not_called": list(case.tools_not_called),
        "output_contains": list(case.output_contains), "output_excludes": list(case.output_excludes),
        "policies_fired": list(case.policies_fired),
    }


def actual_of(trace: list[tuple[str, dict]], state: dict, outcome: dict) -> dict:
    """What the case's run did, from the events its steps returned and its last state."""
    tool_events = [data for kind, data in trace if kind == "tool_call"]
    return outcome | {
        "tools_called": [e["name"] for e in tool_events if e["result"].get("code", "") not in NOT_RUN],
        "tools_asked": sorted({e["name"] for e in tool_events} | ({outcome["awaiting_tool"]} - {""})),
        "policies_fired": _unique([f.get("policy") for f in state.get("fired", []) if f and f.get("policy")]),
        "skills": list(state.get("active_skills", [])),
        "tainted": bool(state.get("taint_reasons")), "taint_reasons": list(state.get("taint_reasons", [])),
    }


def failures(expected: dict, actual: dict) -> list[dict]:
    found = []

    def fail(expectation: str, want, got) -> None:
        found.append({"expectation": expectation, "expected": want, "actual": got})

    if actual["status"] != expected["status"]:
        fail("status", expected["status"], actual["status"])
    for key in ("awaiting_tool", "stop_reason", "error"):
        if expected[key] and actual.get(key, "") != expected[key]:
            fail(key, expected[key], actual.get(key, ""))
    called = actual["tools_called"]
    if any(t not in called for t in expected["tools_called"]):
        fail("tools_called", expected["tools_called"], called)
    if present := [t for t in expected["tools_not_called"] if t in actual["tools_asked"]]:
        fail("tools_not_called", expected["tools_not_called"], present)
    output = actual.get("output", "")
    for text in expected["output_contains"]:
        if text not in output:
            fail("output_contains", text, _excerpt(output))
    for text in expected["output_excludes"]:
        if text in output:
            fail("output_excludes", text, _excerpt(output, around=text))
    if any(p not in actual["policies_fired"] for p in expected["policies_fired"]):
        fail("policies_fired", expected["policies_fired"], actual["policies_fired"])
    return found


def _excerpt(text: str, *, around: str = "", width: int = 300) -> str:
    if around and around in text:
        start = max(0, text.index(around) - width // 2)
        return ("…" if start else "") + text[start:start + width] + ("…" if start + width < len(text) else "")
    return text if len(text) <= width else text[:width] + "…"


def _unique(names: list[str]) -> list[str]:
    return list(dict.fromkeys(names))
