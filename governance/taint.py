"""What taints a run before its first model call. Pure.

A run is tainted once it has read text that did not come from its caller or its platform
engineer: instruction-like words in its input, or the descriptions of the tools it is shown
when they were written elsewhere (an MCP server, an OpenAPI document) by a source nobody has
marked trusted. The harness applies this at a run's start; the Policy Lab to a run started now.
Later taint (tool results, skill bodies, approval comments) is the harness's, as it reads them.
"""

from governance.screening import screen, screen_known

UNTRUSTED = "untrusted source"


def reason(origin: str, findings: list[str]) -> str:
    """One line of a run's taint reasons: where, and what was found there."""
    return f"{origin}: {', '.join(findings)}"


def shown_tools(snapshot: dict) -> list[str]:
    """Tools the model may be shown: on the agent, in the snapshot and granted to one of the caller's roles."""
    granted = set(snapshot["granted_tools"])
    return [name for name in snapshot["agent"]["tools"] if name in granted and name in snapshot["tools"]]


def untrusted_description(tool: dict) -> bool:
    """Its description came from an MCP server or an OpenAPI document whose source is not trusted.
    (A Python source's are docstrings of code the platform engineer allowed, like ours.) A snapshot
    frozen before trust marks existed has no "trusted": untrusted, so it fails closed."""
    return tool.get("source") in ("mcp", "openapi") and not tool.get("trusted", False)


def opening_taint(snapshot: dict, text: str) -> list[tuple[str, list[str]]]:
    """(origin, findings) for each thing that taints a run with input `text` at its start, in order:
    the input, then the description of each tool it is shown (a poisoned description reaches the
    model verbatim, an injection like any other; an untrusted source's taints whatever its words)."""
    found = [("input", screen(text))]
    if (origin := snapshot.get("origin")) and origin.get("untrusted"):
        # A webhook's payload was written by whoever can reach the sender: the input built from it
        # is untrusted whatever its words (runs.start's origin, triggers/).
        found.insert(0, (f"{origin.get('kind', 'external')} payload of trigger {origin.get('trigger', '?')}", [UNTRUSTED]))
    for name in shown_tools(snapshot):
        tool = snapshot["tools"][name]
        patterns = screen_known(tool.get("description", ""))
        found.append((f"description of tool {name}", [UNTRUSTED] + patterns if untrusted_description(tool) else patterns))
    return [(origin, patterns) for origin, patterns in found if patterns]
