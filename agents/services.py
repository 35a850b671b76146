"""Writes for agents: publishing freezes the draft into an immutable version."""

from django.db import transaction

from agents.models import Agent, AgentVersion


def agent_spec(agent: Agent) -> dict:
    """What a published version freezes: everything a run needs from the agent."""
    return {
        "name": agent.name,
        "instructions": agent.instructions,
        "model_profile": agent.model_profile.spec(),
        "tools": sorted(agent.tools.values_list("name", flat=True)),
        "output_schema": agent.output_schema,
        "max_turns": agent.max_turns,
        "max_tool_calls": agent.max_tool_calls,
        "max_tokens": agent.max_tokens,
        "deadline_seconds": agent.deadline_seconds,
    }


@transaction.atomic
def agent_publish(*, agent: Agent, user=None) -> tuple[AgentVersion, bool]:
    """Publish the draft as a new version; (current version, False) when nothing changed."""
    agent = Agent.objects.select_for_update().get(pk=agent.pk)
    spec = agent_spec(agent)
    current = agent.current_version
    if current is not None and current.spec == spec:
        return current, False
    version = AgentVersion.objects.create(
        agent=agent, version=(current.version + 1) if current else 1, spec=spec, published_by=user
    )
    return version, True
