"""Builds the model's context from the run's frozen snapshot and its state. Pure.

Stable parts first (instructions, playbooks, skill index, active skills), history last, so a
backend with prompt caching reuses the prefix across turns.
"""

from agents.backends.base import ModelRequest
from governance import engine

LOAD_SKILL = "load_skill"
LOAD_SKILL_SPEC = {
    "name": LOAD_SKILL,
    "description": "Read the full procedure of one of the skills listed under 'Skills available'.",
    "input_schema": {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 64}},
        "required": ["name"],
        "additionalProperties": False,
    },
}


def policies(snapshot: dict) -> list[engine.PolicySpec]:
    return [engine.PolicySpec.from_dict(p) for p in snapshot["policies"]]


def visible_tools(snapshot: dict) -> list[str]:
    """Tools the model may be shown: on the agent, enabled and granted to one of the caller's roles."""
    granted = set(snapshot["granted_tools"])
    return [name for name in snapshot["agent"]["tools"] if name in granted and name in snapshot["tools"]]


def system_prompt(snapshot: dict, state: dict) -> str:
    specs = {p["id"]: p for p in snapshot["policies"]}
    parts = [snapshot["agent"]["instructions"].strip()]
    for policy_id in state.get("playbooks", []):
        spec = specs[policy_id]
        parts.append(f"## Playbook: {spec['name']}\n{spec['content'].strip()}")
    skills = snapshot.get("skills", [])
    if skills:
        index = "\n".join(f"- {s['name']}: {s['description']}" for s in skills)
        parts.append(f"## Skills available\n{index}\nCall `{LOAD_SKILL}` with a skill's name to read its procedure.")
    by_name = {s["name"]: s for s in skills}
    for name in state.get("active_skills", []):
        parts.append(f"## Skill: {name} (active)\n{by_name[name]['body'].strip()}")
    return "\n\n".join(parts)


def tool_specs(snapshot: dict) -> list[dict]:
    specs = policies(snapshot)
    agent = snapshot["agent"]["slug"]
    shown = []
    for name in visible_tools(snapshot):
        tool = snapshot["tools"][name]
        description = tool["description"]
        for spec, _ in engine.tool_guides(specs, agent=agent, tool=name):
            description += f"\n\nGuidance ({spec.name}): {spec.content.strip()}"
        shown.append({"name": name, "description": description, "input_schema": tool["input_schema"]})
    if snapshot.get("skills"):
        shown.append(LOAD_SKILL_SPEC)
    return shown


def build_request(snapshot: dict, state: dict) -> ModelRequest:
    return ModelRequest(
        system=system_prompt(snapshot, state),
        messages=list(state["messages"]),
        tools=tool_specs(snapshot),
        model=snapshot["agent"]["model_profile"]["model"],
    )
