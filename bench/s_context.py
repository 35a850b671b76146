"""Scenario 7: input tokens of one model call for an agent with 100 tools and 30 skills.

Warrant's way: the model sees the tools granted to the caller's roles (here a role granted 12 of
the 100) and the skill index (names and descriptions), a skill's body entering only when it is
matched or loaded. Beside it: every tool and every skill body inline. Both requests are built by
Warrant's own context builder (runs.context.build_request) and counted with the same estimate
(about four characters a token) over system prompt, messages and tool schemas.
"""

import json
import random

from agents import prompt_format
from bench.common import record

WORDS = ("account renewal usage seats ticket escalation invoice contract region outage export login report "
         "forecast pipeline owner segment churn health score trend survey reply draft summary").split()


def _sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


def snapshot(*, tools: int = 100, skills: int = 30, granted: int = 12, inline: bool) -> dict:
    rng = random.Random(7)
    tool_specs = {}
    for i in range(tools):
        name = f"tool_{i:03d}"
        tool_specs[name] = {
            "name": name, "description": " ".join(_sentence(rng, 12) for _ in range(3)), "side_effect": False,
            "input_schema": {"type": "object", "additionalProperties": False, "required": ["account_id"],
                             "properties": {"account_id": {"type": "string", "pattern": "^A-[0-9]+$"},
                                            "limit": {"type": "integer", "minimum": 1, "maximum": 100},
                                            "query": {"type": "string", "maxLength": 200}}},
        }
    skill_specs = [{"name": f"skill-{i:02d}", "description": _sentence(rng, 18), "version": 1, "sha256": "0" * 64,
                    "body": "\n".join(f"{step}. {_sentence(rng, 16)}" for step in range(1, 16)), "allowed_tools": []}
                   for i in range(skills)]
    names = list(tool_specs)
    instructions = "You are the CRM assistant. " + " ".join(_sentence(rng, 14) for _ in range(4))
    if inline:
        instructions += "\n\n" + "\n\n".join(prompt_format.skill_section(s["name"], s["body"]) for s in skill_specs)
    return {
        "agent": {"slug": "big", "instructions": instructions, "tools": names,
                  "model_profile": {"model": "m"}},
        "tools": tool_specs,
        "granted_tools": names if inline else names[:granted],
        "policies": [],
        "skills": [] if inline else skill_specs,
    }


def tokens(snap: dict, state: dict) -> int:
    from agents.backends.base import estimate_tokens
    from runs import context

    request = context.build_request(snap, state)
    return estimate_tokens(request.system + json.dumps(request.messages) + json.dumps(request.tools))


def run() -> list[dict]:
    state = {"messages": [{"role": "user", "content": "How healthy is Acme Corp?"}], "playbooks": [],
             "active_skills": []}
    scoped = tokens(snapshot(inline=False), state)
    with_skill = tokens(snapshot(inline=False), state | {"active_skills": ["skill-03"]})
    everything = tokens(snapshot(inline=True), state)
    return [
        record("context", "scoped, skills on demand", 0, "input_tokens", scoped, "tokens"),
        record("context", "scoped, one skill loaded", 0, "input_tokens", with_skill, "tokens"),
        record("context", "all tools, all skill bodies inline", 0, "input_tokens", everything, "tokens"),
    ]
